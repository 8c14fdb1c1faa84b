"""Mechanical checks of a draft, with no model call: a seed passage must state something, a draft must be written in
the scripts of the passage it was drafted from, and its question must not point at that passage.

- **Contents pages.** A passage that only lists a document's numbered headings ("1. Purpose and Philosophy 2. Paid
  Time Off (PTO) Accrual and Tiers 3. ...") states no fact, yet a small drafting model asked for a question and its
  answer from one writes both, and invents the answer ("the base salary is $50,000"). Such passages are not
  sampled as seeds (:func:`lists_headings`): at least :data:`MIN_HEADINGS` numbered headings, no sentence ending
  in a word, no code. A numbered procedure ("4. Flush changes and restart Docker" over a console block) holds code
  or sentences and stays a seed.
- **Another script.** The embedded Qwen models drift into Chinese mid-sentence now and then ("... does not grant
  implicit访问"): a question or reference answer holding letters of a script its English passage does not use is
  garbled, whatever the rest says (:func:`foreign_scripts`). Scripts are read from the Unicode names of letters
  (LATIN, CJK, CYRILLIC, GREEK, ...), so a corpus in any language is checked against itself.
- **"The passage".** A question that asks "what types of harassment are mentioned in the passage?" is not
  self-contained: whoever is asked it later never sees the passage (:func:`names_its_passage`).

Replayed on the 240 drafted items reviewed by hand before the checks existed (five sets, two corpora), they flag 19:
17 the reviewer had rejected, and 2 kept, one unanswerable question drafted twice from a contents page
(benchmarks/results/draft_checks.md).
"""

from __future__ import annotations

import re
import unicodedata

MIN_HEADINGS = 4  # numbered headings in a passage that states nothing else: a contents page
_HEADING = re.compile(r"(?:^|\s)\d{1,3}\.\s+[A-Z]")
_SENTENCE_END = re.compile(r"[a-z][.!?](?:\s|$)")
_ITS_PASSAGE = re.compile(r"\b(?:the|this|that|given|above|following|provided)\s+(?:passage|excerpt|snippet)s?\b", re.I)


def lists_headings(text: str) -> bool:
    """Whether ``text`` is a contents page: numbered headings and nothing stated (module docstring)."""
    return len(_HEADING.findall(text)) >= MIN_HEADINGS and not _SENTENCE_END.search(text) and "`" not in text


def scripts(text: str) -> set[str]:
    """The scripts of the letters of ``text``, by the first word of their Unicode names ("LATIN", "CJK")."""
    return {unicodedata.name(ch, "?").split(" ")[0] for ch in set(text) if ch.isalpha()}


def foreign_scripts(draft: str, passage: str) -> list[str]:
    """The scripts of ``draft``'s letters that ``passage`` has no letter of, sorted: [] when it has them all."""
    return sorted(scripts(draft) - scripts(passage))


def names_its_passage(question: str) -> bool:
    """Whether ``question`` points at the passage it was drafted from ("the passage", "this excerpt")."""
    return _ITS_PASSAGE.search(question) is not None
