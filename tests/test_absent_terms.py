"""rag.curate.absent: the terms of a drafted question, and which of them a corpus never mentions."""

from __future__ import annotations

import pytest

from rag.curate.absent import CorpusTerms, absent_terms, terms

CORPUS = CorpusTerms(["The nonlocal statement rebinds names of the enclosing function. math.fmod(x, y) keeps the sign.",
                      "Use breakpoint() to enter the debugger; the 'global' statement declares module names.",
                      "A pre-programmed value."])


def test_terms_are_quoted_spans_code_and_uncommon_words():
    assert terms("What is the difference between 'nonlocal' and `global` in Python?") == ["nonlocal", "global",
                                                                                          "python"]
    assert terms("How does asyncio.gather use return_exceptions?") == ["asyncio.gather", "return_exceptions"]


@pytest.mark.parametrize("question, absent", [
    ("What does the 'nonlocal' statement do to names?", []),  # everything is in the corpus: answerable
    ("Does math.fmod(a, b) enter breakpoint()?", []),  # code, with other arguments, still found
    ("What does 'abs(x) < math.fmod(x,y)' keep?", ["abs(x) < math.fmod(x,y)"]),  # abs is not in the corpus
    ("How do statements rebind enclosing functions?", []),  # plurals and singulars of corpus words
    ("Is a nonlocal-global statement a debugger?", []),  # a hyphenated compound of corpus words
    ("What does the '+= 1' statement do?", []),  # a quoted span with no word in it is not a term
    ("How does asyncio.gather handle return_exceptions?", ["asyncio.gather", "return_exceptions", "handle"]),
    ("Which debugger commands does pdb accept?", ["commands", "pdb", "accept"]),
    ("How are names declared and rebinding done?", []),  # other forms of "declares", "rebinds": same root
    ("Is a pre-programmed debugger allowed?", ["allowed"]),  # the corpus writes pre-programmed; allow* it lacks
])
def test_a_question_is_unanswerable_by_construction_when_a_term_is_absent(question, absent):
    assert absent_terms(question, CORPUS) == absent


@pytest.mark.parametrize("word, same", [("allowed", "allowance"), ("obtaining", "obtains"), ("adjusting", "adjustments"),
                                        ("approving", "approve"), ("categories", "category")])
def test_words_of_one_root_share_it(word, same):
    from rag.curate.absent import root

    assert root(word) == root(same)
