"""Tags and cleanup planning without Spark or pylance: tags are read from
``_refs/tags/<name>.json``; ``plan_cleanup`` lists what ``cleanup_old_versions``
would remove (versions older than a cut-off, never the latest or a tagged one,
and the files only they reference; unreferenced files only when older than
7 days or with ``delete_unverified``). Read-only: nothing is deleted here."""
from __future__ import annotations

import datetime as _dt
import json
import os
import uuid as _uuid
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set

from ..._protos import table_pb2
from ..errors import LanceFormatError
from .manifest import _read_message, parse_manifest, read_manifest_bytes, version_files

UNVERIFIED_AGE = _dt.timedelta(days=7)
DEFAULT_RETENTION = _dt.timedelta(days=14)


@dataclass(frozen=True)
class Tag:
    name: str
    version: int
    branch: Optional[str]
    manifest_size: int
    created_at: Optional[str]
    updated_at: Optional[str]


def list_tags(root: str) -> List[Tag]:
    """Every tag of the dataset at `root`, sorted by name."""
    tdir = os.path.join(root, "_refs", "tags")
    if not os.path.isdir(tdir):
        return []
    out = []
    for name in sorted(os.listdir(tdir)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(tdir, name)
        try:
            with open(path, "rb") as f:
                obj = json.loads(f.read().decode("utf-8"))
        except (OSError, ValueError) as e:
            raise LanceFormatError(path, f"cannot read tag: {e}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("version"), int):
            raise LanceFormatError(path, "tag file has no version")
        out.append(Tag(name[: -len(".json")], obj["version"], obj.get("branch"), int(obj.get("manifestSize") or 0),
                       obj.get("createdAt"), obj.get("updatedAt")))
    return out


@dataclass
class _Files:
    data: Set[str] = field(default_factory=set)
    deletions: Set[str] = field(default_factory=set)
    transactions: Set[str] = field(default_factory=set)
    indices: Set[str] = field(default_factory=set)

    def add(self, other: "_Files") -> None:
        self.data |= other.data
        self.deletions |= other.deletions
        self.transactions |= other.transactions
        self.indices |= other.indices


@dataclass(frozen=True)
class CleanupFile:
    path: str   # relative to the dataset
    kind: str   # manifest, data, deletion, transaction, index, temporary
    size_bytes: int


@dataclass
class CleanupPlan:
    removed_versions: List[int]
    kept_tagged_versions: List[int]
    files: List[CleanupFile]

    @property
    def bytes_removed(self) -> int:
        return sum(f.size_bytes for f in self.files)


def _deletion_path(fragment_id: int, d) -> str:
    ext = "bin" if d.file_type == table_pb2.DeletionFile.BITMAP else "arrow"
    return f"_deletions/{fragment_id}-{d.read_version}-{d.id}.{ext}"


def _referenced(path: str, data: bytes, m) -> _Files:
    files = _Files()
    for frag in m.fragments:
        files.data.update(f"data/{df.path}" for df in frag.files)
        if frag.HasField("deletion_file"):
            files.deletions.add(_deletion_path(frag.id, frag.deletion_file))
    if m.transaction_file:
        files.transactions.add(f"_transactions/{m.transaction_file}")
    if m.HasField("index_section"):
        section = _read_message(path, data, m.index_section, table_pb2.IndexSection(), "index section")
        for idx in section.indices:
            raw = idx.uuid.uuid
            files.indices.add(str(_uuid.UUID(bytes=raw)) if len(raw) == 16 else raw.hex())
    return files


def _timestamp(m) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(m.timestamp.seconds + m.timestamp.nanos / 1e9, _dt.timezone.utc)


def plan_cleanup(root: str, older_than: _dt.datetime, *, delete_unverified: bool = False,
                 error_if_tagged_old_versions: bool = True,
                 now: Optional[_dt.datetime] = None) -> CleanupPlan:
    """What a cleanup of versions committed before `older_than` (aware datetime) would remove."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    versions: Dict[int, str] = version_files(root)
    latest = max(versions)
    tags = list_tags(root)
    tagged = {t.version for t in tags}
    removed, kept_tagged = [], []
    working, verified = _Files(), _Files()
    manifests = []
    for v in sorted(versions):
        path = versions[v]
        data = read_manifest_bytes(path)
        m = parse_manifest(path, data)
        old = v < latest and _timestamp(m) < older_than
        refs = _referenced(path, data, m)
        if old and v in tagged:
            kept_tagged.append(v)
        if old and v not in tagged:
            removed.append(v)
            verified.add(refs)
            manifests.append(CleanupFile(os.path.relpath(path, root), "manifest", os.path.getsize(path)))
        else:
            working.add(refs)
    if error_if_tagged_old_versions and kept_tagged:
        names = [f"{t.name} (version {t.version})" for t in tags if t.version in kept_tagged]
        raise ValueError(f"{root}: {len(names)} tagged version(s) would be cleaned up: {', '.join(names)}; "
                         "delete the tags or pass --keep-tagged to clean up the rest")
    unverified_before = now - UNVERIFIED_AGE
    garbage = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            st = os.stat(full)
            modified = _dt.datetime.fromtimestamp(st.st_mtime, _dt.timezone.utc)
            maybe_in_progress = not delete_unverified and modified >= unverified_before
            kind = _classify(rel, working, verified, maybe_in_progress)
            if kind:
                garbage.append(CleanupFile(rel, kind, st.st_size))
    return CleanupPlan(removed, kept_tagged, manifests + sorted(garbage, key=lambda f: f.path))


def _classify(rel: str, working: _Files, verified: _Files, maybe_in_progress: bool) -> Optional[str]:
    def decide(kind: str, in_working: bool, in_verified: bool) -> Optional[str]:
        if in_working:
            return None
        return kind if (not maybe_in_progress or in_verified) else None

    ext = rel.rsplit(".", 1)[-1]
    if rel.startswith("_versions/.tmp"):
        return None if maybe_in_progress else "temporary"
    if rel.startswith("_indices/"):
        parts = rel.split("/")
        if len(parts) < 3:
            return None
        return decide("index", parts[1] in working.indices, parts[1] in verified.indices)
    if ext == "lance" and rel.startswith("data/"):
        return decide("data", rel in working.data, rel in verified.data)
    if ext in ("arrow", "bin") and rel.startswith("_deletions/"):
        return decide("deletion", rel in working.deletions, rel in verified.deletions)
    if ext == "txn" and rel.startswith("_transactions/"):
        return decide("transaction", rel in working.transactions, rel in verified.transactions)
    return None
