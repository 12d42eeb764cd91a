"""Generate the protobuf modules of lance_spark from the repository's protos/*.proto.

Usage (dev):  python python/gen_protos.py
The build (setup.py build_py) calls generate() too.  Output: lance_spark/_proto/ (not committed).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_PROTO_DIR = HERE.parent / "protos"
DEFAULT_OUT_DIR = HERE / "lance_spark" / "_proto"

_BARE_IMPORT = re.compile(r"^import (\w+_pb2) as (\w+)$", re.MULTILINE)


def generate(proto_dir: Path = DEFAULT_PROTO_DIR, out_dir: Path = DEFAULT_OUT_DIR) -> list[Path]:
    """Run grpc_tools.protoc on every .proto in proto_dir; make sibling imports package-relative."""
    from grpc_tools import protoc  # build requirement: grpcio-tools
    import grpc_tools

    proto_dir = Path(proto_dir).resolve()
    out_dir = Path(out_dir).resolve()
    protos = sorted(proto_dir.glob("*.proto"))
    if not protos:
        raise FileNotFoundError(f"no .proto files in {proto_dir}")
    out_dir.mkdir(parents=True, exist_ok=True)
    well_known = Path(grpc_tools.__file__).resolve().parent / "_proto"
    args = ["protoc", f"-I{proto_dir}", f"-I{well_known}", f"--python_out={out_dir}"]
    args += [str(p) for p in protos]
    rc = protoc.main(args)
    if rc != 0:
        raise RuntimeError(f"protoc failed ({rc}) on {proto_dir}")
    written = []
    for p in protos:
        mod = out_dir / (p.stem + "_pb2.py")
        text = mod.read_text()
        mod.write_text(_BARE_IMPORT.sub(r"from . import \1 as \2", text))
        written.append(mod)
    init = out_dir / "__init__.py"
    init.write_text('"""Generated from protos/*.proto by gen_protos.py; do not edit."""\n')
    return written


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    proto_dir = Path(argv[0]) if argv else DEFAULT_PROTO_DIR
    out_dir = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT_DIR
    for m in generate(proto_dir, out_dir):
        print(f"wrote {m}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
