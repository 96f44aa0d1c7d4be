"""The README cannot rot: every code block marked runnable is executed, in order, in one scratch directory.

A runnable block is a ```bash fence directly preceded by the line ``<!-- runnable -->``. Each non-empty line is
one command, run as an argv list (no shell): leading ``NAME=value`` words become environment variables, and a
trailing ``# exit N`` comment states the expected exit code (default 0). ``fusebisect`` and ``python`` run
from this environment; ``examples/`` is copied into the scratch directory first.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK_RE = re.compile(r"<!-- runnable -->\n```bash\n(.*?)```", re.S)
EXIT_RE = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")


def runnable_commands(text: str) -> list[tuple[dict, list[str], int, str]]:
    """(env, argv, expected exit code, source line) for every command of every runnable block."""
    commands = []
    for block in BLOCK_RE.findall(text):
        for line in block.splitlines():
            line = line.rstrip()
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            expected = 0
            m = EXIT_RE.search(line)
            if m:
                expected = int(m.group(1))
                line_cmd = line[: m.start()]
            else:
                line_cmd = line
            words = shlex.split(line_cmd, comments=True)
            env = {}
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
                key, _, value = words.pop(0).partition("=")
                env[key] = value
            commands.append((env, words, expected, line))
    return commands


def test_readme_has_runnable_blocks():
    cmds = runnable_commands(README.read_text(encoding="utf-8"))
    programs = {argv[0] for _, argv, _, _ in cmds}
    assert "fusebisect" in programs
    subcommands = {argv[1] for _, argv, _, _ in cmds if argv[0] == "fusebisect"}
    # every mode the README documents is exercised
    for mode in ("demo", "run", "compare", "overflow", "cfg", "rules", "inspect", "report", "dump"):
        assert mode in subcommands, f"README has no runnable example of `fusebisect {mode}`"


@pytest.mark.slow
def test_readme_commands_run(tmp_path):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    bindir = Path(sys.executable).parent
    base_env = dict(os.environ)
    base_env["PATH"] = f"{bindir}{os.pathsep}{base_env.get('PATH', '')}"
    base_env.pop("NO_COLOR", None)
    for env, argv, expected, line in runnable_commands(README.read_text(encoding="utf-8")):
        if argv[0] == "python":
            argv = [sys.executable, *argv[1:]]
        proc = subprocess.run(argv, cwd=tmp_path, env={**base_env, **env}, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == expected, (
            f"README command `{line}` exited {proc.returncode}, expected {expected}\n"
            f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
