"""Absent terms: what makes a drafted "unanswerable" question unanswerable by construction.

A small drafting model, asked for a plausible question the documents do not answer, mostly asks about what they do
cover: all 15 "unanswerable" drafts of the embedded 1.5B on the built-in corpus were answerable, and its pool
labeller let every one through (benchmarks/results/drafted_builtin_60.jsonl). The hand-written golden sets define an
unanswerable item the other way round, by ``absent_terms``: words the question asks about that occur nowhere in the
corpus. :func:`absent_terms` applies that test to a draft: a question every one of whose terms the corpus contains
("the difference between 'nonlocal' and 'global'") is dropped before its pool is labelled; one that names something
the corpus never mentions ("asyncio.gather's return_exceptions") is kept, with those terms recorded.

Terms are the question's quoted or code-like spans ('pdb', ``breakpoint()``, ``asyncio.gather``) and its other words
of three letters or more that are not common English function words; a term is present when the corpus holds it
as a word (any case), a word of the same root (:func:`root`: "allowed" for "allowance", "obtaining" for "obtain";
drafts on the Aegis policies passed as unanswerable on such words alone and were answered), or, for a code-like
span, as text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_QUOTED = re.compile(r"[`'\"]([^`'\"]{2,60})[`'\"]")
_CODE = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+|[A-Za-z_]\w*\(\)|\b\w*_\w+\b")
_WORD = re.compile(r"[a-z][a-z0-9]+(?:-[a-z0-9]+)*")
COMMON = set("""the and for are but not you your with what which when where who whom whose why how does did doing
done has have had having can could should would will shall may might must this that these those there their them
they its into onto from than then also any all each every some such between about over under other another more
most less least very only just same own used use using uses way ways work works mean means meaning difference
differences purpose happens happen example examples possible something anything thing things kind kinds type types
one two get gets make makes made passage passages document documents section sections text mentioned
mention""".split())  # the drafter's words for its input ("the function mentioned in the passage") name nothing


class CorpusTerms:
    """The corpus's words and lower-cased text, to test a question's terms against (built once per draft run)."""

    def __init__(self, texts: Iterable[str]) -> None:
        parts = [t.lower() for t in texts]
        self.text = "\n".join(parts)
        self.words = {w for t in parts for w in _WORD.findall(t)}
        self.roots = {root(w) for w in self.words}

    def has(self, term: str) -> bool:
        term = re.sub(r"\(.*?\)", "()", term.lower().strip())  # math.fmod(x,y) -> math.fmod()
        if term in self.words:  # "pre-programmed", as the corpus writes it
            return True
        if _CODE.fullmatch(term):
            return term.rstrip("()") in self.text
        if "-" in term and term.replace("-", "").isalnum():  # "try-except": present when its parts are
            return all(self.has(part) for part in term.split("-") if part)
        if not term.replace("-", "").isalnum():  # 'abs(x) < abs(y)': present when each of its parts is
            parts = [*_CODE.findall(term), *_WORD.findall(_CODE.sub(" ", term))]
            return bool(parts) and all(self.has(p) for p in parts)
        return term + "s" in self.words or (term.endswith("s") and term[:-1] in self.words) or root(term) in self.roots


_SUFFIXES = ("ations", "ation", "ments", "ment", "ances", "ance", "ings", "ing", "ers", "er", "ied", "ies", "ed", "es",
             "s")


def root(word: str) -> str:
    """``word`` without one inflection or derivation suffix and a final "e" (allowed, allowance -> allow; adjusting,
    adjustments -> adjust; approve, approving -> approv), kept at 4 letters or more: "allowed" asks about what the
    corpus's "allowance" covers, so it names nothing the corpus lacks."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            word = word[:-len(suffix)] + ("y" if suffix in ("ied", "ies") else "")
            break
    return word[:-1] if word.endswith("e") and len(word) > 4 else word


def terms(question: str) -> list[str]:
    """The question's terms (module docstring), in order, each once."""
    found: list[str] = []
    spans = [m.group(1).strip() for m in _QUOTED.finditer(question)]
    rest = _QUOTED.sub(" ", question)
    spans += _CODE.findall(rest)
    rest = _CODE.sub(" ", rest)
    spans = [t for t in spans if _WORD.search(t.lower())]  # '+= 1' names nothing to look up
    for term in [*spans, *(w for w in _WORD.findall(rest.lower()) if len(w) >= 3 and w not in COMMON)]:
        if term and term.lower() not in (f.lower() for f in found):
            found.append(term)
    return found


def absent_terms(question: str, corpus: CorpusTerms) -> list[str]:
    """The terms of ``question`` the corpus does not hold: [] means the corpus mentions everything it asks about."""
    return [t for t in terms(question) if not corpus.has(t)]
