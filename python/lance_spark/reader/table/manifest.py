"""Manifests: finding them under _versions/ (one per version), decoding them, checking their
reader feature flags, and reading the transaction each one records."""
from __future__ import annotations

import os
import struct
from typing import Dict, Optional

from google.protobuf.message import DecodeError

from ..._protos import table_pb2, transaction_pb2
from ..errors import LanceFormatError

MAGIC = b"LANC"
U64_MAX = 2**64 - 1
V2_NAME_LEN = 20

#: reader feature flags this reader understands
FLAG_DELETION_FILES = 1
FLAG_STABLE_ROW_IDS = 2
FLAG_USE_V2_FORMAT_DEPRECATED = 4
FLAG_TABLE_CONFIG = 8
KNOWN_READER_FLAGS = (FLAG_DELETION_FILES | FLAG_STABLE_ROW_IDS
                      | FLAG_USE_V2_FORMAT_DEPRECATED | FLAG_TABLE_CONFIG)

_OPERATION_NAMES = {
    "append": "Append", "delete": "Delete", "overwrite": "Overwrite",
    "create_index": "CreateIndex", "rewrite": "Rewrite", "merge": "Merge",
    "restore": "Restore", "reserve_fragments": "ReserveFragments", "update": "Update",
    "project": "Project", "update_config": "UpdateConfig",
    "data_replacement": "DataReplacement", "clone": "Clone", "update_bases": "UpdateBases",
}


def version_files(root: str) -> Dict[int, str]:
    """Map version -> manifest path. V1 names are `{v}.manifest`, V2 `{2**64-1-v:020}.manifest`."""
    vdir = os.path.join(root, "_versions")
    if not os.path.isdir(vdir):
        raise LanceFormatError(root, "not a Lance dataset (no _versions directory)")
    out: Dict[int, str] = {}
    schemes = set()
    dupes = []
    for name in os.listdir(vdir):
        if not name.endswith(".manifest"):
            continue
        stem = name[: -len(".manifest")]
        if not stem.isdigit():
            continue  # e.g. temporary or detached manifests
        if len(stem) == V2_NAME_LEN:
            schemes.add("V2")
            version = U64_MAX - int(stem)
        else:
            schemes.add("V1")
            version = int(stem)
        path = os.path.join(vdir, name)
        dupes.append(version) if version in out else None
        out[version] = path
    if len(schemes) > 1:
        raise LanceFormatError(vdir, "mixes V1 ({version}.manifest) and V2 (inverted, zero-padded) "
                                     "manifest naming schemes")
    if dupes:
        raise LanceFormatError(vdir, f"version {dupes[0]} has more than one manifest")
    if not out:
        raise LanceFormatError(root, "not a Lance dataset (no manifests in _versions)")
    return out


def _read_message(path: str, data: bytes, pos: int, msg, what: str):
    if pos < 0 or pos + 4 > len(data):
        raise LanceFormatError(path, f"{what} position {pos} is outside the file ({len(data)} bytes)")
    (length,) = struct.unpack_from("<I", data, pos)
    end = pos + 4 + length
    if end > len(data):
        raise LanceFormatError(path, f"{what} of {length} bytes at {pos} runs past the end of the file")
    try:
        msg.ParseFromString(data[pos + 4:end])
    except DecodeError as e:
        raise LanceFormatError(path, f"corrupt {what} protobuf: {e}") from None
    return msg


def read_manifest_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise LanceFormatError(path, f"cannot read manifest: {e.strerror or e}") from None


def parse_manifest(path: str, data: Optional[bytes] = None) -> "table_pb2.Manifest":
    data = read_manifest_bytes(path) if data is None else data
    if len(data) < 16:
        raise LanceFormatError(path, f"manifest file too short ({len(data)} bytes)")
    pos, major, minor, magic = struct.unpack("<qHH4s", data[-16:])
    if magic != MAGIC:
        raise LanceFormatError(path, f"bad magic {magic!r} (expected {MAGIC!r}): not a Lance manifest")
    if pos < 0 or pos >= len(data) - 16:
        raise LanceFormatError(path, f"manifest position {pos} is outside the file")
    m = _read_message(path, data, pos, table_pb2.Manifest(), "manifest")
    return m


def check_reader_flags(m, where: str) -> None:
    unknown = m.reader_feature_flags & ~KNOWN_READER_FLAGS
    if unknown:
        bits = [1 << i for i in range(64) if unknown >> i & 1]
        raise LanceFormatError(
            where, f"manifest (version {m.version}) requires unknown reader feature flag(s) "
                   f"{', '.join(str(b) for b in bits)} (flags={m.reader_feature_flags}); "
                   "this reader cannot read the dataset safely")


def read_transaction(root: str, manifest_path: str, m, data: Optional[bytes] = None):
    """The Transaction of a manifest (inline section or _transactions/ file), or None."""
    if m.HasField("transaction_section"):
        data = read_manifest_bytes(manifest_path) if data is None else data
        return _read_message(manifest_path, data, m.transaction_section,
                             transaction_pb2.Transaction(), "transaction")
    if not m.transaction_file:
        return None
    path = os.path.join(root, "_transactions", m.transaction_file)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    t = transaction_pb2.Transaction()
    try:
        t.ParseFromString(raw)
    except DecodeError as e:
        raise LanceFormatError(path, f"corrupt transaction protobuf: {e}") from None
    return t


def operation_name(txn) -> Optional[str]:
    if txn is None:
        return None
    which = txn.WhichOneof("operation")
    return _OPERATION_NAMES.get(which, which) if which else None
