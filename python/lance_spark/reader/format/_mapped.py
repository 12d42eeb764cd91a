"""Bounds-checked, zero-copy access to one memory-mapped data file."""
from __future__ import annotations

import pyarrow as pa

from ..errors import LanceFormatError


class MappedFile:
    """A data file mapped into memory; every read is checked against its size."""

    def __init__(self, path: str):
        self.path = path
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

    def close(self) -> None:
        self._mm.close()
