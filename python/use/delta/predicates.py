"""A small typed predicate language for file pruning.

Spark expressions, SQL strings and CLI filters are translated into these types by the layers that
know them (the Spark reader turns Catalyst expressions into them); the Delta data-skipping code and
the Qbeast cube-space pruning evaluate them against file metadata. Keeping the language here, in
the lowest layer, means pruning never needs Spark and can be tested on synthetic metadata.

Semantics are SQL's: a comparison with NULL is unknown, and pruning is always conservative (a
file is dropped only when no row in it can satisfy the predicate). `Unknown` stands for any part
of a filter that cannot be used for pruning; it keeps every file.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
from dataclasses import dataclass
from typing import Literal

Value = bool | int | float | str | bytes | _dt.date | _dt.datetime | _decimal.Decimal
ComparisonOp = Literal["=", "!=", "<", "<=", ">", ">="]

_FLIPPED: dict[ComparisonOp, ComparisonOp] = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATED: dict[ComparisonOp, ComparisonOp] = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


@dataclass(frozen=True)
class Comparison:
    """`column <op> value` (the column is always on the left; see `flipped`)."""

    column: str
    op: ComparisonOp
    value: Value

    @staticmethod
    def flipped(value: Value, op: ComparisonOp, column: str) -> Comparison:
        """`value <op> column` written with the column on the left."""
        return Comparison(column, _FLIPPED[op], value)

    def negated(self) -> Comparison:
        """`NOT (column <op> value)` as one comparison: under SQL's WHERE a NULL matches neither."""
        return Comparison(self.column, _NEGATED[self.op], self.value)


@dataclass(frozen=True)
class InList:
    column: str
    values: tuple[Value, ...]


@dataclass(frozen=True)
class IsNull:
    column: str


@dataclass(frozen=True)
class IsNotNull:
    column: str


@dataclass(frozen=True)
class And:
    left: Predicate
    right: Predicate


@dataclass(frozen=True)
class Or:
    left: Predicate
    right: Predicate


@dataclass(frozen=True)
class Not:
    child: Predicate


@dataclass(frozen=True)
class Unknown:
    """A filter part that pruning cannot use; `description` says what it was, for explain output."""

    description: str = ""


Predicate = Comparison | InList | IsNull | IsNotNull | And | Or | Not | Unknown


def conjuncts(predicate: Predicate) -> list[Predicate]:
    """The AND-ed parts of a predicate, flattened."""
    if isinstance(predicate, And):
        return conjuncts(predicate.left) + conjuncts(predicate.right)
    return [predicate]


def columns_of(predicate: Predicate) -> set[str]:
    """Every column a predicate refers to."""
    if isinstance(predicate, (Comparison, InList, IsNull, IsNotNull)):
        return {predicate.column}
    if isinstance(predicate, (And, Or)):
        return columns_of(predicate.left) | columns_of(predicate.right)
    if isinstance(predicate, Not):
        return columns_of(predicate.child)
    return set()
