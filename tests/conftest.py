"""Shared fixtures.

``msaccucmp`` locates the real msaccucmp.py (CANN's comparison tool, shipped on PyPI inside
``mindstudio-probe``) to use as a peer. It is found in the environment or installed with ``--no-deps`` into
``.pytest_cache/msprobe`` (its declared dependencies are heavy and unused by msaccucmp). If it can be neither
found nor installed, the tests that need it fail: they are never skipped silently.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MSPROBE_VERSION = "26.2.0"


@dataclass
class Msaccucmp:
    """How to run the real msaccucmp.py as a script."""

    script: Path
    env: dict

    def run(self, *args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run ``msaccucmp.py ARGS`` (argv list, no shell); returns the completed process (text output)."""
        return subprocess.run([sys.executable, str(self.script), *args], cwd=cwd, env=self.env,
                              capture_output=True, text=True, timeout=timeout)


def _find_msprobe(extra_path: Path | None) -> Path | None:
    if extra_path is not None and (extra_path / "msprobe" / "msaccucmp" / "msaccucmp.py").is_file():
        return extra_path / "msprobe" / "msaccucmp" / "msaccucmp.py"
    spec = importlib.util.find_spec("msprobe")
    if spec is not None and spec.submodule_search_locations:
        script = Path(list(spec.submodule_search_locations)[0]) / "msaccucmp" / "msaccucmp.py"
        if script.is_file():
            return script
    return None


@pytest.fixture(scope="session")
def msaccucmp() -> Msaccucmp:
    cache = ROOT / ".pytest_cache" / "msprobe"
    script = _find_msprobe(cache)
    if script is None:
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                               str(cache), f"mindstudio-probe=={MSPROBE_VERSION}"],
                              capture_output=True, text=True)
        script = _find_msprobe(cache)
        if script is None:
            pytest.fail(f"the real msaccucmp is needed as a peer and could not be installed:\n{proc.stderr}")
    env = dict(os.environ)
    parts = [str(script.parent)]
    if cache.is_dir():
        parts.append(str(cache))
    env["PYTHONPATH"] = os.pathsep.join(parts + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return Msaccucmp(script=script, env=env)
