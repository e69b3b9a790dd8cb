"""Delta's symlink format manifests (`delta.compatibility.symlinkFormatManifest.enabled`): the files
Presto, Trino's Hive connector, Athena and Redshift Spectrum read a Delta table through.

`<table>/_symlink_format_manifest/[<partition dir>/]manifest` lists, one per line, the absolute path
of every live data file (of that partition; a partition dir is Hive's `a=1/b=x`). Delta rewrites
them after every commit of a table with the property on (its `GenerateSymlinkManifest` post-commit
hook): the partitions the commit added or removed files in, the whole table the first time (no
manifest directory yet), deleting the manifests of partitions left without files. Readers of the
manifests otherwise see a stale file list: files an OPTIMIZE or a DELETE removed (and VACUUM then
deletes), and none of the data added since. `GENERATE symlink_format_manifest FOR TABLE t`
(`generate_full`) rewrites all of them and deletes stale ones.

Columnar over the snapshot's files; one Python string per line written (the manifest's content),
and only for the partitions a commit touched.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from use.delta.datafile import local_root, partition_directory, timestamp_partition_columns
from use.delta.skipping import partition_text_table
from use.errors import InvalidArgumentError, UnsupportedFeatureError

__all__ = ["MANIFEST_DIR", "ManifestResult", "check_can_enable", "generate_full", "generate_incremental", "generate_table"]

MANIFEST_DIR = "_symlink_format_manifest"
PROPERTY = "delta.compatibility.symlinkFormatManifest.enabled"


@dataclass(frozen=True)
class ManifestResult:
    """What a generation did: manifests written and deleted (relative partition dirs; '' the root)."""

    written: tuple[str, ...]
    deleted: tuple[str, ...]


def check_can_enable(protocol: Any, metadata: Any, table: str) -> None:
    """Delta refuses manifests for column-mapped tables: their files hold physical column names that
    the manifests' readers would take for the table's columns."""
    mode = (metadata.configuration or {}).get("delta.columnMapping.mode", "none").lower()
    if mode != "none":
        raise UnsupportedFeatureError(
            f"{table} uses column mapping (mode {mode!r}); symlink format manifests cannot describe such a table "
            f"(their readers would see the physical column names): leave {PROPERTY} unset",
            feature="columnMapping",
        )


def _relative_dirs(files: pa.Table, columns: Sequence[str], instants: frozenset[str]) -> pa.Array:
    """Per file, its partition's manifest directory (`a=1/b=x`, Hive escaping; '' when unpartitioned;
    `instants`, the timestamp columns, in Hive's form in UTC: `partition_directory`)."""
    if not columns:
        return pa.array([""] * files.num_rows, pa.string())
    texts = partition_text_table(files, columns)
    parts = []
    for c in columns:
        # each distinct value's directory name once, then taken per file
        encoded = pc.dictionary_encode(texts.column(c).combine_chunks())
        names = pa.array([partition_directory({c: v}, instants) for v in encoded.dictionary.to_pylist()], pa.string())
        parts.append(pc.fill_null(pc.take(names, encoded.indices), partition_directory({c: None})))
    return pc.binary_join_element_wise(*parts, "/")


def _absolute_lines(root: str, paths: pa.Array) -> list[str]:
    """The manifest lines of log paths: `file:` + the absolute local path (decoded), as Hadoop's
    Path prints a local file."""
    base = "file:" + local_root(root).rstrip("/") + "/"
    out = []
    for p in paths.to_pylist():
        if "://" in p or p.startswith("file:"):
            out.append("file:" + urllib.parse.unquote(urllib.parse.urlparse(p).path))
        else:
            out.append(base + (urllib.parse.unquote(p) if "%" in p else p))
    return out


def _write(store: Any, root: str, groups: Mapping[str, list[str]]) -> tuple[str, ...]:
    top = os.path.join(local_root(root), MANIFEST_DIR)
    for rel, lines in groups.items():
        target = os.path.join(top, rel, "manifest") if rel else os.path.join(top, "manifest")
        store.write(target, "".join(line + "\n" for line in lines).encode("utf-8"))
    return tuple(sorted(groups))


def _delete(root: str, rels: Iterable[str]) -> tuple[str, ...]:
    top = os.path.join(local_root(root), MANIFEST_DIR)
    done = []
    for rel in sorted(set(rels)):
        path = os.path.join(top, rel, "manifest")
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
        done.append(rel)
        d = os.path.dirname(path)
        while d != top and d.startswith(top):  # empty partition dirs go with their manifest
            try:
                os.rmdir(d)
            except OSError:
                break
            d = os.path.dirname(d)
    return tuple(done)


def _groups(snapshot: Any, only: set[str] | None) -> dict[str, list[str]]:
    files = snapshot.files
    columns = list(snapshot.metadata.partition_columns)
    rels = _relative_dirs(files, columns, timestamp_partition_columns(snapshot.schema, columns))
    if only is not None:
        keep = pc.is_in(rels, value_set=pa.array(sorted(only), pa.string()))
        files, rels = files.filter(keep), rels.filter(keep)
    groups: dict[str, list[str]] = {}
    if files.num_rows:
        order = pc.sort_indices(rels)
        rels_sorted = pc.take(rels, order).to_pylist()
        lines = _absolute_lines(snapshot.table_root, pc.take(files.column("path"), order).combine_chunks())
        for rel, line in zip(rels_sorted, lines, strict=False):
            groups.setdefault(rel, []).append(line)
    if not columns and not groups:
        groups[""] = []  # an empty unpartitioned table still has its (empty) manifest
    return groups


def _existing(root: str) -> set[str]:
    top = os.path.join(local_root(root), MANIFEST_DIR)
    found = set()
    for d, _dirs, names in os.walk(top):
        if "manifest" in names:
            found.add(os.path.relpath(d, top) if d != top else "")
    return found


def generate_full(store: Any, snapshot: Any) -> ManifestResult:
    """Every partition's manifest of `snapshot`, and stale ones deleted (GENERATE symlink_format_manifest)."""
    check_can_enable(snapshot.protocol, snapshot.metadata, snapshot.table_root)
    groups = _groups(snapshot, None)
    written = _write(store, snapshot.table_root, groups)
    deleted = _delete(snapshot.table_root, _existing(snapshot.table_root) - set(groups))
    return ManifestResult(written, deleted)


def generate_incremental(store: Any, snapshot: Any, touched: Iterable[Mapping[str, str | None]]) -> ManifestResult:
    """After a commit: the manifests of the partitions it touched (`touched`: the partition values of
    its added and removed files), as of `snapshot` (the table after it); all of them the first time."""
    root = snapshot.table_root
    if not os.path.isdir(os.path.join(local_root(root), MANIFEST_DIR)):
        return generate_full(store, snapshot)
    columns = list(snapshot.metadata.partition_columns)
    touched = list(touched)
    if any(set(p) != set(columns) for p in touched if p or columns):
        # files of another partitioning (an overwrite that re-partitioned the table): its old
        # partitions' manifests are stale, and only a full generation finds them
        return generate_full(store, snapshot)
    if not columns:
        return ManifestResult(_write(store, root, _groups(snapshot, None)), ())
    instants = timestamp_partition_columns(snapshot.schema, columns)
    rels = {partition_directory({c: p.get(c) for c in columns}, instants) for p in touched}
    if not rels:
        return ManifestResult((), ())
    groups = _groups(snapshot, rels)
    return ManifestResult(_write(store, root, groups), _delete(root, rels - set(groups)))


MODES = ("symlink_format_manifest",)


def generate_table(log: Any, mode: str = "symlink_format_manifest") -> ManifestResult:
    """Delta's GENERATE: `mode` must be `symlink_format_manifest` (the one Delta has); the manifests of
    the table's latest version, whatever its property says."""
    if not isinstance(mode, str) or mode.strip().lower() not in MODES:
        raise InvalidArgumentError(
            f"GENERATE mode {mode!r} is not known: the one mode is symlink_format_manifest, e.g. "
            "GENERATE symlink_format_manifest FOR TABLE db.t"
        )
    return generate_full(log.store, log.snapshot())
