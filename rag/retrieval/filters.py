"""Metadata filters: search only the chunks whose fields match (``--where``), and keep the newest version of each
document (the version post-filter).

A filter is ``field -> accepted values``: a chunk matches when, for every field, its value equals one of the values
(case and surrounding spaces aside) or lies under it as a path (``category=work`` matches ``work/leave``). The
fields are those the index's chunks carry in ``meta`` (:mod:`rag.ingest.metadata` fills ``category``,
``document_id``, ``version``, ``effective_date`` for folder documents; ``--chunks`` rows bring their own), plus
``source`` and ``title``. An unknown field, or a filter no chunk matches, is a one-line error that lists what the
index has, so a typo never reads as "nothing found".
"""

from __future__ import annotations

from typing import Any

from rag.errors import ConfigError, InputError
from rag.index.info import filterable
from rag.ingest.metadata import version_key

BUILT_IN_FIELDS = ("source", "title")
MAX_LISTED = 12  # values named in an error


def parse_where(pairs: list[str] | tuple[str, ...] | None) -> dict[str, list[str]]:
    """``["category=travel", "category=security,training"]`` -> ``{"category": ["travel", "security", "training"]}``."""
    out: dict[str, list[str]] = {}
    for pair in pairs or ():
        name, sep, values = str(pair).partition("=")
        name = name.strip()
        if not sep or not name or not values.strip():
            raise ConfigError(f"--where {pair!r}: expected field=value, e.g. --where category=travel")
        out.setdefault(name, []).extend(v.strip() for v in values.split(",") if v.strip())
    return out


def describe(where: dict[str, list[str]]) -> str:
    return " and ".join(f"{name}={'|'.join(values)}" for name, values in where.items())


def field_values(chunk: Any, name: str) -> Any:
    return getattr(chunk, name, None) if name in BUILT_IN_FIELDS else chunk.meta.get(name)


def fields(index: Any) -> list[str]:
    """The fields a filter may name in this index (metadata keys with text or number values)."""
    names = {k for c in index.chunks for k, v in c.meta.items() if filterable(v)}
    return sorted(names | set(BUILT_IN_FIELDS))


def allowed_rows(index: Any, where: dict[str, list[str]]) -> set[int]:
    """The rows of ``index`` that match every field of ``where``."""
    known = fields(index)
    for name in where:
        if name not in known:
            raise ConfigError(f"--where: this index has no field {name!r}; its fields: {', '.join(known)}")
    rows = set(range(len(index)))
    for name, values in where.items():
        wanted = [_norm(v) for v in values]
        rows = {r for r in rows if _matches(field_values(index.chunks[r], name), wanted)}
        if not rows:
            present = sorted({str(field_values(c, name)) for c in index.chunks if field_values(c, name) is not None})
            shown = ", ".join(present[:MAX_LISTED]) + (f" (and {len(present) - MAX_LISTED} more)" if len(present) > MAX_LISTED else "")
            raise InputError(f"--where {describe(where)}: no passage matches; {name} values in this index: {shown or 'none'}")
    return rows


def newest_versions(index: Any) -> dict[str, tuple]:
    """``document`` key -> the newest version's :func:`~rag.ingest.metadata.version_key` in the whole index."""
    newest: dict[str, tuple] = {}
    for chunk in index.chunks:
        doc = chunk.meta.get("document")
        if doc:
            key = version_key(chunk.meta)
            newest[doc] = max(newest.get(doc, key), key)
    return newest


def latest_versions(rows: list[int], index: Any, newest: dict[str, tuple]) -> tuple[list[int], list[str]]:
    """``rows`` without the chunks of a superseded version: of the documents sharing a ``document`` key, only those
    with the newest ``version`` (else ``effective_date``) in the index stay (``newest``: :func:`newest_versions`).
    Returns the kept rows and one note per dropped one."""
    kept, notes = [], []
    for row in rows:
        chunk = index.chunks[row]
        doc = chunk.meta.get("document")
        if doc and doc in newest and version_key(chunk.meta) < newest[doc]:
            notes.append(f"version: dropped {chunk.id} ({chunk.meta.get('document_id') or doc}), superseded by a newer "
                         f"version of {doc}")
            continue
        kept.append(row)
    return kept, notes


def _norm(value: Any) -> str:
    return " ".join(str(value).split()).lower()


def _matches(value: Any, wanted: list[str]) -> bool:
    if value is None or isinstance(value, (list, dict)):
        return False
    have = _norm(value)
    return any(have == w or have.startswith(w.rstrip("/") + "/") for w in wanted)
