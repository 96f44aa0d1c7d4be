"""The command line: a thin layer over the library. Each ``cmd_*.py`` module registers one command group."""
