"""Repetition and definition levels of file versions 2.1 / 2.2, turned into Arrow structure.

A leaf column's page carries, per entry, a repetition level (r > 0: a new list starts at list
level r, counted from the innermost list = 1; r = max: a new row) and a definition level (0: a
valid value; d > 0: null or empty at the layer d names, layers counted from the innermost one,
each nullable layer taking one level, a list that may be null and empty two: null, then empty).

`skeleton` converts them, without a loop over values, into one `Layer` per layer of the leaf's
path, outermost first: the number of slots the layer has (rows for the outermost one, items of the
enclosing list otherwise), their validity, and for list layers the offsets into the next layer.
For each layer j (innermost = 0):

- an entry is a slot of layer j when it starts a new element there (its repetition level reaches
  the number of lists inside layer j's enclosing list) and the enclosing list exists for it (its
  null/empty layer lies inside that list);
- a slot is valid when the entry's null/empty layer lies inside layer j, or it is layer j's
  "empty list" level;
- a list's offsets count the next layer's slots before each of its own (a cumulative sum).

The leaf's slots are exactly the visible items, i.e. the values stored in the page.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np

from ..._proto import encodings_v2_1_pb2 as pb
from .encodings_v21 import DecodeError

ALL_VALID_ITEM = pb.REPDEF_ALL_VALID_ITEM
ALL_VALID_LIST = pb.REPDEF_ALL_VALID_LIST
NULLABLE_ITEM = pb.REPDEF_NULLABLE_ITEM
NULLABLE_LIST = pb.REPDEF_NULLABLE_LIST
EMPTYABLE_LIST = pb.REPDEF_EMPTYABLE_LIST
NULL_AND_EMPTY_LIST = pb.REPDEF_NULL_AND_EMPTY_LIST
LIST_LAYERS = {ALL_VALID_LIST, NULLABLE_LIST, EMPTYABLE_LIST, NULL_AND_EMPTY_LIST}
_NAMES = {ALL_VALID_ITEM: "all-valid item", ALL_VALID_LIST: "all-valid list", NULLABLE_ITEM: "nullable item",
          NULLABLE_LIST: "nullable list", EMPTYABLE_LIST: "emptyable list",
          NULL_AND_EMPTY_LIST: "nullable/emptyable list"}


def layer_name(kind: int) -> str:
    return _NAMES.get(kind, f"unknown({kind})")


@dataclass
class Layer:
    length: int
    valid: Optional[np.ndarray] = None    # bool per slot; None: all valid
    offsets: Optional[np.ndarray] = None  # int64, length + 1, for list layers


def _codes(kinds: Sequence[int]):
    layer_of = [-1]
    empty = [False]
    for j, k in enumerate(kinds):
        if k in (ALL_VALID_ITEM, ALL_VALID_LIST):
            continue
        if k in (NULLABLE_ITEM, NULLABLE_LIST):
            layer_of.append(j)
            empty.append(False)
        elif k == EMPTYABLE_LIST:
            layer_of.append(j)
            empty.append(True)
        elif k == NULL_AND_EMPTY_LIST:
            layer_of += [j, j]
            empty += [False, True]
        else:
            raise DecodeError(f"unknown rep/def layer {k}")
    return np.asarray(layer_of, dtype=np.int64), np.asarray(empty, dtype=bool)


def visible_count(kinds: Sequence[int], defs: Optional[np.ndarray], n_entries: int) -> int:
    """Entries that carry a value slot (everything below the innermost list is visible)."""
    if defs is None:
        return n_entries
    layer_of, _ = _codes(kinds)
    if defs.size and int(defs.max()) >= layer_of.size:
        raise DecodeError(f"definition level {int(defs.max())} exceeds the {layer_of.size - 1} the layers allow")
    first_list = next((j for j, k in enumerate(kinds) if k in LIST_LAYERS), len(kinds))
    return int(np.count_nonzero(layer_of[defs] < first_list))


def skeleton(kinds: Sequence[int], rep: Optional[np.ndarray], defs: Optional[np.ndarray],
             n_entries: int, num_rows: int) -> List[Layer]:
    """Layers (outermost first) of one page of a leaf column with layers `kinds` (innermost first)."""
    K = len(kinds)
    if K == 0:
        raise DecodeError("page has no rep/def layers")
    layer_of, empty_code = _codes(kinds)
    is_list = [k in LIST_LAYERS for k in kinds]
    if not any(is_list):
        return _flat_skeleton(K, layer_of, defs, n_entries, num_rows)
    if defs is not None:
        if defs.size != n_entries:
            raise DecodeError(f"{defs.size} definition levels, {n_entries} expected")
        if defs.size and int(defs.max()) >= layer_of.size:
            raise DecodeError(f"definition level {int(defs.max())} exceeds the {layer_of.size - 1} "
                              "the page's layers allow")
        nl = layer_of[defs]
        emp = empty_code[defs]
    else:
        nl = np.full(n_entries, -1, dtype=np.int64)
        emp = np.zeros(n_entries, dtype=bool)
    if is_list[0]:
        raise DecodeError("the innermost rep/def layer is a list")
    m = sum(is_list)
    if m:
        if rep is None:
            raise DecodeError("list layers without repetition levels")
        if rep.size != n_entries:
            raise DecodeError(f"{rep.size} repetition levels, {n_entries} expected")
        if rep.size and int(rep.max()) > m:
            raise DecodeError(f"repetition level {int(rep.max())} exceeds the {m} list layer(s)")
        if rep.size and int(rep[0]) != m:
            raise DecodeError("page does not start with a new row (first repetition level is not the maximum)")
        r = rep.astype(np.int64)
    else:
        r = None
    masks: List[np.ndarray] = [None] * K  # type: ignore[list-item]
    for j in range(K):
        t = m - sum(is_list[j + 1:])
        p = next((q for q in range(j + 1, K) if is_list[q]), K)
        s = nl < p
        if r is not None and t > 0:
            s &= r >= t
        masks[j] = s
    out: List[Layer] = []
    for j in range(K - 1, -1, -1):
        s = masks[j]
        nls = nl[s]
        valid = nls < j
        if is_list[j]:
            valid |= (nls == j) & emp[s]
        length = int(valid.size)
        layer = Layer(length, None if valid.all() else valid)
        if is_list[j]:
            child = masks[j - 1]
            cum = np.cumsum(child, dtype=np.int64)
            pos = np.flatnonzero(s)
            offs = np.empty(length + 1, dtype=np.int64)
            offs[:length] = cum[pos] - child[pos]
            offs[length] = cum[-1] if cum.size else 0
            if length and offs[0] != 0:
                raise DecodeError("list items precede the first list of the page")
            layer.offsets = offs
        out.append(layer)
    if out[0].length != num_rows:
        raise DecodeError(f"rep/def levels describe {out[0].length} rows, the page has {num_rows}")
    return out


def _flat_skeleton(n_layers: int, layer_of: np.ndarray, defs: Optional[np.ndarray], n_entries: int,
                   num_rows: int) -> List[Layer]:
    """`skeleton` without list layers: every entry is a slot of every layer, and a slot of layer j
    is valid when its definition level names a layer inside j. Levels are numbered from the
    innermost layer, so that is `defs < (number of levels naming a layer below j)`."""
    if defs is not None:
        if defs.size != n_entries:
            raise DecodeError(f"{defs.size} definition levels, {n_entries} expected")
        if defs.size and int(defs.max()) >= layer_of.size:
            raise DecodeError(f"definition level {int(defs.max())} exceeds the {layer_of.size - 1} "
                              "the page's layers allow")
    if n_entries != num_rows:
        raise DecodeError(f"rep/def levels describe {n_entries} rows, the page has {num_rows}")
    out: List[Layer] = []
    for j in range(n_layers - 1, -1, -1):  # outermost first
        below = int(np.count_nonzero(layer_of < j))
        valid = None
        if defs is not None and below < layer_of.size:
            v = defs < below
            valid = None if v.all() else v
        out.append(Layer(n_entries, valid))
    return out


# -- pages of a column: concatenating and slicing ----------------------------------------------------

def concat_layers(pages: List[List[Layer]]) -> List[Layer]:
    if len(pages) == 1:
        return pages[0]
    out = []
    for d in range(len(pages[0])):
        ls = [p[d] for p in pages]
        length = sum(l.length for l in ls)
        valid = None
        if any(l.valid is not None for l in ls):
            valid = np.concatenate([l.valid if l.valid is not None else np.ones(l.length, bool) for l in ls])
        offs = None
        if ls[0].offsets is not None:
            parts, base = [np.zeros(1, np.int64)], 0
            for l in ls:
                parts.append(l.offsets[1:] + base)
                base += int(l.offsets[-1])
            offs = np.concatenate(parts)
        out.append(Layer(length, valid, offs))
    return out


def slice_layers(layers: List[Layer], start: int, stop: int):
    """Rows [start, stop) of a column's layers; also returns the leaf slot range."""
    out = []
    a, b = start, stop
    for l in layers:
        valid = None if l.valid is None else l.valid[a:b]
        if l.offsets is not None:
            offs = l.offsets[a:b + 1]
            na, nb = int(offs[0]), int(offs[-1])
            out.append(Layer(b - a, valid, offs - na))
            a, b = na, nb
        else:
            out.append(Layer(b - a, valid))
    return out, (a, b)
