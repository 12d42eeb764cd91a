"""The indices a version lists in its manifest's index section (`IndexMetadata`): name, type,
columns, the fragments each covers (a roaring bitmap), the version it was built at. The
index files themselves are not read."""
from __future__ import annotations

import dataclasses
import datetime as _dt
import uuid as _uuid
from typing import Dict, List, Optional

from ..errors import LanceFormatError
from ..format.schema import LanceField


@dataclasses.dataclass(frozen=True)
class IndexInfo:
    name: str
    index_type: str            # pylance's names: BTree, Bitmap, ZoneMap, BloomFilter, LabelList, Vector, ...
    columns: List[str]         # dotted paths of the indexed fields
    fragments: List[int]       # the fragments the index covers
    unindexed_fragments: List[int]
    dataset_version: int
    index_version: int
    uuid: str
    created_at: Optional[_dt.datetime]


def index_type(type_url: str) -> str:
    """pylance's type name from the details' type URL (``/lance.table.BTreeIndexDetails`` -> BTree)."""
    kind = type_url.rsplit(".", 1)[-1].rsplit("/", 1)[-1]
    if not kind:
        return "unknown"
    return kind[:-len("IndexDetails")] if kind.endswith("IndexDetails") and kind != "IndexDetails" else kind


def _paths(fields: List[LanceField]) -> Dict[int, str]:
    out: Dict[int, str] = {}

    def walk(f: LanceField, prefix: str) -> None:
        path = f"{prefix}{f.name}"
        out[f.id] = path
        for c in f.children:
            walk(c, path + ".")
    for f in fields:
        walk(f, "")
    return out


def list_indices(section, fields: List[LanceField], fragment_ids: List[int], where: str) -> List[IndexInfo]:
    """`section`: the manifest's IndexSection message (None: no indices)."""
    if section is None:
        return []
    from pyroaring import BitMap

    paths = _paths(fields)
    out = []
    for idx in section.indices:
        raw = idx.uuid.uuid
        uid = str(_uuid.UUID(bytes=raw)) if len(raw) == 16 else raw.hex()
        try:
            covered = sorted(BitMap.deserialize(idx.fragment_bitmap)) if idx.fragment_bitmap else []
        except Exception as e:
            raise LanceFormatError(where, f"index {idx.name!r} ({uid}): corrupt fragment bitmap: {e}") from None
        cols = [paths.get(i, f"<field {i}>") for i in idx.fields]
        created = (_dt.datetime.fromtimestamp(idx.created_at / 1000, _dt.timezone.utc)
                   if idx.HasField("created_at") else None)
        seen = set(covered)
        out.append(IndexInfo(idx.name, index_type(idx.index_details.type_url), cols, covered,
                             [f for f in fragment_ids if f not in seen], idx.dataset_version,
                             idx.index_version if idx.HasField("index_version") else 0, uid, created))
    return out
