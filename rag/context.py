"""Context shown to the LM, and the citations it gives back.

Document text is data. Passages are fenced, and anything in them that looks like a prompt field marker
(``[[ ## answer ## ]]``) or a fence of ours is neutralised, so a document cannot forge the structure of
the prompt. Citations are checked against the ids that were actually shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

FENCE = "<<<"
FENCE_END = ">>>"
_MARKERS = re.compile(r"\[\[\s*##|##\s*\]\]|<<<|>>>")
# inline citations: [topic#001], [path/to/file.md#012]; ids contain no whitespace or brackets
_CITATION = re.compile(r"\[([^\[\]\s]+#\d+)\]")


def _clean(text: str) -> str:
    return _MARKERS.sub(lambda m: m.group(0).replace("#", "").replace("<", "‹").replace(">", "›"), text)


def format_context(hits: Sequence[Any]) -> str:
    """Number the passages and head each with its id: ``[1] [id] title`` then the fenced text."""
    blocks = []
    for i, hit in enumerate(hits, 1):
        title = f" {hit.title}" if getattr(hit, "title", "") else ""
        blocks.append(f"[{i}] [{hit.chunk_id}]{title}\n{FENCE}\n{_clean(hit.text).strip()}\n{FENCE_END}")
    return "\n\n".join(blocks)


def extract_citations(answer: str, cited: Iterable[str] | None = None) -> list[str]:
    """All ids the answer cites: its ``cited_ids`` field first, then inline ``[id]`` markers; order kept, no repeats."""
    out: list[str] = []
    for cid in [*(cited or []), *_CITATION.findall(answer or "")]:
        cid = str(cid).strip().strip("[]")
        if cid and cid not in out:
            out.append(cid)
    return out


def split_citations(cited: Iterable[str], shown_ids: Iterable[str]) -> tuple[list[str], list[str]]:
    """(valid, invalid): ids that were shown in the context, and ids that were not."""
    shown = set(shown_ids)
    valid, invalid = [], []
    for cid in cited:
        (valid if cid in shown else invalid).append(cid)
    return valid, invalid


def strip_invalid_citations(answer: str, invalid: Iterable[str]) -> str:
    """Remove inline markers of ids that were never shown, so the user sees no invented sources."""
    for cid in invalid:
        answer = answer.replace(f"[{cid}]", "")
    return re.sub(r"[ \t]{2,}", " ", answer).strip()
