"""How USE writes sizes, times and tables for people: one style on every surface.

Sizes are binary units (B, KiB, MiB, GiB, TiB), the units Delta's and Spark's size settings are
counted in (1 GiB = Delta's default `optimize.maxFileSize`). A value that is a whole number of a unit
prints without decimals (`64 MiB`), others with one (`59.8 KiB`). Where the exact count matters (what
a vacuum deleted, what a rewrite read and wrote, a configured limit a user may want to copy) the raw
byte count follows in parentheses: `59.8 KiB (61,253 B)`. Times are ISO 8601 in UTC. Tables are
plain fixed-width text with a header row (numbers right-aligned, text left-aligned), so the CLI, the
demo and `print()` of a result all look alike.

Nothing here imports anything else from the package, so every layer can use it (like `use.errors`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import Any

__all__ = ["format_bytes", "format_bytes_exact", "format_count", "format_ms", "plural", "shorten", "text_table"]

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(n: int | float) -> str:
    """`n` bytes in the largest binary unit that keeps the number >= 1: `512 B`, `64 MiB`, `1.5 GiB`."""
    sign = "-" if n < 0 else ""
    value = abs(float(n))
    if value < 1024:
        return f"{sign}{int(round(value)):,} B"
    exponent = 0
    while value >= 1024 and exponent < len(_UNITS) - 1:
        value /= 1024
        exponent += 1
    if value == int(value):
        return f"{sign}{int(value)} {_UNITS[exponent]}"
    if round(value, 1) >= 1024 and exponent < len(_UNITS) - 1:  # 1023.96 KiB prints as 1.0 MiB
        value /= 1024
        exponent += 1
    return f"{sign}{value:.1f} {_UNITS[exponent]}"


def format_bytes_exact(n: int) -> str:
    """`format_bytes` plus the exact count where it is not already exact: `59.8 KiB (61,253 B)`."""
    human = format_bytes(n)
    if human.endswith(" B"):
        return human
    return f"{human} ({int(n):,} B)"


def plural(n: int, noun: str, plural_form: str | None = None) -> str:
    """`1 file`, `2 files`, `1,024 blocks`."""
    return f"{int(n):,} {noun if int(n) == 1 else (plural_form or noun + 's')}"


def format_count(n: int) -> str:
    """A count with thousands separators: `1,234,567`."""
    return f"{int(n):,}"


def format_ms(ms: int | None) -> str:
    """Epoch milliseconds as an ISO 8601 UTC time, `2024-05-01T12:00:00.123Z` ('-' when unknown)."""
    if ms is None:
        return "-"
    stamp = _dt.datetime.fromtimestamp(int(ms) / 1000, _dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


def shorten(text: str, width: int) -> str:
    """`text` cut to `width` characters, ending in '...' when cut."""
    return text if len(text) <= width else text[: max(0, width - 3)] + "..."


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def text_table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, max_width: int | None = None) -> str:
    """A fixed-width text table with a header row and a rule under it.

    Numbers are right-aligned (ints with thousands separators), everything else left-aligned; None
    prints as '-'. Cells longer than `max_width` are shortened with '...'.
    """
    numeric = [
        bool(rows) and all(isinstance(r[i], (int, float)) and not isinstance(r[i], bool) or r[i] is None for r in rows)
        for i in range(len(header))
    ]
    cells = [[_cell(v) for v in row] for row in rows]
    if max_width is not None:
        cells = [[shorten(c, max_width) for c in row] for row in cells]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if numeric[i] else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths, strict=False))
        ).rstrip()

    out = [line(list(header)), line(["-" * w for w in widths])]
    out.extend(line(r) for r in cells)
    return "\n".join(out)
