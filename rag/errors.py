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


class Cancelled(BaseException):
    """The caller stopped a model call while it was under way (``rag.lm.streaming.listen(..., cancelled=...)``): the
    generation was cut at its next token (the embedded model) or its stream closed (a hosted model), and its reply,
    unfinished, is thrown away (DSPy's cache never stores it).

    A ``BaseException``, as ``KeyboardInterrupt`` and ``asyncio.CancelledError`` are, not a ``SieveError``: nothing
    between the engine and whoever stopped the call may take it for a failed call (DSPy's error boundary would turn an
    ``Exception`` into an ``LMUnexpectedError``, the agent's nodes take any failure for output they cannot use and go
    on). ``rag.serve.stream.Runner`` records it as the stopped question it is."""
