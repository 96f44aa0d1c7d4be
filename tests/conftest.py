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


# msaccucmp parses binary dumps with CANN's libascend_dump_parser.so (ParseDumpProtoToJson: header protobuf ->
# JSON), which is not on PyPI. This runs the real msaccucmp.py with only that one function done in Python.
_HEADER_PARSER_SHIM = r'''
import os, runpy, struct, sys
script = sys.argv[1]
sys.argv = [script] + sys.argv[2:]
sys.path.insert(0, os.path.dirname(script))
from dump_parse import big_dump_data
from fusebisect.proto import dump_data_pb2


def _shape(shape):
    return {"dim": [int(d) for d in shape.dim]}


def _tensor(t, output):
    item = {"data_type": int(t.data_type), "format": int(t.format), "shape": _shape(t.shape),
            "original_shape": _shape(t.original_shape), "size": int(t.size), "address": int(t.address),
            "sub_format": int(t.sub_format)}
    if output and t.HasField("original_op"):
        item["original_op"] = {"name": t.original_op.name, "output_index": int(t.original_op.output_index),
                               "data_type": int(t.original_op.data_type), "format": int(t.original_op.format)}
    return item


def _parse_dump_to_json(self):
    with open(self.dump_file_path, "rb") as handle:
        length = struct.unpack("<Q", handle.read(8))[0]
        msg = dump_data_pb2.DumpData()
        msg.ParseFromString(handle.read(length))
    self.dump_json_data = {
        "version": msg.version, "dump_time": int(msg.dump_time), "op_name": msg.op_name,
        "input": [_tensor(t, False) for t in msg.input], "output": [_tensor(t, True) for t in msg.output],
        "buffer": [{"buffer_type": int(b.buffer_type), "size": int(b.size)} for b in msg.buffer],
        "space": [{"size": int(s.size)} for s in msg.space],
        "attr": [{"name": a.name, "value": a.value} for a in msg.attr]}


big_dump_data.BigDumpDataParser._parse_dump_to_json = _parse_dump_to_json
runpy.run_path(script, run_name="__main__")
'''


@dataclass
class Msaccucmp:
    """How to run the real msaccucmp.py as a script."""

    script: Path
    env: dict

    def run(self, *args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run ``msaccucmp.py ARGS`` (argv list, no shell); returns the completed process (text output)."""
        return subprocess.run([sys.executable, str(self.script), *args], cwd=cwd, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def run_parsing_binary(self, *args: str, cwd: Path | None = None,
                           timeout: float = 120) -> subprocess.CompletedProcess:
        """Like :meth:`run`, for binary dumps: CANN's header parser (not installed) done in Python."""
        shim = ROOT / ".pytest_cache" / "msaccucmp_with_header_parser.py"
        shim.parent.mkdir(parents=True, exist_ok=True)
        if not shim.is_file() or shim.read_text() != _HEADER_PARSER_SHIM:
            shim.write_text(_HEADER_PARSER_SHIM)
        return subprocess.run([sys.executable, str(shim), str(self.script), *args], cwd=cwd, env=self.env,
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
