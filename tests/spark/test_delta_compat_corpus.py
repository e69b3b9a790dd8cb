"""Our snapshots against delta-rs's, at every version of real Delta logs written by other engines,
and the rows of the corpus tables with reader features (deletion vectors among them) against
delta-rs's and an independent decoding.

The logs are the 167 tables of the shared corpus (`shared/data/delta-tables.tar.gz`, see
tests/corpus_support.py): delta-spark's golden tables, delta-kernel's and Spark's test tables,
Databricks-written tables and delta-rs's test data and broken-log fixtures, with data and deletion
vector files where their repositories keep them. The test extracts the archive into a temporary
directory, so it runs wherever the archive is (CI has `../shared` beside the clone).

For every table and every version that has a commit or checkpoint file, one of these must hold:
- equal: same live files (path, size, typed partition values, parsed stats), protocol and metadata
  (id, schema, partition columns, configuration) as `deltalake.DeltaTable(path, version=v)`;
- refused: we raise `UnsupportedFeatureError` naming a feature docs/delta.md lists as refused;
- both fail: delta-rs fails and we raise a typed `UseError` (a broken log, a gap, no metadata, ...);
- a known, explained difference (`DELTA_RS_FAILS`, `EXPECTED_FAILURES` below).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import decimal
import json
import os
import re
import struct
import tarfile
import uuid
import zlib
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyroaring import BitMap64

from corpus_support import DV_TABLES, corpus_archive, extract, missing_reason, table_of, table_path
from use.delta import DeltaLog
from use.delta.listing import list_log
from use.delta.skipping import typed_partition_values
from use.delta.stats import leaf_columns
from use.delta.stats_parse import parse_stats, stat_column
from use.delta.storage import LocalLogStore, absolute_path
from use.errors import UnsupportedFeatureError, UseError

DELTA_PAGE = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "docs", "delta.md")

# Tables whose mismatch is a known defect still to fix, with the cause (none today).
EXPECTED_FAILURES: dict[str, str] = {}

# Versions delta-rs cannot load but we read, with the cause (checked by hand against the log).
DELTA_RS_FAILS: dict[tuple[str, int], str] = {}


# --- the corpus -------------------------------------------------------------------------------------


def _corpus() -> list[str]:
    """Table names (`<source>/<table>`) of every Delta log in the archive (none without it)."""
    archive = corpus_archive()
    if archive is None:
        return []
    with tarfile.open(archive) as tar:
        return sorted({t for t in map(table_of, tar.getnames()) if t is not None})


def documented_refusals() -> frozenset[str]:
    """The features docs/delta.md says are refused on read (backticked names on its "Refused on read"
    line)."""
    with open(DELTA_PAGE, encoding="utf-8") as fh:
        text = fh.read()
    line = next(l for l in text.splitlines() if l.startswith("Refused on read"))
    return frozenset(re.findall(r"`([A-Za-z0-9-]+)`", line))


# --- one version ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Outcome:
    kind: str  # "equal", "refused", "both_fail", "delta_rs_fails", "mismatch"
    detail: str = ""


def _norm(v: Any) -> Any:
    """One value as both sides can compare it: timestamps as UTC microseconds, decimals exact."""
    if isinstance(v, _dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(_dt.UTC).replace(tzinfo=None)
        return ("ts", (v - _dt.datetime(1970, 1, 1)) // _dt.timedelta(microseconds=1))
    if isinstance(v, decimal.Decimal):
        return ("dec", v.normalize())
    if isinstance(v, float) and v == int(v) and abs(v) < 2**53:
        return ("num", int(v))
    if isinstance(v, int) and not isinstance(v, bool):
        return ("num", v)
    return v


def _flat(t: pa.Table, path: tuple[str, ...]) -> list[Any] | None:
    """A nested column of delta-rs's add actions (`min`, `partition`, ...) by field path, or None."""
    if path[0] not in t.column_names:
        return None
    col: Any = t.column(path[0]).combine_chunks()
    for part in path[1:]:
        if not pa.types.is_struct(col.type) or col.type.get_field_index(part) < 0:
            return None
        col = col.field(part) if isinstance(col, pa.StructArray) else pa.compute.struct_field(col, part)
    return col.to_pylist()


def _compare_files(snap: Any, theirs: DeltaTable) -> list[str]:
    problems: list[str] = []
    rs = pa.table(theirs.get_add_actions(flatten=False))
    ours = snap.files
    our_paths = ours.column("path").to_pylist()
    rs_paths = rs.column("path").to_pylist()
    if sorted(our_paths) != sorted(rs_paths):
        only_ours = sorted(set(our_paths) - set(rs_paths))[:3]
        only_rs = sorted(set(rs_paths) - set(our_paths))[:3]
        return [f"live files differ: only ours {only_ours}, only delta-rs {only_rs}"]
    order = {p: i for i, p in enumerate(rs_paths)}
    idx = [order[p] for p in our_paths]
    rs = rs.take(pa.array(idx, pa.int64())) if idx else rs
    if ours.column("size").to_pylist() != rs.column("size_bytes").to_pylist():
        problems.append("file sizes differ")
    cm = snap.column_mapping
    schema = snap.schema
    keys = sorted(cm.physical_name(c) for c in snap.partition_columns)
    odd = [
        (p, sorted(pv))
        for p, pv in zip(our_paths, ours.column("partition_values").to_pylist(), strict=False)
        if sorted(k for k, _ in pv or []) != keys
    ]
    if odd:
        problems.append(f"partitionValues keys differ from the partition columns {keys} (first: {odd[0]})")
    for col in snap.partition_columns:
        key = cm.physical_name(col)
        mine = [_norm(v) for v in typed_partition_values(ours, key, schema.field(col).type).to_pylist()]
        theirs_pv = _flat(rs, ("partition", col))
        if theirs_pv is None:
            problems.append(f"delta-rs has no partition value column {col!r}")
        elif mine != [_norm(v) for v in theirs_pv]:
            diff = next((a, b) for a, b in zip(mine, theirs_pv, strict=False) if a != _norm(b))
            problems.append(f"partition values of {col!r} differ (first: ours {diff[0]!r}, delta-rs {diff[1]!r})")
    parsed = parse_stats(ours, schema, column_mapping=cm) if ours.num_rows else None
    if parsed is not None:
        rs_nr = rs.column("num_records").to_pylist() if "num_records" in rs.column_names else [None] * rs.num_rows
        mine_nr = parsed.column("num_records").to_pylist()
        if any(a is not None and b is not None and a != b for a, b in zip(mine_nr, rs_nr, strict=False)):
            problems.append(f"numRecords differ: ours {mine_nr}, delta-rs {rs_nr}")
        parts = set(snap.partition_columns)
        for leaf in leaf_columns(schema):
            if leaf.path[0] in parts:
                continue
            physical = cm.physical_path(leaf.path)
            for kind, top in (("min", "min"), ("max", "max"), ("null_count", "null_count")):
                name = stat_column(kind, leaf.path)
                theirs_v = _flat(rs, (top, *physical))
                if name not in parsed.column_names or theirs_v is None:
                    continue
                mine_v = parsed.column(name).to_pylist()
                # A bound only one side has is no disagreement: we leave out bounds we cannot trust
                # (a float widened to double), delta-rs leaves out some it cannot parse (decimals in
                # exponent notation, `0E-10`, as Java writes them).
                diff = next(
                    (
                        (a, b)
                        for a, b in zip(mine_v, theirs_v, strict=False)
                        if a is not None and b is not None and _norm(a) != _norm(b)
                    ),
                    None,
                )
                if diff is not None:
                    problems.append(f"{name} differs (first: ours {diff[0]!r}, delta-rs {diff[1]!r})")
    return problems


def _compare(snap: Any, theirs: DeltaTable) -> list[str]:
    problems: list[str] = []
    p, rp = snap.protocol, theirs.protocol()
    if (p.min_reader_version, p.min_writer_version) != (rp.min_reader_version, rp.min_writer_version):
        problems.append(f"protocol versions differ: ours {p}, delta-rs {rp}")
    if sorted(p.reader_features or ()) != sorted(rp.reader_features or ()) or sorted(p.writer_features or ()) != sorted(
        rp.writer_features or ()
    ):
        problems.append(f"protocol features differ: ours {p}, delta-rs {rp}")
    m, rm = snap.metadata, theirs.metadata()
    if m.id != rm.id:
        problems.append("metadata id differs")
    if list(m.partition_columns) != list(rm.partition_columns):
        problems.append(f"partition columns differ: ours {m.partition_columns}, delta-rs {rm.partition_columns}")
    if dict(m.configuration) != {k: v for k, v in rm.configuration.items() if v is not None}:
        problems.append(f"configuration differs: ours {dict(m.configuration)}, delta-rs {rm.configuration}")
    if json.loads(m.schema_string) != json.loads(theirs.schema().to_json()):
        problems.append("schema differs")
    return problems + _compare_files(snap, theirs)


def compare_version(root: str, version: int, refusals: frozenset[str]) -> Outcome:
    """The outcome of loading `version` of the table at `root` with both readers."""
    ours: Any = None
    our_error: Exception | None = None
    try:
        ours = DeltaLog.for_path(root).snapshot(version=version)
    except Exception as exc:  # noqa: BLE001 - classified below
        our_error = exc
    try:
        theirs: Any = DeltaTable(root, version=version)
        rs_error: Exception | None = None
    except Exception as exc:  # noqa: BLE001 - delta-rs raises several types
        theirs, rs_error = None, exc
    if our_error is not None:
        if isinstance(our_error, UnsupportedFeatureError) and our_error.feature in refusals:
            return Outcome("refused", our_error.feature)
        if rs_error is not None and isinstance(our_error, UseError):
            return Outcome("both_fail", type(our_error).__name__)
        return Outcome("mismatch", f"we fail ({our_error!r}) and delta-rs {'fails' if rs_error else 'reads'}")
    if rs_error is not None:
        return Outcome("delta_rs_fails", f"{rs_error!s}".splitlines()[0][:200])
    try:
        problems = _compare(ours, theirs)
    except UseError as exc:  # a typed refusal that only shows once the files are looked at
        if isinstance(exc, UnsupportedFeatureError) and exc.feature in refusals:
            return Outcome("refused", exc.feature)
        problems = [f"comparison raised {exc!r}"]
    return Outcome("mismatch", "; ".join(problems)) if problems else Outcome("equal")


def table_versions(root: str) -> list[int]:
    """Every version with a commit file or a complete checkpoint (versions in a gap have neither)."""
    listing = list_log(LocalLogStore(), os.path.join(root, "_delta_log"))
    return sorted(set(listing.commits) | {v for v, c in listing.checkpoints.items() if c.complete})


def compare_table(root: str, refusals: frozenset[str]) -> Iterator[tuple[int, Outcome]]:
    for v in table_versions(root):
        yield v, compare_version(root, v, refusals)


# --- the tests --------------------------------------------------------------------------------------

CORPUS = _corpus()


@pytest.fixture(scope="module")
def corpus_root(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("delta-corpus")
    extract(root)
    return str(root / "tables")


def _params() -> list[Any]:
    if not CORPUS:
        return [pytest.param(None, marks=pytest.mark.skip(reason=missing_reason()))]
    return [
        pytest.param(t, marks=pytest.mark.xfail(reason=EXPECTED_FAILURES[t], strict=False)) if t in EXPECTED_FAILURES else t
        for t in CORPUS
    ]


@pytest.mark.parametrize("table", _params())
def test_snapshot_equals_delta_rs_at_every_version(corpus_root: str, table: str) -> None:
    refusals = documented_refusals()
    bad = []
    for version, outcome in compare_table(os.path.join(corpus_root, table), refusals):
        if outcome.kind == "mismatch":
            bad.append(f"v{version}: {outcome.detail}")
        elif outcome.kind == "delta_rs_fails" and (table, version) not in DELTA_RS_FAILS:
            bad.append(f"v{version}: we read what delta-rs refuses ({outcome.detail}); explain it in DELTA_RS_FAILS")
    assert not bad, f"{table}:\n" + "\n".join(bad)


def test_the_corpus_is_all_there() -> None:
    if not CORPUS:
        pytest.skip(missing_reason())
    assert len(CORPUS) >= 167 and set(DV_TABLES) <= set(CORPUS)  # the README counts 167 (a few nest a second log)


def test_readme_lists_the_refused_features() -> None:
    refusals = documented_refusals()
    assert {"variantType"} <= refusals
    assert not refusals & {
        "columnMapping",
        "v2Checkpoint",
        "typeWidening",
        "timestampNtz",
        "vacuumProtocolCheck",
        "deletionVectors",
    }


# --- data of the feature tables, read on Spark ----------------------------------------------------------

# Tables of the corpus that use a reader feature USE reads (column mapping with nested types and
# partition values of every type, V2 checkpoints with sidecars, timestamp_ntz, deletion vectors), with
# their data files: our Spark read must return delta-rs's rows (delta-rs through DataFusion).
FEATURE_TABLES = [
    "golden/table-with-columnmapping-mode-name",
    "golden/table-with-columnmapping-mode-id",
    "golden/data-reader-timestamp_ntz-name-mode",
    "golden/data-reader-timestamp_ntz-id-mode",
    "golden/data-skipping-basic-stats-all-types-columnmapping-name",
    "golden/data-skipping-basic-stats-all-types-columnmapping-id",
    "golden/v2-checkpoint-json",
    "golden/v2-checkpoint-parquet",
    "kernel/kernel-pagination-v2-checkpoint-parquet",
    "drs/table_with_column_mapping",
    "drs/checkpoint-v2-table",
    *DV_TABLES,
]


@pytest.fixture(scope="module")
def feature_tables_root(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("delta-feature-tables")
    extract(root, FEATURE_TABLES)
    return str(root)


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_canonical(v) for v in value)
    return value


def _rows(table: pa.Table) -> list[Any]:
    return sorted((_canonical(r) for r in table.to_pylist()), key=repr)


@pytest.mark.parametrize(
    "table", FEATURE_TABLES if CORPUS else [pytest.param(None, marks=pytest.mark.skip(reason=missing_reason()))]
)
def test_feature_table_rows_equal_delta_rs(spark: Any, feature_tables_root: str, table: str) -> None:
    from deltalake import QueryBuilder

    from use import DeltaTable as UseDeltaTable

    path = table_path(feature_tables_root, table)
    ours = UseDeltaTable.for_path(spark, path).read().toArrow()
    theirs = pa.table(QueryBuilder().register("t", DeltaTable(path)).execute("select * from t").read_all())
    expected = _rows(theirs)
    assert ours.column_names == theirs.column_names
    assert _rows(ours) == expected
    # SQL reads the same rows (its scans map column-mapped names themselves and drop rows DVs delete)
    sql = spark.sql(f"SELECT * FROM delta.`{path}`").toArrow()
    assert sql.column_names == theirs.column_names
    assert _rows(sql) == expected


# --- deletion vectors decoded independently of the reader -------------------------------------------------

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _z85_decode(text: str) -> bytes:
    """Z85 as ZeroMQ RFC 32 defines it: each 5 characters, base 85, are 4 big-endian bytes."""
    out = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for ch in text[i : i + 5]:
            value = value * 85 + _Z85.index(ch)
        out += value.to_bytes(4, "big")
    return bytes(out)


def _deleted_by_spec(root: str, dv: dict[str, Any]) -> list[int]:
    """The row indexes of one DV, read from the bytes as PROTOCOL.md lays them out."""
    if dv["storageType"] == "i":
        data = _z85_decode(dv["pathOrInlineDv"])[: dv["sizeInBytes"]]
    else:
        assert dv["storageType"] == "u"
        prefix, encoded = dv["pathOrInlineDv"][:-20], dv["pathOrInlineDv"][-20:]
        name = f"deletion_vector_{uuid.UUID(bytes=_z85_decode(encoded))}.bin"
        with open(os.path.join(root, prefix, name), "rb") as fh:
            content = fh.read()
        assert content[0] == 1  # the format version
        offset = dv.get("offset") or 1
        (size,) = struct.unpack(">i", content[offset : offset + 4])
        assert size == dv["sizeInBytes"]
        data = content[offset + 4 : offset + 4 + size]
        (crc,) = struct.unpack(">I", content[offset + 4 + size : offset + 8 + size])
        assert crc == zlib.crc32(data)
    (magic,) = struct.unpack("<i", data[:4])
    assert magic == 1681511377
    rows = list(BitMap64.deserialize(data[4:]))
    assert len(rows) == dv["cardinality"]
    return rows


@pytest.mark.parametrize("table", DV_TABLES if CORPUS else [pytest.param(None, marks=pytest.mark.skip(reason=missing_reason()))])
def test_deletion_vector_tables_drop_exactly_the_rows_their_bitmaps_name(
    spark: Any, feature_tables_root: str, table: str
) -> None:
    """Each data file's rows (pyarrow) less the rows its DV names (decoded here from the bytes) are
    the rows USE reads, through the Python API and SQL; at the latest versions, as time travel reads them."""
    from use.qbeast.reader import read
    from use.qbeast.snapshot import QbeastSnapshot

    path = table_path(feature_tables_root, table)
    log = DeltaLog.for_path(path)
    latest = log.snapshot().version
    for version in sorted({latest, *[v for v in table_versions(path) if v <= latest][-3:]}):
        snap = log.snapshot(version=version)
        if snap.column_mapping is not None and snap.column_mapping.active:
            stored_names = [snap.column_mapping.physical_name(c) for c in snap.schema.names if c not in snap.partition_columns]
        else:
            stored_names = [c for c in snap.schema.names if c not in snap.partition_columns]
        expected = []
        deleted = 0
        for p, dv in zip(snap.files.column("path").to_pylist(), snap.files.column("deletion_vector").to_pylist(), strict=True):
            data = pq.read_table(absolute_path(path, p), columns=stored_names)
            gone = set(_deleted_by_spec(path, dv)) if dv else set()
            deleted += len(gone)
            keep = [i for i in range(data.num_rows) if i not in gone]
            expected.append(data.take(pa.array(keep, pa.int64())).rename_columns(
                [c for c in snap.schema.names if c not in snap.partition_columns]))  # fmt: skip
        ours = read(spark, QbeastSnapshot.from_delta(snap)).toArrow()
        data_columns = [c for c in snap.schema.names if c not in snap.partition_columns]
        want = _rows(pa.concat_tables(expected, promote_options="permissive"))
        assert _rows(ours.select(data_columns)) == want, f"version {version}"
        sql = spark.sql(f"SELECT * FROM delta.`{path}` VERSION AS OF {version}").toArrow()
        assert _rows(sql.select(data_columns)) == want, f"SQL, version {version}"
        if version == latest:
            assert deleted > 0
