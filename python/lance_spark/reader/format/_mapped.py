"""Bounds-checked, zero-copy access to one memory-mapped data file."""
from __future__ import annotations

import struct
from typing import Optional, Tuple

import pyarrow as pa

from ..errors import LanceFormatError

MAGIC = b"LANC"


class MappedFile:
    """A data file mapped into memory; every read is checked against its size. `share`: a mapping
    of the same file to take over (it is closed with this one), so a file is mapped only once."""

    def __init__(self, path: str, share: Optional["MappedFile"] = None):
        self.path = path
        if share is not None:
            self._mm, self._buf, self.size = share._mm, share._buf, share.size
            return
        try:
            self._mm = pa.memory_map(path, "r")
        except (OSError, pa.ArrowException) as e:
            raise LanceFormatError(path, f"cannot open data file: {e}") from None
        self._buf = self._mm.read_buffer()  # zero-copy view of the whole file
        self.size = self._buf.size

    def _check(self, pos: int, size: int, what: str) -> None:
        if pos < 0 or size < 0 or pos + size > self.size:
            raise LanceFormatError(self.path, f"{what} [{pos}, {pos + size}) lies outside the file "
                                              f"({self.size} bytes; truncated?)")

    def _read(self, pos: int, size: int) -> pa.Buffer:
        self._check(pos, size, "read")
        return self._buf.slice(pos, size)

    def footer_version(self) -> Tuple[int, int]:
        """(major, minor) of the footer every Lance data file ends with (legacy and 2.x alike):
        u16 major, u16 minor, "LANC"."""
        if self.size < 8:
            raise LanceFormatError(self.path, f"file too short for a Lance footer ({self.size} bytes)")
        major, minor, magic = struct.unpack("<HH4s", self._read(self.size - 8, 8).to_pybytes())
        if magic != MAGIC:
            raise LanceFormatError(self.path, f"bad magic {magic!r} (expected {MAGIC!r}): "
                                              "truncated or not a Lance file")
        return major, minor

    def close(self) -> None:
        self._mm.close()
