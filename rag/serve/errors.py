"""The two errors the web API adds to rag.errors: a name that is not found (404) and a bad request (400)."""

from __future__ import annotations


class NotFound(LookupError):
    """A run, artifact, passage or plot asked for by name that does not exist (HTTP 404)."""


class BadRequest(ValueError):
    """A request that is not well formed: says which field and what to send (HTTP 400)."""
