"""Every error USE raises on purpose, in one place.

Each class is one kind of failure a user can act on; the message given at the raise site must say
what is wrong (naming the table, file, column, key or value) and what to do about it. Callers catch
these by class, never by message text. Nothing here imports anything else from the package, so every
layer can use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The surfaces a user reaches USE through. A way out is named in the user's own terms: a Python
# caller gets a keyword argument or a call, a command-line user a flag or a command, a SQL user a
# statement.
PYTHON = "python"
CLI = "cli"
SQL = "sql"
SURFACES = (PYTHON, CLI, SQL)


class UseError(Exception):
    """Base of all errors raised deliberately by USE.

    The message says what is wrong and, when the fix is the same everywhere, how to fix it. When the
    fix depends on where the user called from, the raise site gives it per surface in `hints`
    (`{PYTHON: "pass enforce_retention_check=False", CLI: "pass --force"}`): `str(exc)` is the
    message with the Python hint (the library's own surface), `exc.for_surface(CLI)` the line the
    command line prints. A surface without a hint gets the message alone, never another surface's
    advice.
    """

    def __init__(self, *args: Any, hints: Mapping[str, str] | None = None) -> None:
        super().__init__(*args)
        unknown = sorted(set(hints or {}) - set(SURFACES))
        if unknown:
            raise ValueError(f"unknown error surfaces {unknown}; known: {', '.join(SURFACES)}")
        self.hints: dict[str, str] = dict(hints or {})

    @property
    def message(self) -> str:
        """What is wrong, without any surface's hint."""
        return super().__str__()

    def for_surface(self, surface: str) -> str:
        """The message with `surface`'s hint appended (the message alone when it has none)."""
        hint = self.hints.get(surface)
        return f"{self.message}; {hint}" if hint else self.message

    def __str__(self) -> str:
        return self.for_surface(PYTHON)

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep the hints when an error crosses a process boundary (Spark tasks pickle exceptions).
        return (_rebuild, (type(self), self.args, self.hints))


def _rebuild(cls: type[UseError], args: tuple[Any, ...], hints: Mapping[str, str]) -> UseError:
    return cls(*args, hints=hints)


# --- input and configuration -------------------------------------------------------------------


class InvalidArgumentError(UseError, ValueError):
    """An argument of a public function has a wrong value or type."""


class ConfigError(UseError, ValueError):
    """A configuration key (table property, Spark conf, CLI flag) has a bad value or is unknown."""


# --- tables and the Delta log -----------------------------------------------------------------


class TableNotFoundError(UseError, FileNotFoundError):
    """No Delta table (no `_delta_log` with commits) at the given location."""


class TableAlreadyExistsError(UseError, FileExistsError):
    """A table was to be created where one already exists."""


class CorruptLogError(UseError):
    """The Delta log cannot be read as the protocol defines it (bad JSON, missing checkpoint part...)."""


class UnsupportedFeatureError(UseError):
    """The table uses a Delta reader/writer feature this implementation does not support.

    `feature` names the Delta table feature (as the protocol spells it, e.g. `deletionVectors`,
    `columnMapping`) when the refusal is about one, so callers can tell refusals apart without
    parsing the message.
    """

    def __init__(self, message: str, feature: str | None = None) -> None:
        super().__init__(message)
        self.feature = feature


class CorruptDeletionVectorError(UseError):
    """A deletion vector of a table cannot be read as the Delta protocol defines it: its file is
    missing or truncated, its checksum, size or cardinality disagrees with the log, its storage type
    or bitmap format is unknown. The message names the table, the data file and the deletion vector;
    nothing was read from the file it belongs to, and nothing was changed."""


class VersionNotFoundError(UseError, LookupError):
    """A requested table version or timestamp is not available in the log."""


class ServerError(UseError):
    """`use serve` cannot start or keep running (port in use, data directory not writable, the
    Thrift server never listened)."""


class AccessDeniedError(UseError):
    """A statement or connection was refused by the server's access rules: a path outside the
    allowed roots, a setting a session may not change, an administrator's operation (SQLSTATE 42501)."""


class ShimBuildError(UseError):
    """The JVM shim's Scala sources could not be compiled (or are not installed)."""


class StorageError(UseError, OSError):
    """The storage layer failed or lacks a guarantee the log needs (e.g. put-if-absent)."""


class ConcurrentModificationError(UseError):
    """A commit lost a race against a concurrent commit whose changes conflict with it.

    The table is unchanged by the losing commit; re-read the table and retry the operation.
    """


class ConcurrentAppendError(ConcurrentModificationError):
    """Files were added concurrently that the transaction should have read."""


class ConcurrentDeleteReadError(ConcurrentModificationError):
    """A file the transaction read was removed concurrently."""


class ConcurrentDeleteDeleteError(ConcurrentModificationError):
    """A file the transaction removes was removed concurrently."""


class MetadataChangedError(ConcurrentModificationError):
    """The table's metadata (schema, properties) changed concurrently."""


class ProtocolChangedError(ConcurrentModificationError):
    """The table's protocol changed concurrently."""


class ConcurrentTransactionError(ConcurrentModificationError):
    """An application transaction id (`txn` action) was committed concurrently."""


class StaleTransactionError(ConcurrentModificationError):
    """Commits made after the transaction's read version are gone from the log (log cleanup deleted
    them), so its conflicts cannot be checked; nothing was committed: re-read the table and retry."""


class CommitRetriesExceededError(ConcurrentModificationError):
    """The commit could not find a free version after the allowed number of retries."""


class VacuumRetentionError(UseError, ValueError):
    """A vacuum retention below the table's safety threshold was asked without forcing it."""


class SchemaMismatchError(UseError, ValueError):
    """Data written to a table does not match the table's schema."""


# --- Qbeast format ------------------------------------------------------------------------------


class NotAQbeastTableError(UseError):
    """The table exists but has no Qbeast metadata (no `qbeast.revision.*` configuration)."""


class IndexColumnError(UseError, ValueError):
    """An index column specification is unknown, duplicated, malformed or differs from the table's."""


class UnsupportedTypeError(UseError, TypeError):
    """A column type is not supported by the requested transformer."""


class CorruptIndexMetadataError(UseError):
    """Qbeast metadata in the log (revision JSON, `blocks` tags) cannot be parsed."""


# --- optimization -------------------------------------------------------------------------------


class UnknownStrategyError(ConfigError):
    """A file-selection strategy name is not registered."""


class OptimizationStoppedError(UseError):
    """An optimization was asked to stop before it could finish its current step."""


class TableConstraintError(UseError, ValueError):
    """A commit would break a rule the table declares (e.g. `delta.appendOnly=true` forbids removing data)."""


class RowCountMismatchError(UseError):
    """A merge task's rewrite produced a different number of rows than it read; it was not committed."""


# --- the continuous optimization service ----------------------------------------------------------


class ServiceError(UseError):
    """The optimization service cannot do what was asked in its current state (not started, stopping)."""
