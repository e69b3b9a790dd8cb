"""`use.insights`: insight tables as Arrow, pure functions of a table's facts. Never imports pyspark.

Layer 4 of the design (above `use.optimize`, below the service and the SQL surface). Each insight is
a function `<name>(facts...) -> pyarrow.Table` whose schema is a module constant (`SCHEMAS[name]`),
so a reader (the SQL surface's `pyspark.sql.datasource` readers of `use_catalog`) can declare its
schema without computing anything, then call `for_path(location, name)` in a Python worker, which
needs only storage: it loads the latest snapshot (and, for events and history, the commit history)
with `TableFacts.load` and computes the table.

Per-table insights (`TABLE_INSIGHTS`):
    optimizations  one row per OptimizationEvent (the seed's fields) + its commit version
    history        one row per commit (DESCRIBE HISTORY), with is_optimization
    detail         one row: format, location, files, size, properties, protocol (DESCRIBE DETAIL)
    files          one row per live file: size, records, revision, level, blocks, cubes, weights
    cubes          one row per cube of every indexed revision: counts, fill, weights, files
    revisions      one row per revision: columns, transformations, cube size, files, rows
    layout         layout figures and the health score per revision (see `use.insights.health`)
    plan           the optimizer's next plan, one row per merge task (nothing written)
Lake-wide (`LAKE_INSIGHTS`, `use_catalog.system_lake_tables.*`): `metastore_summary` and
`optimizations`, built from table identities the caller lists (`use.insights.lake`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from use.errors import InvalidArgumentError
from use.insights.facts import TableFacts
from use.insights.health import LAYOUT_SCHEMA, health_score, layout
from use.insights.lake import (
    LAKE_OPTIMIZATIONS_SCHEMA,
    METASTORE_SUMMARY_SCHEMA,
    NOT_SERVED,
    ServiceState,
    TableIdentity,
    lake_optimizations,
    metastore_summary,
    metastore_summary_row,
)
from use.insights.planning import PLAN_SCHEMA, plan
from use.insights.tables import (
    CUBES_SCHEMA,
    DETAIL_SCHEMA,
    FILES_SCHEMA,
    HISTORY_SCHEMA,
    OPTIMIZATIONS_SCHEMA,
    REVISIONS_SCHEMA,
    cubes,
    detail,
    files,
    history,
    optimizations,
    revisions,
)
from use.optimize.planner import target_config

__all__ = [
    "CUBES_SCHEMA",
    "DETAIL_SCHEMA",
    "FILES_SCHEMA",
    "HISTORY_SCHEMA",
    "LAKE_INSIGHTS",
    "LAKE_OPTIMIZATIONS_SCHEMA",
    "LAYOUT_SCHEMA",
    "METASTORE_SUMMARY_SCHEMA",
    "NOT_SERVED",
    "OPTIMIZATIONS_SCHEMA",
    "PLAN_SCHEMA",
    "REVISIONS_SCHEMA",
    "TABLE_INSIGHTS",
    "Insight",
    "ServiceState",
    "TableFacts",
    "TableIdentity",
    "check",
    "cubes",
    "detail",
    "files",
    "for_path",
    "health_score",
    "history",
    "lake_optimizations",
    "layout",
    "metastore_summary",
    "metastore_summary_row",
    "optimizations",
    "plan",
    "revisions",
    "schema",
]


@dataclass(frozen=True)
class Insight:
    """One per-table insight: its name, fixed schema and how it is computed from a table's facts.

    `compute(facts, spark_conf=None, **options)` with `options` among `options`: `spark_conf`
    (session `spark.qbeast.use.optimization.*` defaults, as `optimize()` reads them) is accepted by
    every insight and used by `layout` and `plan`; `plan` also takes `revision_id`. `check(facts,
    **the same)`, when set, raises what `compute` would refuse in the table's settings, without
    reading any file (see `check`).
    """

    name: str
    schema: pa.Schema
    compute: Callable[..., pa.Table]
    doc: str
    options: tuple[str, ...] = ()
    check: Callable[..., None] | None = None


def _layout(facts: TableFacts, spark_conf: Mapping[str, str] | None = None) -> pa.Table:
    return layout(facts.qsnap, facts.config(spark_conf))


def _check_layout(facts: TableFacts, spark_conf: Mapping[str, str] | None = None) -> None:
    facts.config(spark_conf)


def _plan(facts: TableFacts, spark_conf: Mapping[str, str] | None = None, revision_id: int | None = None) -> pa.Table:
    return plan(facts.qsnap, facts.planning_config(spark_conf), revision_id=revision_id)


def _check_plan(facts: TableFacts, spark_conf: Mapping[str, str] | None = None, revision_id: int | None = None) -> None:
    target_config(facts, facts.config(spark_conf), revision_id)


TABLE_INSIGHTS: Mapping[str, Insight] = {
    i.name: i
    for i in (
        Insight("optimizations", OPTIMIZATIONS_SCHEMA, lambda f, **_: optimizations(f.history), "one row per optimization event"),
        Insight("history", HISTORY_SCHEMA, lambda f, **_: history(f.history), "one row per commit"),
        Insight(
            "detail",
            DETAIL_SCHEMA,
            lambda f, **_: detail(f.snapshot, f.location),
            "the table: format, files, size, properties, protocol",
        ),
        Insight("files", FILES_SCHEMA, lambda f, **_: files(f.qsnap), "one row per live data file"),
        Insight("cubes", CUBES_SCHEMA, lambda f, **_: cubes(f.qsnap), "one row per cube of each indexed revision"),
        Insight("revisions", REVISIONS_SCHEMA, lambda f, **_: revisions(f.qsnap), "one row per revision"),
        Insight("layout", LAYOUT_SCHEMA, _layout, "layout figures and health score per revision", check=_check_layout),
        Insight("plan", PLAN_SCHEMA, _plan, "the optimizer's next plan, one row per merge task", ("revision_id",), _check_plan),
    )
}

#: Lake-wide insight tables (`use_catalog.system_lake_tables.<name>`) and their schemas.
LAKE_INSIGHTS: Mapping[str, pa.Schema] = {
    "metastore_summary": METASTORE_SUMMARY_SCHEMA,
    "optimizations": LAKE_OPTIMIZATIONS_SCHEMA,
}


def _insight(name: Any) -> Insight:
    found = TABLE_INSIGHTS.get(name) if isinstance(name, str) else None
    if found is None:
        raise InvalidArgumentError(f"unknown insight table {name!r}; the insight tables are {', '.join(TABLE_INSIGHTS)}")
    return found


def schema(name: str) -> pa.Schema:
    """The fixed schema of a per-table insight (InvalidArgumentError naming the valid ones)."""
    return _insight(name).schema


def _with_options(name: Any, options: Mapping[str, Any]) -> Insight:
    insight = _insight(name)
    unknown = sorted(set(options) - {"spark_conf", *insight.options})
    if unknown:
        accepted = ", ".join(("spark_conf", *insight.options))
        raise InvalidArgumentError(f"insight {name!r} takes no option {', '.join(unknown)}; it accepts {accepted}")
    return insight


def for_path(location: str, name: str, **options: Any) -> pa.Table:
    """The insight table `name` of the Delta/Qbeast table at `location`, from its latest snapshot.

    Reads only storage (a reader in a Python worker can call it). The name and options are checked
    before the table is read; TableNotFoundError when there is no table at `location`.
    """
    return _with_options(name, options).compute(TableFacts.load(location), **options)


def check(facts: TableFacts, name: str, **options: Any) -> None:
    """Raise what `for_path(..., name, **options)` would refuse in the table's settings (a bad
    `use.optimization.*` property or session default: ConfigError; a target revision the table
    lacks), from its configuration alone: no file is read and nothing computed.

    Why: the SQL surface plans a query on the driver and computes its rows in a Python worker,
    where an error can only reach the client as a Python traceback inside a failed Spark job. The
    driver calls this when the query is planned, so a bad setting is one clean error instead.
    """
    insight = _with_options(name, options)
    if insight.check is not None:
        insight.check(facts, **options)
