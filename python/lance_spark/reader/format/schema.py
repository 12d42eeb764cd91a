"""Lance schemas (the depth-first Field list of a manifest or file descriptor) and logical types
(``int32``, ``timestamp:us:UTC``, ``fixed_size_list:float:4``, ...), and their Arrow forms."""
from __future__ import annotations

from dataclasses import dataclass, field as dc_field
from typing import Dict, List, Optional

import pyarrow as pa

from ..errors import LanceFormatError

PARENT, REPEATED, LEAF = 0, 1, 2

_SIMPLE = {
    "null": pa.null(), "bool": pa.bool_(),
    "int8": pa.int8(), "uint8": pa.uint8(), "int16": pa.int16(), "uint16": pa.uint16(),
    "int32": pa.int32(), "uint32": pa.uint32(), "int64": pa.int64(), "uint64": pa.uint64(),
    "halffloat": pa.float16(), "float": pa.float32(), "double": pa.float64(),
    "string": pa.string(), "large_string": pa.large_string(),
    "binary": pa.binary(), "large_binary": pa.large_binary(),
    "date32:day": pa.date32(), "date64:ms": pa.date64(),
}
_UNITS = {"s", "ms", "us", "ns"}


@dataclass
class LanceField:
    id: int
    parent_id: int
    name: str
    logical_type: str
    nullable: bool
    kind: int  # PARENT / REPEATED / LEAF
    encoding: int = 0  # 0.1 files: NONE/PLAIN/VAR_BINARY/DICTIONARY
    dictionary: Optional[tuple] = None  # 0.1 files: (offset, length) of the dictionary values
    metadata: Dict[str, bytes] = dc_field(default_factory=dict)
    children: List["LanceField"] = dc_field(default_factory=list)

    def walk(self):
        """This field and its descendants, depth first."""
        yield self
        for c in self.children:
            yield from c.walk()

    @property
    def is_nested(self) -> bool:
        lt = self.logical_type
        return lt in ("struct", "map", "list", "list.struct", "large_list", "large_list.struct")


def _unit(u: str, lt: str, where: str) -> str:
    if u not in _UNITS:
        raise LanceFormatError(where, f"unknown time unit {u!r} in logical type {lt!r}")
    return u


def logical_to_arrow(lt: str, children: List[pa.Field], where: str) -> pa.DataType:
    """Arrow type of a Lance logical type name; nested types take their child fields."""
    if lt in _SIMPLE:
        return _SIMPLE[lt]
    parts = lt.split(":")
    head = parts[0]
    try:
        if head == "date32" and len(parts) == 2:
            return pa.date32()
        if head == "date64" and len(parts) == 2:
            return pa.date64()
        if head == "time32" and len(parts) == 2:
            return pa.time32(_unit(parts[1], lt, where))
        if head == "time64" and len(parts) == 2:
            return pa.time64(_unit(parts[1], lt, where))
        if head == "duration" and len(parts) == 2:
            return pa.duration(_unit(parts[1], lt, where))
        if head == "timestamp" and len(parts) >= 2:
            tz = ":".join(parts[2:])
            return pa.timestamp(_unit(parts[1], lt, where), None if tz in ("", "-") else tz)
        if head == "decimal" and len(parts) == 4:
            bits, p, s = int(parts[1]), int(parts[2]), int(parts[3])
            if bits == 128:
                return pa.decimal128(p, s)
            if bits == 256:
                return pa.decimal256(p, s)
        if head == "fixed_size_binary" and len(parts) == 2:
            return pa.binary(int(parts[1]))
        if head == "fixed_size_list" and len(parts) >= 3:
            item = logical_to_arrow(":".join(parts[1:-1]), [], where)
            return pa.list_(pa.field("item", item, True), int(parts[-1]))
        if head == "dict" and len(parts) >= 4:
            value = logical_to_arrow(":".join(parts[1:-2]), [], where)
            index = logical_to_arrow(parts[-2], [], where)
            return pa.dictionary(index, value, parts[-1] == "true")
    except ValueError as e:
        raise LanceFormatError(where, f"malformed logical type {lt!r}: {e}") from None
    if lt in ("list", "list.struct", "large_list", "large_list.struct"):
        if len(children) != 1:
            raise LanceFormatError(where, f"list field must have exactly one child, has {len(children)}")
        return pa.large_list(children[0]) if lt.startswith("large") else pa.list_(children[0])
    if lt == "struct":
        return pa.struct(children)
    if lt == "map" or lt.startswith("map:"):
        if len(children) != 1 or not pa.types.is_struct(children[0].type) or children[0].type.num_fields != 2:
            raise LanceFormatError(where, "map field must have one child: a struct of key and value")
        entries = children[0].type
        return pa.map_(entries.field(0), entries.field(1), keys_sorted=lt.endswith(":sorted"))
    raise LanceFormatError(where, f"unsupported Lance logical type {lt!r}")


def arrow_field(f: LanceField, where: str) -> pa.Field:
    kids = [arrow_field(c, where) for c in f.children]
    typ = logical_to_arrow(f.logical_type, kids, f"{where} (field {f.name!r}, id {f.id})")
    return pa.field(f.name, typ, f.nullable, metadata=f.metadata or None)


def build_fields(pb_fields, where: str) -> List[LanceField]:
    """Top-level LanceFields (with children) from a depth-first protobuf Field list."""
    by_id: Dict[int, LanceField] = {}
    top: List[LanceField] = []
    for pf in pb_fields:
        dict_loc = None
        if pf.HasField("dictionary") and (pf.dictionary.offset or pf.dictionary.length):
            dict_loc = (pf.dictionary.offset, pf.dictionary.length)
        lf = LanceField(
            id=pf.id, parent_id=pf.parent_id, name=pf.name, logical_type=pf.logical_type,
            nullable=pf.nullable, kind=int(pf.type), encoding=int(pf.encoding),
            dictionary=dict_loc, metadata=dict(pf.metadata))
        if lf.id in by_id:
            raise LanceFormatError(where, f"duplicate field id {lf.id} ({lf.name!r})")
        parent = by_id.get(lf.parent_id)
        # Old writers used parent_id 0 for top-level fields; a real parent is a struct or list.
        if lf.parent_id < 0 or parent is None or (lf.parent_id == 0 and not parent.is_nested):
            top.append(lf)
        else:
            parent.children.append(lf)
        by_id[lf.id] = lf
    return top


def to_arrow_schema(top: List[LanceField], metadata: Optional[Dict[bytes, bytes]], where: str) -> pa.Schema:
    return pa.schema([arrow_field(f, where) for f in top], metadata=metadata or None)
