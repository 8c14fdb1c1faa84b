"""What an index holds, read from its manifest and chunks (``rag index --info``): where it came from, how it was
built, the metadata fields a ``--where`` filter may name, and the tables the SQL writer is shown."""

from __future__ import annotations

from collections import Counter
from typing import Any

SHOWN_VALUES = 5  # a field's most common values listed; the rest are counted


def filterable(value: Any) -> bool:
    """Whether a chunk's metadata value can be matched by a ``--where`` filter: text or a number."""
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def describe(index: Any) -> dict[str, Any]:
    """The index as plain data: ``{"dir", "built_at", "sieve_version", "chunks", "sources", "embedding", "windows",
    "fields", "tables"}`` (``windows``: the manifest's record of rag.index.windows, or None); ``fields`` maps each metadata field to its value counts, most common first."""
    m = index.manifest
    values: dict[str, Counter] = {}
    for chunk in index.chunks:
        for key, value in chunk.meta.items():
            if filterable(value):
                values.setdefault(key, Counter())[str(value)] += 1
    embedding = m.get("embedding") or {}
    adapted = embedding.get("adapted")
    label = embedding.get("label") or embedding.get("model")
    if adapted:  # rag index --adapt-encoder: the folder's path says nothing to a reader
        label = (f"{'all-MiniLM-L6-v2' if adapted['base'] == 'default' else adapted['base']} adapted to this corpus "
                 f"({adapted['pairs']:,} inverse-cloze pairs, {adapted['steps']} step{'' if adapted['steps'] == 1 else 's'}; "
                 f"{adapted['folder']})")
    return {"dir": str(index.dir), "built_at": m.get("built_at"), "sieve_version": m.get("sieve_version"),
            "chunks": len(index.chunks), "sources": len({c.source for c in index.chunks}),
            "corpus": (m.get("corpus") or {}).get("source"),
            "embedding": label, "windows": m.get("windows"),
            "fields": {k: dict(v.most_common()) for k, v in sorted(values.items())},
            "tables": (m.get("tables") or {}).get("tables", [])}


def render(info: dict[str, Any]) -> str:
    """``describe``'s data as the lines ``rag index --info`` prints."""
    lines = [f"Index {info['dir']}",
             f"  built {info['built_at']} by Sieve {info['sieve_version']} from {info['corpus']}",
             f"  {info['chunks']:,} chunks from {info['sources']:,} source(s); embeddings: {info['embedding']}"]
    windows = info.get("windows")
    long_chunks = (windows or {}).get("long_chunks", 0)
    lines.append(f"  passage windows: {windows['count']:,} vectors (the {long_chunks:,} chunk{'' if long_chunks == 1 else 's'} "
                 f"longer than {windows['tokens']} word pieces in windows of that size, the rest whole)" if windows else
                 "  passage windows: none, one vector per chunk (rebuild with dense_windows = 64 to add them)")
    if info["fields"]:
        lines.append("Metadata fields (rag search/ask/eval --where FIELD=VALUE):")
        for name, counts in info["fields"].items():
            shown = ", ".join(f"{v} ({n})" for v, n in list(counts.items())[:SHOWN_VALUES])
            more = f", and {len(counts) - SHOWN_VALUES} more" if len(counts) > SHOWN_VALUES else ""
            lines.append(f"  {name}: {shown}{more}")
    else:
        lines.append("Metadata fields: none (a folder's subfolders become category; front matter and document "
                     "headers add more)")
    if info["tables"]:
        lines.append("Tables (the data route queries them read-only; rag ask routes each question):")
        for table in info["tables"]:
            rows = table.get("rows", 0)
            head = f"  {table['name']} ({rows:,} row{'' if rows == 1 else 's'}) from {table.get('source', '?')}"
            lines.append(head + (f": {table['description']}" if table.get("description") else ""))
            for col in table.get("columns", []):
                desc = f" -- {col['description']}" if col.get("description") else ""
                lines.append(f"      {col['name']} {col['type']}{desc}")
    else:
        lines.append("Tables: none (rag index FOLDER takes CSV, Parquet, JSON lines, SQLite and DuckDB files; "
                     "or --tables DIR)")
    return "\n".join(lines)
