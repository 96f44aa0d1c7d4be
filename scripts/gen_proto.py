"""Regenerate fusebisect/proto/*_pb2.py from the .proto files (needs grpcio-tools: pip install grpcio-tools).

Usage: python scripts/gen_proto.py [--out DIR]   (default: fusebisect/proto, in place)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent.parent / "fusebisect" / "proto"
PROTOS = ("dump_data.proto", "ge_ir.proto")


def generate(out_dir: Path) -> list[Path]:
    """Run protoc (from grpc_tools) on each schema; return the generated module paths."""
    from grpc_tools import protoc

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in PROTOS:
        rc = protoc.main(["protoc", f"-I{PROTO_DIR}", f"--python_out={out_dir}", str(PROTO_DIR / name)])
        if rc != 0:
            raise SystemExit(f"protoc failed on {name} (exit {rc})")
        written.append(out_dir / name.replace(".proto", "_pb2.py"))
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PROTO_DIR)
    args = parser.parse_args()
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
