"""Access to the generated protobuf modules, with a clear error when they were not generated."""
from __future__ import annotations

try:
    from ._proto import encodings_v2_0_pb2 as encodings_pb2  # noqa: F401
    from ._proto import file2_pb2, file_pb2, table_pb2, transaction_pb2  # noqa: F401
except ImportError as e:  # pragma: no cover - only in an ungenerated dev checkout
    raise ImportError(
        "lance_spark's protobuf modules are missing; generate them with "
        "`python python/gen_protos.py` (a built wheel contains them)") from e
