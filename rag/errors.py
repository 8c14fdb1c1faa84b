"""Domain errors. The CLI turns each into one clean line on stderr (exit code 1).

Every message says what went wrong, where (file, line, field) and how to fix it.
"""

from __future__ import annotations


class SieveError(Exception):
    """Base class for every error Sieve reports to a user."""


class ConfigError(SieveError):
    """A configuration value is missing or invalid."""


class InputError(SieveError):
    """Bad user input: a file, a line, a field or a query."""


class IndexNotFound(SieveError):
    """No index where one was expected."""


class IndexMismatch(SieveError):
    """The index on disk does not match the current configuration, or is corrupt."""


class ModelError(SieveError):
    """A language or embedding model cannot be loaded or called."""


class QuotaExhausted(ModelError):
    """A provider's daily quota is spent; the run stops cleanly and can be resumed later."""


class ArtifactError(SieveError):
    """A compiled program in artifacts/ is missing, corrupt or does not match."""


class DataError(SieveError):
    """A table cannot be read into the index's database, or a SQL statement was refused or failed."""


class SQLRejected(DataError):
    """The SQL guard refused a statement (rag.data.sqlguard); the message is its one-line reason."""


class SQLFailed(DataError):
    """DuckDB could not run an accepted statement (error, time limit); the message is its one-line reason."""


class NotFound(SieveError, LookupError):
    """A run, artifact, passage or plot asked for by name does not exist (the web API answers 404)."""


class BadRequest(InputError, ValueError):
    """A request that is not well formed: says which field and what to send (the web API answers 400)."""
