"""`lance-spark` command line: inspect, history, tags, vacuum --dry-run, verify and cat Lance datasets
(pure-Python reader)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional

from . import __version__


def _reader():
    from . import reader
    return reader


def _fmt_ts(ts) -> str:
    return ts.isoformat(sep=" ") if ts is not None else "-"


def _fragment_dict(frag) -> dict:
    return {
        "id": frag.id,
        "physical_rows": frag.physical_rows,
        "deleted_rows": frag.deleted_rows,
        "rows": frag.num_rows,
        "files": [{"path": f.path, "file_version": f.file_version, "fields": f.fields,
                   "size_bytes": f.file_size_bytes} for f in frag.files],
        "deletion_file": None if frag.deletion_file is None else {
            "path": os.path.relpath(frag.deletion_file.path),
            "type": frag.deletion_file.file_type,
            "num_deleted_rows": frag.deletion_file.num_deleted_rows},
    }


def _page_statistics(ds, frags) -> List[dict]:
    """Per column: pages with statistics (and the row ranges they are kept for), nulls, and the
    overall bounds, over every 2.x data file."""
    import pyarrow.compute as pc

    from .reader.table.fragment import open_v2
    names = {f.id: f.name for f in ds.fields}
    acc: dict = {}
    for frag in frags:
        for df in frag.files:
            if not str(df.file_version).startswith("2"):
                continue
            r = open_v2(df)
            try:
                table = r.page_statistics()
            finally:
                r.close()
            if table is None:
                continue
            for col in table.column_names:
                if not col.isdigit():
                    continue
                present = table[col].combine_chunks()
                stats = present.drop_null()
                if len(stats) == 0:
                    continue
                entry = acc.setdefault(int(col), {"field_id": int(col), "column": names.get(int(col), col),
                                                  "pages": 0, "ranges": 0, "null_count": 0,
                                                  "min": None, "max": None})
                # 2.1+ files hold bounds per block of rows inside a page: count both
                pages = pc.filter(table["page_index"].combine_chunks(), present.is_valid())
                entry["pages"] += len(pc.unique(pages))
                entry["ranges"] += len(stats)
                entry["null_count"] += int(stats.field("null_count").to_numpy(zero_copy_only=False).sum())
                for key, pick in (("min", min), ("max", max)):
                    vals = [v for v in stats.field(f"{key}_value").to_pylist() if v is not None]
                    if vals:
                        cur = entry[key]
                        entry[key] = pick(vals) if cur is None else pick(cur, pick(vals))
    out = sorted(acc.values(), key=lambda e: e["field_id"])
    for e in out:
        e["min"], e["max"] = _cell(e["min"]), _cell(e["max"])
    return out


def _column_layouts(ds, frags) -> List[dict]:
    """Per leaf column of the 2.1+ data files: each (layout, codecs) used and on how many pages."""
    from .reader.format.file_v21 import FileV21Reader, is_blob_v2
    from .reader.table.fragment import column_map

    names = {}
    by_id = {x.id: x for t in ds.fields for x in t.walk()}
    for top in ds.fields:
        for lf in top.walk():  # leaves, and structs stored as one column (packed)
            path, f = [lf.name], lf
            while f.parent_id in by_id and f.id != top.id:
                f = by_id[f.parent_id]
                path.append(f.name)
            names[lf.id] = ".".join(reversed(path))
    acc: dict = {}
    for frag in frags:
        for df in frag.files:
            if (df.file_major_version, df.file_minor_version) not in ((2, 1), (2, 2)):
                continue
            r = FileV21Reader(df.full_path)
            try:
                for fid, col in column_map(df).items():
                    if fid not in names:
                        continue
                    for pno in range(len(r.column(col).pages)):
                        d = r.describe_page(col, pno)
                        key = (fid, d["layout"], d["codec"])
                        e = acc.setdefault(key, {"field_id": fid, "column": names[fid], "layout": d["layout"],
                                                 "codec": d["codec"], "layers": d["layers"], "pages": 0,
                                                 "widths": set()})
                        e["pages"] += 1
                        e["widths"].update(d["widths"])
            finally:
                r.close()
    out = []
    for e in sorted(acc.values(), key=lambda e: (e["field_id"], -e["pages"])):
        widths = sorted(e.pop("widths"))
        if widths:
            e["codec"] = e["codec"].replace("bitpack(inline)", f"bitpack({','.join(map(str, widths))})")
        e["description"] = f"{e['layout']}: {e['codec']}"
        if e["field_id"] in by_id and is_blob_v2(by_id[e["field_id"]]):  # 2.2 blob column: descriptions
            e["blob"] = "lance.blob.v2"
            e["description"] += " (lance.blob.v2 descriptions: values out of line)"
        out.append(e)
    return out


def cmd_inspect(args) -> int:
    ds = _reader().dataset(args.path, version=args.version)
    versions = ds.versions()
    frags = ds.fragments()
    info = {
        "uri": ds.uri,
        "version": ds.version,
        "data_storage_version": ds.data_storage_version,
        "reader_feature_flags": int(ds.manifest.reader_feature_flags),
        "rows": ds.count_rows(),
        "schema": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in ds.schema],
        "versions": [{"version": v["version"], "timestamp": _fmt_ts(v["timestamp"]),
                      "operation": v["operation"]} for v in versions],
        "fragments": [_fragment_dict(f) for f in frags],
        "page_statistics": _page_statistics(ds, frags),
        "columns": _column_layouts(ds, frags),
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"dataset  {info['uri']}")
    print(f"version  {info['version']} (of {len(versions)}), data storage {info['data_storage_version']}, "
          f"reader flags {info['reader_feature_flags']}")
    print(f"rows     {info['rows']} in {len(frags)} fragment(s)")
    print("schema")
    for f in ds.schema:
        print(f"  {f.name}: {f.type}{'' if f.nullable else ' not null'}")
    print("versions")
    for v in info["versions"]:
        print(f"  {v['version']:>6}  {v['timestamp']}  {v['operation'] or '-'}")
    print("fragments")
    for fd in info["fragments"]:
        dels = fd["deletion_file"]
        dtxt = f", {dels['num_deleted_rows']} deleted ({dels['type']})" if dels else ""
        print(f"  #{fd['id']}: {fd['physical_rows']} physical rows{dtxt}")
        for f in fd["files"]:
            print(f"      {f['path']}  (file version {f['file_version']}, fields {_ranges(f['fields'])})")
    if info["columns"]:
        print("columns (2.1+ data files: layout and codecs, pages)")
        for e in info["columns"]:
            print(f"  {e['column']}: {e['description']} ({e['pages']} page(s); layers "
                  f"{', '.join(e['layers'])})")
    if info["page_statistics"]:
        print("page statistics (all data files)")
        for e in info["page_statistics"]:
            print(f"  {e['column']}: {e['pages']} page(s) in {e['ranges']} range(s), {e['null_count']} null(s), "
                  f"min {e['min']}, max {e['max']}")
    else:
        print("page statistics: none (files written without them, e.g. by pylance)")
    return 0


def _ranges(ids: List[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5'"""
    out, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)


def cmd_history(args) -> int:
    ds = _reader().dataset(args.path)
    for v in ds.versions():
        print(f"{v['version']}\t{_fmt_ts(v['timestamp'])}\t{v['operation'] or '-'}")
    return 0


def _pages_in(df) -> int:
    """Pages of a data file, for the progress bar (1 for a legacy file or one that cannot be
    opened: the check reports why)."""
    from .reader.table.fragment import open_v2

    if df.is_legacy or not os.path.isfile(df.full_path):
        return 1
    try:
        r = open_v2(df)
    except Exception:
        return 1
    try:
        return max(1, sum(len(r.column(c).pages) for c in range(r.num_columns)))
    except Exception:
        return 1
    finally:
        r.close()


def _verify(path: str, problems: List[str], counts: dict) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    reader = _reader()
    from .reader.table.manifest import version_files

    try:
        versions = sorted(version_files(os.path.abspath(path)))
    except reader.LanceFormatError as e:
        problems.append(str(e))
        return
    # the versions' fragments first, so that the bar counts every page to decode
    work = []
    for v in versions:
        try:
            ds = reader.dataset(path, version=v)
            frags = ds.fragments()
        except (reader.LanceFormatError, ValueError) as e:
            problems.append(f"version {v}: {e}")
            continue
        counts["versions"] += 1
        work.append((v, ds, frags))
    pages = {}
    for _, _, frags in work:
        for frag in frags:
            for df in frag.files:
                key = (df.full_path, tuple(df.fields))
                if key not in pages:
                    pages[key] = _pages_in(df)
    checked_files = {}
    checked_dels = {}
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("pages")]
    with Progress(*columns, transient=True, console=_stderr_console()) as progress:
        task = progress.add_task("verifying", total=sum(pages.values()))
        for v, ds, frags in work:
            for frag in frags:
                counts["fragments"] += 1
                for df in frag.files:
                    key = (df.full_path, tuple(df.fields))
                    if key not in checked_files:
                        name = os.path.basename(df.full_path)
                        done = [0]

                        def on_page(col: int, pno: int, name=name, done=done) -> None:
                            done[0] += 1
                            progress.update(task, advance=1, description=f"{name} column {col} page {pno}")

                        progress.update(task, description=f"version {v} {name}")
                        checked_files[key] = _check_data_file(ds, frag, df, on_page)
                        # pages not reported one by one (2.0 / legacy files, or after a problem)
                        rest = pages[key] - done[0]
                        if rest > 0:
                            progress.advance(task, rest)
                    if checked_files[key]:
                        problems.append(f"version {v} fragment {frag.id}: {checked_files[key]}")
                if frag.deletion_file is not None:
                    key = (frag.deletion_file.path, frag.physical_rows, frag.deletion_file.num_deleted_rows)
                    if key not in checked_dels:
                        checked_dels[key] = _check_deletions(ds, frag)
                    if checked_dels[key]:
                        problems.append(f"version {v} fragment {frag.id}: {checked_dels[key]}")
    counts["data_files"] = len({k[0] for k in checked_files})
    counts["deletion_files"] = len({k[0] for k in checked_dels})


def _check_data_file(ds, frag, df, on_page=None) -> Optional[str]:
    reader = _reader()
    from .reader.table.fragment import file_has_field, read_data_file
    if not os.path.isfile(df.full_path):
        return f"{df.full_path}: data file is missing"
    size = os.path.getsize(df.full_path)
    if df.file_size_bytes and size != df.file_size_bytes:
        return f"{df.full_path}: size {size} bytes, manifest says {df.file_size_bytes}"
    # 2.1+ files list only the leaves of nested fields
    fields = [f for f in ds.fields if file_has_field(df, f)]
    try:
        arrays = read_data_file(df, fields, on_page)
    except reader.LanceFormatError as e:
        return str(e)
    except Exception as e:  # a decoder crash on malformed input is a problem too
        return f"{df.full_path}: cannot decode: {type(e).__name__}: {e}"
    for f in fields:
        n = len(arrays[f.id])
        if n != frag.physical_rows:
            return (f"{df.full_path}: field {f.name!r} has {n} rows, fragment has "
                    f"{frag.physical_rows} physical rows")
    return None


def _check_deletions(ds, frag) -> Optional[str]:
    reader = _reader()
    d = frag.deletion_file
    if not os.path.isfile(d.path):
        return f"{d.path}: deletion file is missing"
    try:
        offs = ds.deleted_offsets(frag)
    except reader.LanceFormatError as e:
        return str(e)
    if d.num_deleted_rows and len(offs) != d.num_deleted_rows:
        return f"{d.path}: holds {len(offs)} deleted rows, manifest says {d.num_deleted_rows}"
    return None


def _stderr_console():
    from rich.console import Console
    return Console(stderr=True)


def cmd_verify(args) -> int:
    problems: List[str] = []
    counts = {"versions": 0, "fragments": 0, "data_files": 0, "deletion_files": 0}
    _verify(args.path, problems, counts)
    summary = (f"{counts['versions']} version(s), {counts['fragments']} fragment(s), "
               f"{counts['data_files']} data file(s), {counts['deletion_files']} deletion file(s)")
    if problems:
        for p in problems:
            print(f"PROBLEM {p}")
        print(f"FAILED: {len(problems)} problem(s) in {summary}")
        return 1
    print(f"OK: {summary}")
    return 0


def _cell(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if isinstance(v, (list, dict)):
        return json.dumps(_hex_bytes(v), default=str)
    return str(v)


def _hex_bytes(v):
    """`v` with binary values (e.g. the `data` of a 2.2 blob column) as hex, like top-level ones."""
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if isinstance(v, dict):
        return {k: _hex_bytes(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_hex_bytes(x) for x in v]
    return v


def cmd_cat(args) -> int:
    ds = _reader().dataset(args.path, version=args.version)
    columns = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    table = ds.to_table(columns=columns, limit=args.limit)
    print("\t".join(table.column_names))
    for row in table.to_pylist():
        print("\t".join(_cell(v) for v in row.values()))
    return 0


def _root(path: str) -> str:
    return _reader().dataset(path).uri


def cmd_tags(args) -> int:
    from .reader.table.maintenance import list_tags
    tags = list_tags(_root(args.path))
    if args.json:
        print(json.dumps([t.__dict__ for t in tags], indent=2))
        return 0
    for t in tags:
        branch = f"\t(branch {t.branch})" if t.branch else ""
        print(f"{t.name}\t{t.version}\t{t.created_at or '-'}{branch}")
    return 0


def cmd_vacuum(args) -> int:
    import datetime as dt
    from .reader.table.maintenance import DEFAULT_RETENTION, plan_cleanup
    if not args.dry_run:
        print("lance-spark: vacuum here only lists what would go (--dry-run); to remove files run "
              "CALL lance.system.vacuum(table => ...) in Spark", file=sys.stderr)
        return 2
    retention = DEFAULT_RETENTION if args.retain_hours is None else dt.timedelta(hours=args.retain_hours)
    if retention < dt.timedelta(0):
        raise ValueError("--retain-hours must be >= 0")
    plan = plan_cleanup(_root(args.path), dt.datetime.now(dt.timezone.utc) - retention,
                        delete_unverified=args.delete_unverified,
                        error_if_tagged_old_versions=not args.keep_tagged)
    if args.json:
        print(json.dumps({"removed_versions": plan.removed_versions,
                          "kept_tagged_versions": plan.kept_tagged_versions,
                          "bytes_removed": plan.bytes_removed,
                          "files": [f.__dict__ for f in plan.files]}, indent=2))
        return 0
    for f in plan.files:
        print(f"{f.kind}\t{f.size_bytes}\t{f.path}")
    print(f"would remove {len(plan.removed_versions)} version(s) "
          f"({_ranges(plan.removed_versions) or 'none'}), {len(plan.files)} file(s), {plan.bytes_removed} bytes"
          + (f"; tagged versions kept: {_ranges(plan.kept_tagged_versions)}" if plan.kept_tagged_versions else ""))
    return 0


def cmd_indices(args) -> int:
    ds = _reader().dataset(args.path, version=args.version)
    found = ds.list_indices()
    if args.json:
        print(json.dumps([{**i.__dict__, "created_at": i.created_at.isoformat() if i.created_at else None}
                          for i in found], indent=2))
        return 0
    for i in found:
        missing = f"\tunindexed fragments {_ranges(i.unindexed_fragments)}" if i.unindexed_fragments else ""
        print(f"{i.name}\t{i.index_type}\t{','.join(i.columns)}\tfragments {_ranges(i.fragments) or 'none'}"
              f"\tbuilt at version {i.dataset_version}{missing}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lance-spark", description=__doc__)
    p.add_argument("--version-info", action="version", version=f"lance-spark {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("inspect", help="schema, versions, fragments, file versions, deletions")
    s.add_argument("path")
    s.add_argument("--version", type=int, default=None, help="dataset version (default: latest)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=cmd_inspect)

    s = sub.add_parser("history", help="one line per version: version, timestamp, operation")
    s.add_argument("path")
    s.set_defaults(func=cmd_history)

    s = sub.add_parser("tags", help="one line per tag: name, version, created at")
    s.add_argument("path")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=cmd_tags)

    s = sub.add_parser("vacuum", help="list what cleaning up old versions would remove (with --dry-run)")
    s.add_argument("path")
    s.add_argument("--dry-run", action="store_true", help="list only (the only mode without Spark)")
    s.add_argument("--retain-hours", type=float, default=None,
                   help="versions older than this many hours go (default: 336 = 14 days)")
    s.add_argument("--delete-unverified", action="store_true",
                   help="also list files no version references that are younger than 7 days")
    s.add_argument("--keep-tagged", action="store_true",
                   help="keep tagged old versions instead of failing (error_if_tagged_old_versions=false)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=cmd_vacuum)

    s = sub.add_parser("indices", help="one line per index: name, type, columns, fragments covered, version built at")
    s.add_argument("path")
    s.add_argument("--version", type=int, default=None, help="dataset version (default: latest)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=cmd_indices)

    s = sub.add_parser("verify", help="check every version, data file and deletion file; exit 1 on problems")
    s.add_argument("path")
    s.set_defaults(func=cmd_verify)

    s = sub.add_parser("cat", help="print rows (tab separated)")
    s.add_argument("path")
    s.add_argument("--limit", type=int, default=20, help="rows to print (default 20)")
    s.add_argument("--columns", default=None, help="comma-separated top-level columns")
    s.add_argument("--version", type=int, default=None, help="dataset version (default: latest)")
    s.set_defaults(func=cmd_cat)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    from .reader import LanceFormatError
    try:
        return args.func(args)
    except (LanceFormatError, ValueError) as e:
        print(f"lance-spark: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `lance-spark cat ... | head`
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
