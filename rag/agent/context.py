"""Context shown to the LM, and the citations it gives back.

Document text is data. Passages are fenced, and anything in them that looks like a prompt field marker
(``[[ ## answer ## ]]``) or a fence of ours is neutralised, so a document cannot forge the structure of
the prompt. Citations are checked against the ids that were actually shown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

FENCE = "<<<"
FENCE_END = ">>>"
_MARKERS = re.compile(r"\[\[\s*##|##\s*\]\]|<<<|>>>")
# inline citations: [topic#001], [path/to/file.md#012]; ids contain no whitespace or brackets
_CITATION = re.compile(r"\[([^\[\]\s]+#\d+|sql:\d+)\]")  # a passage [file#003] or a SQL result [sql:1]
_NUMBERED = re.compile(r"\[(\d{1,2})\]")  # [2]: the second passage shown


def _clean(text: str) -> str:
    return _MARKERS.sub(lambda m: m.group(0).replace("#", "").replace("<", "‹").replace(">", "›"), text)


def format_context(hits: Sequence[Any], max_chars: int | None = None) -> str:
    """Number the passages and head each with its id: ``[1] [id] title`` (plus ``(p. 12)`` for a passage from a
    file with pages) then the fenced text, cut to its first ``max_chars`` characters when given."""
    from rag.ingest.chunking import page_label

    blocks = []
    for i, hit in enumerate(hits, 1):
        title = f" {hit.title}" if getattr(hit, "title", "") else ""
        page = page_label(getattr(hit, "meta", None))
        title += f" ({page})" if page else ""
        text = hit.text[:max_chars] if max_chars else hit.text
        blocks.append(f"[{i}] [{hit.chunk_id}]{title}\n{FENCE}\n{_clean(text).strip()}\n{FENCE_END}")
    return "\n\n".join(blocks)


def within_budget(hits: Sequence[Any], budget: int, count: Callable[[str], int],
                  max_chars: int | None = None) -> tuple[list[Any], list[Any]]:
    """The best-ranked passages whose formatted context takes at most ``budget`` tokens (``count``), and those left
    out, lowest-ranked first to go. The top passage always stays: the model's context window is the hard limit
    (``rag.lm.fit``), the budget is what a call is meant to cost."""
    kept: list[Any] = []
    for hit in hits:
        if kept and count(format_context([*kept, hit], max_chars)) > budget:
            break
        kept.append(hit)
    return kept, list(hits[len(kept):])


_HEADER = re.compile(r"^\[\d+\] \[([^\[\]\n]+)\]", re.M)  # an id may hold spaces (a file name), not brackets


def context_ids(context: str) -> list[str]:
    """The ids of the passages in a context :func:`format_context` wrote, in order (its ``[n] [id]`` headers)."""
    return list(dict.fromkeys(_HEADER.findall(context or "")))


def extract_citations(answer: str, cited: Iterable[str] | None = None) -> list[str]:
    """All references the answer makes: its ``cited_ids`` field first, then inline ``[id]`` or ``[n]`` markers;
    order kept, no repeats. Passage numbers are resolved against the shown ids by :func:`split_citations`."""
    out: list[str] = []
    for cid in [*(cited or []), *_CITATION.findall(answer or ""), *_NUMBERED.findall(answer or "")]:
        cid = str(cid).strip().strip("[]")
        if cid and cid not in out:
            out.append(cid)
    return out


def resolve(ref: str, shown: Sequence[str]) -> str | None:
    """A shown id for a reference: the id itself, a 1-based passage number (small models often cite [2]), or
    a copied passage header such as ``[2] [naming#004] Naming and binding`` (the bracketed id inside it)."""
    ref = str(ref).strip().strip("[]").strip()
    if ref in shown:
        return ref
    if ref.isdigit() and 1 <= int(ref) <= len(shown):
        return shown[int(ref) - 1]
    inside = [cid for cid in re.findall(r"\[([^\[\]\s]+)\]", f"[{ref}]") if cid in shown]
    return inside[0] if len(set(inside)) == 1 else None


def split_citations(cited: Iterable[str], shown_ids: Iterable[str]) -> tuple[list[str], list[str]]:
    """(valid, invalid): shown ids that were referenced (by id or passage number), and references to nothing shown."""
    shown = list(shown_ids)
    valid, invalid = [], []
    for ref in cited:
        cid = resolve(ref, shown)
        if cid is None:
            invalid.append(str(ref))
        elif cid not in valid:
            valid.append(cid)
    return valid, invalid


def clean_answer(answer: str, shown_ids: Sequence[str], invalid: Iterable[str]) -> str:
    """Inline ``[n]`` becomes ``[id]``; markers of references to nothing shown are removed."""
    shown = list(shown_ids)
    answer = _NUMBERED.sub(lambda m: f"[{resolve(m.group(1), shown)}]" if resolve(m.group(1), shown) else m.group(0),
                           answer or "")
    for ref in invalid:
        answer = answer.replace(f"[{ref}]", "")
    return re.sub(r"[ \t]{2,}", " ", answer).strip()


_FILLER = frozenset("a an and are as at be by can do does for from how i in is it of on or the to use used what when "
                    "which why with my you your vs versus "  # English filler, then the kinds of name the grader is told to give
                    "keyword keywords statement statements operator operators function functions method methods "
                    "module modules option options argument arguments parameter parameters clause expression "
                    "expressions attribute attributes class type types object objects value values built-in".split())


_SUFFIXES = ("ations", "ation", "ings", "ing", "ions", "ion", "ed", "es", "s")
_MIN_STEM = 4


def _stem(word: str) -> str:
    """``word`` without one common English ending, when at least four letters remain: "chained" -> "chain",
    "mangling" -> "mangl", "inversion" -> "invers". Crude on purpose: it is only used to look for the
    stem inside the passages, so "mangl" finds "mangled" and "invers" finds "inverse"."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= _MIN_STEM:
            return word[: -len(suffix)]
    return word


def _mentioned(term: str, text: str) -> bool:
    """A term is mentioned when each of its dotted parts is (``dict.popitem`` needs "dict" and "popitem", in
    any place), each part as written or by its stem, at the start of a word: "lock" is not mentioned by "block".
    A name's leading underscores do not count: "init" is mentioned by "__init__", "index" by "__index__"."""
    parts = [p for p in re.split(r"[.]+", term) if sum(c.isalpha() for c in p) >= 2] or [term]
    return all(_starts_word(part, text) or _starts_word(_stem(part), text) for part in parts)


def _starts_word(part: str, text: str) -> bool:
    return re.search(r"(?<![a-z0-9_])_*" + re.escape(part.lstrip("_")), text) is not None


def missing_terms(subject: str, hits: Sequence[Any]) -> list[str]:
    """The words of the grader's named subject that appear in none of ``hits`` (text or title), case-insensitive.

    Only words with at least two letters are checked (``-1**2`` or ``**`` are not), and filler words are
    skipped. A call is checked by its name (``id(x)`` as "id"). A word counts as mentioned when it or its stem
    appears (a possessive without its 's), and a dotted name when each of its parts does (see :func:`_mentioned`).
    A subject the passages never mention cannot be what they answer: the agent's guard against a small grader
    that calls any passage on a related topic relevant.
    """
    text = " ".join(f"{getattr(h, 'title', '') or ''} {getattr(h, 'text', '') or ''}" for h in hits).lower()
    out = []
    for word in subject.split():
        term = word.strip("`'\"()[]{},:;?!").rstrip(".").lower()
        term = term.split("(", 1)[0] or term  # a call: "id(x)" and "popitem()" name "id" and "popitem"
        term = term.removesuffix("'s").removesuffix("\u2019s")  # a possessive: module's -> module
        if sum(c.isalpha() for c in term) >= 2 and term not in _FILLER and term not in out and not _mentioned(term, text):
            out.append(term)
    return out
