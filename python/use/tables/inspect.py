"""`t.inspect`: a table's insight tables as pyarrow (in the manner of pyiceberg's `tbl.inspect`).

One method per insight of `use.insights.TABLE_INSIGHTS`, each computed from the latest snapshot on
the driver without a Spark job: the rows SQL's `use_catalog.<catalog>.<db>.<table>.<name>` serves.
`docs/insights.md` describes every column.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from use.tables.base import Table

__all__ = ["Inspect"]


class Inspect:
    """The insight tables of one table (module docstring)."""

    def __init__(self, table: Table[Any]) -> None:
        self._table = table

    def optimizations(self) -> pa.Table:
        """One row per committed optimization: the OptimizationEvent's fields and its commit version."""
        return self._table.insight("optimizations")

    def history(self) -> pa.Table:
        """One row per commit (DESCRIBE HISTORY), with whether it is an optimization."""
        return self._table.insight("history")

    def detail(self) -> pa.Table:
        """One row: format, location, files, size, properties, protocol (DESCRIBE DETAIL)."""
        return self._table.insight("detail")

    def files(self) -> pa.Table:
        """One row per live data file: size, records, revision, level, blocks, cubes, weights."""
        return self._table.insight("files")

    def cubes(self) -> pa.Table:
        """One row per cube of every indexed revision: counts, fill, weights, files."""
        return self._table.insight("cubes")

    def revisions(self) -> pa.Table:
        """One row per revision: columns, transformations, cube size, files, rows."""
        return self._table.insight("revisions")

    def layout(self) -> pa.Table:
        """Layout figures and the health score per revision, with the session's
        `spark.qbeast.use.optimization.*` defaults (as `optimize()` reads them)."""
        return self._table.insight("layout")

    def plan(self, revision_id: int | None = None) -> pa.Table:
        """The optimizer's next plan, one row per merge task (nothing written); `revision_id` as for
        `optimize()`."""
        return self._table.insight("plan", revision_id=revision_id)

    def __repr__(self) -> str:
        return f"Inspect({self._table!r})"
