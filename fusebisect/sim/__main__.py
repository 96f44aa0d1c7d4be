"""``python -m fusebisect.sim train [options]``: run the simulated Ascend training job (a simulator for demos and
tests; see ``--help``)."""

from fusebisect.sim.cli import main

raise SystemExit(main())
