"""Page statistics layout 2: raw bound bytes decoded by the field's type (the inverse of
struct.pack of the values, computed here)."""
import struct
from decimal import Decimal

import pyarrow as pa
import pytest

from lance_spark.reader.errors import LanceFormatError
from lance_spark.reader.format.file_v2 import _bounds_as


@pytest.mark.parametrize("typ, values, pack", [
    (pa.int64(), [-5, None, 2**40], lambda v: struct.pack("<q", v)),
    (pa.uint16(), [0, 65535, None], lambda v: struct.pack("<H", v)),
    (pa.float64(), [2.5, None, -0.0], lambda v: struct.pack("<d", v)),
    (pa.float32(), [1.5, -3.25, None], lambda v: struct.pack("<f", v)),
    (pa.date32(), [0, 19000, None], lambda v: struct.pack("<i", v)),
    (pa.timestamp("us", "UTC"), [1, None, 1_700_000_000_000_000], lambda v: struct.pack("<q", v)),
    (pa.bool_(), [True, None, False], lambda v: bytes([1 if v else 0])),
    (pa.binary(3), [b"abc", None, b"\x00\xff\x01"], lambda v: v),
    (pa.string(), ["k00000", None, "zé"], lambda v: v.encode()),
])
def test_bounds_decode_to_the_field_type(typ, values, pack):
    raw = pa.array([None if v is None else pack(v) for v in values], pa.binary())
    got = _bounds_as(raw, typ, "f.lance")
    assert got.type == typ
    expected = pa.array(values, pa.int64() if typ == pa.date32() else typ)
    if typ == pa.date32():
        expected = expected.cast(pa.int32()).cast(pa.date32())
    assert got.to_pylist() == expected.to_pylist()


def test_decimal_bounds_are_little_endian_twos_complement():
    typ = pa.decimal128(7, 2)
    vals = [Decimal("-1.50"), Decimal("99999.99"), None]
    raw = pa.array([None if v is None else int(v.scaleb(2)).to_bytes(16, "little", signed=True) for v in vals],
                   pa.binary())
    assert _bounds_as(raw, typ, "f.lance").to_pylist() == vals


def test_a_bound_of_the_wrong_width_names_the_file():
    with pytest.raises(LanceFormatError, match=r"f\.lance.*\[4\] bytes for int64"):
        _bounds_as(pa.array([b"\x01\x02\x03\x04"], pa.binary()), pa.int64(), "f.lance")
