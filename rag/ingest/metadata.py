"""Metadata a document states about itself, read by rules at index time: category, front matter, id, version, date.

Every chunk of a folder document carries its document's fields in ``meta``, so ``rag search --where`` and the
retriever's filters (:mod:`rag.retrieval.filters`) can select by them and the version filter can keep only the
newest of several versions of one document:

* ``category``: the folder the file is in, relative to the indexed folder (``travel``, ``work policies``); none at
  the top level.
* Front matter: a leading ``---`` block of ``key: value`` lines (YAML's flat form); keys are lower-cased, spaces
  become ``_``. Lists and nesting are not parsed (the raw text is kept).
* Header fields: ``Document ID``, ``Version``, ``Effective Date``, ``Last Revised`` stated near the top, as
  ``**Document ID:** HR-POL-6002-V5`` or ``Version: 2.1`` (Markdown emphasis aside), become ``document_id``,
  ``version``, ``effective_date`` (ISO ``YYYY-MM-DD`` when the date parses) and ``revised``. A document id ending in
  ``-V<n>`` gives the version when none is stated, and its stem (``HR-POL-6002``) is ``document``: the key that
  versions of one document share.

Rules only: nothing here calls a model, and a document without any of these fields gets none (not empty values).
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

HEAD_LINES = 40  # header fields are looked for in a document's first lines only
_FRONT = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.S)
_FIELD = re.compile(r"^[ \t>*_-]*\**(document[ _-]?id|doc(?:ument)?[ _-]?number|version|effective[ _-]?date|"
                    r"last[ _-]?revised|revised)\**[ \t]*:[ \t]*\**[ \t]*(.+?)[ \t]*$", re.I | re.M)
_NAMES = {"documentid": "document_id", "docid": "document_id", "documentnumber": "document_id",
          "docnumber": "document_id", "version": "version", "effectivedate": "effective_date",
          "lastrevised": "revised", "revised": "revised"}
_VERSIONED_ID = re.compile(r"^(?P<stem>.+?)[-_ .]v(?:ersion)?[-_ .]?(?P<version>\d+(?:\.\d+)*)$", re.I)
_DATE_FORMATS = ("%B %d, %Y", "%b %d, %Y", "%d %B %Y", "%Y-%m-%d", "%d/%m/%Y", "%B %Y")


def document_metadata(text: str, rel_path: str) -> dict[str, Any]:
    """The fields ``text`` (the file at ``rel_path`` under the indexed folder) states about itself."""
    meta: dict[str, Any] = {}
    folder = PurePosixPath(rel_path).parent.as_posix()
    if folder not in ("", "."):
        meta["category"] = folder
    front = _FRONT.match(text)
    if front:
        meta.update(_front_matter(front.group(1)))
    head = "\n".join(text[front.end() if front else 0:].splitlines()[:HEAD_LINES])
    for match in _FIELD.finditer(head):
        name = _NAMES[re.sub(r"[ _-]", "", match.group(1).lower())]
        meta.setdefault(name, match.group(2).strip("*_ `"))
    for name in ("effective_date", "revised"):
        if isinstance(meta.get(name), str):
            meta[name] = iso_date(meta[name])
    versioned = _VERSIONED_ID.match(str(meta.get("document_id", "")))
    if versioned:
        meta.setdefault("version", versioned.group("version"))
        meta.setdefault("document", versioned.group("stem"))
    elif "document_id" in meta:
        meta.setdefault("document", meta["document_id"])
    return meta


def iso_date(text: str) -> str:
    """``"June 1, 2026"`` -> ``"2026-06-01"``; text that is not a date this knows is returned as it is."""
    cleaned = re.sub(r"(\d)(st|nd|rd|th)\b", r"\1", " ".join(text.split()))
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(cleaned, fmt).date().isoformat()
        except ValueError:
            continue
    return text


def version_key(meta: dict[str, Any]) -> tuple:
    """A sort key for "newer": the version's numbers, then the effective date (a missing part sorts oldest)."""
    version = str(meta.get("version", "")).lstrip("vV")
    numbers = tuple(int(n) for n in re.findall(r"\d+", version)) if version else ()
    return numbers, str(meta.get("effective_date", ""))


def _front_matter(block: str) -> dict[str, str]:
    out = {}
    for line in block.splitlines():
        key, sep, value = line.partition(":")
        key = "_".join(key.strip().lower().split())
        if sep and key and re.fullmatch(r"[a-z][\w-]*", key) and value.strip():
            out[key] = value.strip().strip("\"'")
    return out
