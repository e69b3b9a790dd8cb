"""Every error USE raises on purpose, in one place.

Each class is one kind of failure a user can act on; the message given at the raise site must say
what is wrong (naming the table, file, column, key or value) and what to do about it. Callers catch
these by class, never by message text. Nothing here imports anything else from the package, so every
layer can use it.
"""

from __future__ import annotations


class UseError(Exception):
    """Base of all errors raised deliberately by USE."""


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
    """The table uses a Delta reader/writer feature this implementation does not support."""


class VersionNotFoundError(UseError, LookupError):
    """A requested table version or timestamp is not available in the log."""


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
