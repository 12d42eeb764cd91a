"""Lance datasets: versions, fragments, and reading them into Arrow tables."""
from __future__ import annotations

import dataclasses
import datetime as _dt
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import LanceFormatError
from ..format.schema import LanceField, arrow_field, build_fields, to_arrow_schema
from . import deletion as _del
from .fragment import (FILE_VERSIONS, DataFileInfo, DeletionFileInfo, FragmentInfo, data_file_rows,
                       file_has_field, iter_data_file, read_data_file, version_name)
from .manifest import (FLAG_USE_V2_FORMAT_DEPRECATED, check_reader_flags, operation_name, parse_manifest,
                       read_manifest_bytes, read_transaction, version_files)


def _timestamp(ts) -> Optional[_dt.datetime]:
    if ts is None or (ts.seconds == 0 and ts.nanos == 0):
        return None
    # Naive local time with microseconds, computed from total nanoseconds in floating point as
    # pylance's versions() does, so both report the same datetime.
    total = ts.seconds * 10**9 + ts.nanos
    return _dt.datetime.fromtimestamp(total // 1e9) + _dt.timedelta(microseconds=(total % 1e9) // 1e3)


def _root_of(uri: str) -> str:
    if uri.startswith("file://"):
        uri = uri[len("file://"):]
    elif "://" in uri:
        raise LanceFormatError(uri, "only local paths are supported by the pure-Python reader")
    return os.path.abspath(uri)


class LanceDataset:
    """One version of a Lance dataset, read without pylance."""

    def __init__(self, uri: str, version: Optional[int] = None):
        self.uri = _root_of(str(uri))
        self._version_files = version_files(self.uri)
        if version is None:
            version = max(self._version_files)
        if version not in self._version_files:
            raise LanceFormatError(self.uri, f"version {version} does not exist "
                                             f"(versions: {sorted(self._version_files)})")
        self.manifest_path = self._version_files[version]
        self._manifest_bytes = read_manifest_bytes(self.manifest_path)
        self.manifest = parse_manifest(self.manifest_path, self._manifest_bytes)
        if self.manifest.version != version:
            raise LanceFormatError(self.manifest_path, f"file name says version {version}, "
                                                       f"manifest says {self.manifest.version}")
        check_reader_flags(self.manifest, f"{self.uri} ({self.manifest_path})")
        self.fields: List[LanceField] = build_fields(self.manifest.fields, self.manifest_path)
        self.schema: pa.Schema = to_arrow_schema(
            self.fields, dict(self.manifest.schema_metadata), self.manifest_path)
        self._bases = {b.id: b for b in self.manifest.base_paths}
        self._data_storage_version = _data_storage_version(self.manifest, self.manifest_path)
        self._fragments: Optional[List[FragmentInfo]] = None

    # -- metadata ---------------------------------------------------------------------------
    @property
    def version(self) -> int:
        return int(self.manifest.version)

    @property
    def data_storage_version(self) -> str:
        """As the manifest's data_format says, or (releases before 0.16 wrote none) as its data files
        are. A legacy one may list 2.0 files (a bug of Lance 0.16): each file is read by its own version."""
        return self._data_storage_version

    def versions(self) -> List[dict]:
        out = []
        for v in sorted(self._version_files):
            path = self._version_files[v]
            data = read_manifest_bytes(path)
            m = parse_manifest(path, data)
            txn = read_transaction(self.uri, path, m, data)
            out.append({"version": int(m.version), "timestamp": _timestamp(m.timestamp),
                        "operation": operation_name(txn)})
        return out

    def _base_dir(self, base_id: Optional[int], default_sub: str, where: str) -> str:
        if base_id is None:
            return os.path.join(self.uri, default_sub)
        base = self._bases.get(base_id)
        if base is None:
            raise LanceFormatError(self.manifest_path, f"{where} refers to unknown base path id {base_id}")
        root = _root_of(base.path)
        return os.path.join(root, default_sub) if base.is_dataset_root else root

    def _resolve(self, base: str, rel: str, allowed_root: str) -> str:
        if os.path.isabs(rel):
            raise LanceFormatError(self.manifest_path, f"data file path {rel!r} is absolute")
        full = os.path.normpath(os.path.join(base, rel))
        root = os.path.normpath(allowed_root)
        if os.path.commonpath([full, root]) != root:
            raise LanceFormatError(self.manifest_path,
                                   f"data file path {rel!r} escapes the dataset directory {root}")
        return full

    def fragments(self) -> List[FragmentInfo]:
        if self._fragments is not None:
            return self._fragments
        frags = []
        trusted = self.manifest.HasField("writer_version")
        for f in self.manifest.fragments:
            files = []
            for df in f.files:
                base_id = df.base_id if df.HasField("base_id") else None
                base = self._base_dir(base_id, "data", f"data file {df.path!r}")
                allowed = self.uri if base_id is None else os.path.dirname(base) if base.endswith(
                    os.sep + "data") else base
                files.append(DataFileInfo(
                    path=df.path, full_path=self._resolve(base, df.path, allowed),
                    fields=list(df.fields), column_indices=list(df.column_indices),
                    file_major_version=df.file_major_version, file_minor_version=df.file_minor_version,
                    file_size_bytes=df.file_size_bytes))
            dinfo = None
            if f.HasField("deletion_file"):
                d = f.deletion_file
                base_id = d.base_id if d.HasField("base_id") else None
                ddir = self._base_dir(base_id, "_deletions", f"deletion file of fragment {f.id}")
                dinfo = DeletionFileInfo(
                    path=os.path.join(ddir, _del.deletion_file_name(f.id, d)),
                    file_type="bitmap" if d.file_type == _del.BITMAP else "arrow",
                    read_version=d.read_version, id=d.id, num_deleted_rows=d.num_deleted_rows)
            frag = FragmentInfo(id=int(f.id), physical_rows=int(f.physical_rows), deleted_rows=0,
                                files=files, deletion_file=dinfo)
            # 0 is "unknown" (proto3's default; releases before 0.8 wrote neither count), and without a
            # writer_version the physical rows are not trusted at all (releases that did not record
            # it wrote wrong ones, e.g. rows minus deletions: lance issue 1531)
            if frag.physical_rows == 0 or not trusted:
                if not files:
                    raise LanceFormatError(self.manifest_path, f"fragment {f.id} lists no data files: "
                                                               "its row count is unknown")
                frag.physical_rows = data_file_rows(files[0])
            if dinfo is not None:
                frag.deleted_rows = int(dinfo.num_deleted_rows) or len(self.deleted_offsets(frag))
            frags.append(frag)
        self._fragments = frags
        return frags

    # -- data -------------------------------------------------------------------------------
    def list_indices(self) -> List["IndexInfo"]:
        """The indices this version lists (manifest index section): name, type, columns,
        fragments covered and not, the version each was built at (index files are not read)."""
        from .indices import list_indices
        from .manifest import _read_message, table_pb2
        section = None
        if self.manifest.HasField("index_section"):
            section = _read_message(self.manifest_path, self._manifest_bytes, self.manifest.index_section,
                                    table_pb2.IndexSection(), "index section")
        return list_indices(section, self.fields, [f.id for f in self.manifest.fragments], self.manifest_path)

    def deleted_offsets(self, frag: FragmentInfo) -> np.ndarray:
        d = frag.deletion_file
        if d is None:
            return np.empty(0, np.uint32)
        offs = _del.read_deletions(d.path, _del.BITMAP if d.file_type == "bitmap" else _del.ARROW_ARRAY)
        if offs.size and int(offs[-1]) >= frag.physical_rows:
            raise LanceFormatError(d.path, f"deleted row offset {int(offs[-1])} is not below the "
                                           f"fragment's {frag.physical_rows} physical rows")
        return offs

    def count_rows(self) -> int:
        return sum(frag.num_rows for frag in self.fragments())

    def _select(self, columns: Optional[Sequence[str]]) -> List[LanceField]:
        """The fields to read: top-level fields by name, or for a nested name
        ("a.b.c", through structs) the top-level field pruned to that path."""
        if columns is None:
            return list(self.fields)
        by_name = {f.name: f for f in self.fields}
        out: List[LanceField] = []
        for c in columns:
            if c in by_name:
                out.append(by_name[c])
                continue
            path = c.split(".")
            f = by_name.get(path[0])
            if f is None or len(path) < 2:
                raise ValueError(f"{self.uri}: no column {c!r} (columns: {list(by_name)})")
            out.append(_pruned(f, path[1:], c, self.uri))
        return out

    def _output(self, fields: List[LanceField], columns: Optional[Sequence[str]]) -> pa.Schema:
        """The schema of what `columns` asks for: a nested name ("a.b") is a
        column of its own named so, as pylance returns it."""
        names = columns if columns is not None else [f.name for f in fields]
        out = []
        for name, f in zip(names, fields):
            t = arrow_field(f, self.manifest_path) if name != f.name else self.schema.field(f.name)
            for part in name.split(".")[1:]:
                t = t.type.field(part)
            out.append(t.with_name(name))
        return pa.schema(out, metadata=self.schema.metadata)

    @staticmethod
    def _extract(arr: pa.Array, name: str) -> pa.Array:
        """The nested field `name` names ("a.b.c") out of the (pruned) array
        of "a": each level's nulls carried down."""
        for part in name.split(".")[1:]:
            arr = pc.struct_field(arr, part)
        return arr

    @staticmethod
    def _reads(fields: List[LanceField]) -> List[LanceField]:
        """The fields to read for `fields`: one per top-level field, pruned
        selections of the same field merged."""
        out: Dict[int, LanceField] = {}
        for f in fields:
            out[f.id] = _merge(out[f.id], f) if f.id in out else f
        return list(out.values())

    def read_fragment(self, frag: FragmentInfo, fields: List[LanceField],
                      apply_deletions: bool = True) -> Dict[int, pa.Array]:
        """Arrays (physical rows, or live rows with apply_deletions) of top-level fields, by id."""
        wanted = {f.id: f for f in fields}
        plan: Dict[int, List[LanceField]] = {}
        for i, df in enumerate(frag.files):
            for f in fields:
                if f.id in wanted and file_has_field(df, f):
                    plan.setdefault(i, []).append(f)
                    del wanted[f.id]
        arrays: Dict[int, pa.Array] = {}
        for i, fs in plan.items():
            df = frag.files[i]
            arrays.update(read_data_file(df, fs))
        for f in fields:
            arr = arrays.get(f.id)
            if arr is None:
                arrays[f.id] = pa.nulls(frag.physical_rows, arrow_field(f, self.manifest_path).type)
            elif len(arr) != frag.physical_rows:
                raise LanceFormatError(frag.files[0].full_path if not plan else _file_of(frag, f),
                                       f"field {f.name!r} has {len(arr)} rows, fragment {frag.id} "
                                       f"has {frag.physical_rows} physical rows")
        if apply_deletions and frag.deletion_file is not None:
            offs = self.deleted_offsets(frag)
            if offs.size:
                keep = np.ones(frag.physical_rows, dtype=bool)
                keep[offs] = False
                mask = pa.array(keep)
                arrays = {k: v.filter(mask) for k, v in arrays.items()}
        return arrays

    def to_table(self, columns: Optional[Sequence[str]] = None, limit: Optional[int] = None) -> pa.Table:
        fields = self._select(columns)
        schema = self._output(fields, columns)
        chunks: List[List[pa.Array]] = [[] for _ in fields]
        remaining = limit
        for frag in self.fragments():
            if remaining is not None and remaining <= 0:
                break
            arrays = self.read_fragment(frag, self._reads(fields))
            for j, f in enumerate(fields):
                a = self._extract(arrays[f.id], schema.field(j).name)
                chunks[j].append(a if remaining is None else a.slice(0, remaining))
            if remaining is not None and fields:
                remaining -= len(chunks[0][-1])
        cols = [pa.chunked_array(c, type=schema.field(j).type) for j, c in enumerate(chunks)]
        return pa.Table.from_arrays(cols, schema=schema)

    def to_batches(self, columns: Optional[Sequence[str]] = None, batch_rows: int = 8192):
        """Record batches of live rows, fragment by fragment. 2.1 / 2.2 data files are decoded page
        by page: memory is bounded by the pages under one batch of the asked columns (older files
        are read a data file at a time)."""
        fields = self._select(columns)
        schema = self._output(fields, columns)
        reads = self._reads(fields)
        column_of = [[r.id for r in reads].index(f.id) for f in fields]
        for frag in self.fragments():
            for batch in self._fragment_batches(frag, reads, batch_rows):
                yield pa.RecordBatch.from_arrays(
                    [self._extract(batch.column(c), schema.field(j).name) for j, c in enumerate(column_of)],
                    schema=schema)

    def _fragment_batches(self, frag: FragmentInfo, fields: List[LanceField], batch_rows: int):
        """Batches of the fragment's live rows of `fields` (whole top-level fields, as read)."""
        schema = pa.schema([arrow_field(f, self.manifest_path) for f in fields])
        plan: Dict[int, List[LanceField]] = {}
        missing = []
        for f in fields:
            i = next((i for i, df in enumerate(frag.files) if file_has_field(df, f)), None)
            if i is None:
                missing.append(f)
            else:
                plan.setdefault(i, []).append(f)
        keep = None
        if frag.deletion_file is not None:
            offs = self.deleted_offsets(frag)
            if offs.size:
                keep = np.ones(frag.physical_rows, dtype=bool)
                keep[offs] = False
        streams = [iter_data_file(frag.files[i], fs, batch_rows) for i, fs in plan.items()]
        pending: Dict[int, List[pa.Array]] = {f.id: [] for f in fields if f not in missing}
        have: Dict[int, int] = {fid: 0 for fid in pending}
        start = 0
        while start < frag.physical_rows:
            # pull from every file until each field has a batch (files may batch differently)
            want = min(batch_rows, frag.physical_rows - start)
            for s, (i, fs) in zip(streams, plan.items()):
                while any(have[f.id] < want for f in fs):
                    got = next(s, None)
                    if got is None:
                        break
                    for f in fs:
                        pending[f.id].append(got[f.id])
                        have[f.id] += len(got[f.id])
            arrays = []
            for f in fields:
                if f in missing:
                    arrays.append(pa.nulls(want, schema.field(len(arrays)).type))
                    continue
                if have[f.id] < want:
                    raise LanceFormatError(_file_of(frag, f), f"field {f.name!r} has {have[f.id]} more rows, "
                                                              f"fragment {frag.id} needs {want}")
                merged = pa.concat_arrays(pending[f.id]) if len(pending[f.id]) > 1 else pending[f.id][0]
                arrays.append(merged.slice(0, want))
                rest = merged.slice(want)
                pending[f.id] = [rest] if len(rest) else []
                have[f.id] -= want
            batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
            if keep is not None:
                batch = batch.filter(pa.array(keep[start:start + want]))
            start += want
            if batch.num_rows:
                yield batch


def _pruned(f: LanceField, path: List[str], name: str, uri: str) -> LanceField:
    """`f` with only the children on `path` (structs only), for reading one nested field."""
    if f.logical_type != "struct":
        raise ValueError(f"{uri}: no column {name!r} ({f.name!r} is {f.logical_type}, not a struct)")
    child = next((c for c in f.children if c.name == path[0]), None)
    if child is None:
        raise ValueError(f"{uri}: no column {name!r} (fields of {f.name!r}: {[c.name for c in f.children]})")
    if len(path) > 1:
        child = _pruned(child, path[1:], name, uri)
    return dataclasses.replace(f, children=[child])


def _merge(a: LanceField, b: LanceField) -> LanceField:
    """Two prunings of one field as one: the union of their children (a
    child kept whole in either stays whole)."""
    if not a.children or not b.children or a is b:
        return a if len(a.children) >= len(b.children) else b
    theirs = {c.id: c for c in b.children}
    kids = [_merge(c, theirs[c.id]) if c.id in theirs else c for c in a.children]
    mine = {c.id for c in a.children}
    kids += [c for c in b.children if c.id not in mine]
    return dataclasses.replace(a, children=kids)


def _file_of(frag: FragmentInfo, f: LanceField) -> str:
    for df in frag.files:
        if file_has_field(df, f):
            return df.full_path
    return f"fragment {frag.id}"


def _data_storage_version(m, where: str) -> str:
    """The manifest's data_format version, or inferred as pylance does when it has none: the version
    of its data files (all must agree), else 2.0 if the writer flag of early 2.0 datasets is set,
    else legacy."""
    if m.HasField("data_format"):
        return m.data_format.version or "legacy"
    seen: Dict[str, str] = {}
    for frag in m.fragments:
        for df in frag.files:
            v = version_name(df.file_major_version, df.file_minor_version)
            if (df.file_major_version, df.file_minor_version) not in FILE_VERSIONS:
                raise LanceFormatError(where, f"data file {df.path!r} has unsupported file version {v}")
            seen.setdefault(v, df.path)
    if len(seen) > 1:
        files = ", ".join(f"{p!r} ({v})" for v, p in seen.items())
        raise LanceFormatError(where, f"no data_format, and the data files mix file versions: {files}")
    if seen:
        v = next(iter(seen))
        return "0.1" if v == "legacy" else v
    return "2.0" if m.writer_feature_flags & FLAG_USE_V2_FORMAT_DEPRECATED else "0.1"


def dataset(uri, version: Optional[int] = None) -> LanceDataset:
    """Open a Lance dataset (latest version unless `version` is given)."""
    return LanceDataset(uri, version)
