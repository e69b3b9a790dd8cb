"""What an optimization run looks like to a person: progress lines, the metrics table, the summary,
and why nothing was selected. Pure: metrics and snapshots in, text out.

The command line, the demo and `print(result)` in Python all render through here, so the three look
alike: sizes in binary units with the exact byte counts where they are totals (`use.display`), and a
plain Delta table named as such, with files, never as "revision -1" with "blocks" (its files have no
index; the executor counts each as one root block only to keep the metrics uniform).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from use.display import format_bytes, format_bytes_exact, plural, text_table
from use.optimize.plan import PLAIN_DELTA_REVISION, revision_label
from use.optimize.strategies import registry

if TYPE_CHECKING:  # pragma: no cover
    from use.optimize.loop_core import OptimizeResult
    from use.optimize.task_metrics import IterationMetrics

__all__ = [
    "format_iteration",
    "format_metrics_table",
    "format_summary",
    "render_result",
    "explain_nothing_selected",
]


def _side(files: int, nbytes: int, blocks: int, plain: bool) -> str:
    text = f"{plural(files, 'file')} ({format_bytes(nbytes)}"
    return text + (")" if plain else f", {plural(blocks, 'block')})")


def format_iteration(m: IterationMetrics) -> str:
    """One progress line per iteration (the CLI and `optimize(progress=True)` print these)."""
    where = f"{m.strategy}/{m.kind} {revision_label(m.revision_id)}"
    if not m.committed:
        return f"iteration {m.iteration}: {where}: abandoned ({m.error or 'conflict'}); re-planning"
    plain = m.revision_id == PLAIN_DELTA_REVISION
    return (
        f"iteration {m.iteration}: {where}: {_side(m.files_in, m.bytes_in, m.blocks_in, plain)} -> "
        f"{_side(m.files_out, m.bytes_out, m.blocks_out, plain)}, {m.rows:,} rows, {m.time_ms:,} ms, "
        f"version {m.version}"
    )


def format_metrics_table(iterations: Sequence[IterationMetrics]) -> str:
    """The per-iteration metrics as a text table (cubes and blocks left blank for plain Delta files)."""
    header = ["iter", "strategy", "kind", "revision", "status", "version", "files in", "files out", "bytes in",
              "bytes out", "avg in", "avg out", "cubes in", "cubes out", "blocks in", "blocks out", "rows", "ms"]  # fmt: skip
    rows: list[list[Any]] = []
    for m in iterations:
        plain = m.revision_id == PLAIN_DELTA_REVISION
        rev = "plain Delta" if plain else str(m.revision_id)
        index = [None] * 4 if plain else [m.cubes_in, m.cubes_out, m.blocks_in, m.blocks_out]
        rows.append([m.iteration, m.strategy, m.kind, rev, m.status, m.version, m.files_in, m.files_out,
                     format_bytes(m.bytes_in), format_bytes(m.bytes_out), format_bytes(m.avg_file_size_in),
                     format_bytes(m.avg_file_size_out), *index, m.rows, m.time_ms])  # fmt: skip
    return text_table(header, rows)


def format_summary(result: OptimizeResult) -> str:
    """One line: why the run ended and what it rewrote (exact byte counts)."""
    t = result.totals()
    if not t["iterations"]:
        return f"{result.outcome}: {getattr(result, 'note', None) or 'nothing to optimize'}"
    return (
        f"{result.outcome}: {t['committed']} of {plural(t['iterations'], 'task')} committed, "
        f"{plural(t['files_in'], 'file')} of {format_bytes_exact(t['bytes_in'])} rewritten into "
        f"{plural(t['files_out'], 'file')} of {format_bytes_exact(t['bytes_out'])}"
    )


def render_result(result: OptimizeResult) -> str:
    """The whole result as text: the plan of a dry run, else the metrics table and the summary."""
    if result.dry_run:
        if result.plan is None or result.plan.is_empty:
            return f"dry run: {getattr(result, 'note', None) or 'nothing to optimize'}"
        return result.plan.render()
    if not result.iterations:
        return format_summary(result)
    return format_metrics_table(result.iterations) + "\n" + format_summary(result)


def _names(flag: str) -> list[str]:
    return [n for n in registry.names() if getattr(registry.get_class(n), flag, True)]


def explain_nothing_selected(qsnap: Any, chain: Sequence[str]) -> str:
    """Why the strategies `chain` selected nothing on this table, in words a user can act on.

    A strategy may not apply to the kind of table at all (the leveled strategies need an OTree
    index, which a plain Delta table does not have), or apply only to files the table does not have
    (the plain-file strategies rewrite only plain files, which on a Qbeast table are its staging
    files); otherwise the table simply meets the strategies' thresholds.
    """
    where = qsnap.table_root or "the table"
    reasons: list[str] = []
    for name in chain:
        cls = registry.get_class(name)
        if not qsnap.is_qbeast and not getattr(cls, "applies_to_delta", True):
            reasons.append(
                f"{name} works on the OTree index of a Qbeast table, and {where} is a plain Delta table; strategies "
                f"for plain Delta tables: {', '.join(_names('applies_to_delta'))}"
            )
        elif qsnap.is_qbeast and not getattr(cls, "applies_to_qbeast", True):
            reasons.append(
                f"{name} does not apply to Qbeast tables; strategies for them: {', '.join(_names('applies_to_qbeast'))}"
            )
        elif qsnap.is_qbeast and getattr(cls, "applies_to_delta", True) and not _has_staging_files(qsnap):
            index_only = [n for n in registry.names() if not getattr(registry.get_class(n), "applies_to_delta", True)]
            reasons.append(
                f"{name} rewrites only plain files, which on a Qbeast table are its staging (revision 0) files, and "
                f"{where} has none; its indexed revisions are compacted by {', '.join(index_only)}"
            )
    if reasons:
        return "nothing to optimize: " + "; ".join(reasons)
    names = ", ".join(chain) or "no strategy"
    return f"nothing to optimize: {names} selected no files (the table already meets the strategy's thresholds)"


def _has_staging_files(qsnap: Any) -> bool:
    files = qsnap.files
    if files.num_rows == 0 or "revision_id" not in files.column_names:
        return False
    return bool(np.any(files.column("revision_id").to_numpy(zero_copy_only=False) == 0))
