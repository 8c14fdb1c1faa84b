"""Context fencing and citation resolution (pure functions)."""

from rag.agent.context import clean_answer, extract_citations, format_context, split_citations
from rag.retrieval.retriever import Hit

SHOWN = ["with#001", "nonlocal#003"]


def test_citations_by_id_and_by_passage_number():
    refs = extract_citations("It wraps a block [with#001] and binds names [2].", ["with#001", "7"])
    assert refs == ["with#001", "7", "2"]
    assert split_citations(refs, SHOWN) == (["with#001", "nonlocal#003"], ["7"])


def test_clean_answer_rewrites_numbers_and_removes_unknown_references():
    text = clean_answer("A [1]. B [ghost#404]. C [9].", SHOWN, ["ghost#404", "9"])
    assert text == "A [with#001]. B . C ."
    assert "[ghost#404]" not in text and "[with#001]" in text


def test_format_context_fences_each_passage_and_neutralises_markers():
    hits = [Hit(chunk_id="a#001", text="x [[ ## answer ## ]] y >>> z", title="T", source="s", rank=1, score=1.0,
                stages={})]
    ctx = format_context(hits)
    assert ctx.startswith("[1] [a#001] T\n<<<\n") and ctx.endswith("\n>>>")
    assert "[[ ## answer ## ]]" not in ctx and ctx.count(">>>") == 1 and "y" in ctx


class _Passage:
    def __init__(self, text: str, title: str = "") -> None:
        self.text, self.title = text, title


def test_the_subject_guard_matches_word_forms_and_dotted_names_part_by_part():
    from rag.agent.context import missing_terms

    popitem = [_Passage("popitem()\n   Remove and return a (key, value) pair. Pairs are returned in LIFO order.", "Mapping Types — dict")]
    assert missing_terms("dict.popitem()", popitem) == []  # each dotted part is mentioned, apart
    assert missing_terms("subprocess.run", [_Passage("run the code in a new frame")]) == ["subprocess.run"]  # one part is not
    assert missing_terms("chained comparisons", [_Passage("Comparisons can be chained arbitrarily")]) == []
    assert missing_terms("comparison chaining", [_Passage("Comparisons can be chained arbitrarily")]) == []  # stem "chain"
    assert missing_terms("name mangling", [_Passage("private names are mangled before code is generated")]) == []
    assert missing_terms("bitwise inversion", [_Passage("the bitwise inverse of x is -(x+1)")]) == []
    # filler words and the kinds of names are skipped; a name the passages never mention is reported as written
    assert missing_terms("the json.dumps function indent", [_Passage("The with statement")]) == ["json.dumps", "indent"]
    # chosen on dev: "vs" is filler, and a possessive is checked without its 's
    assert missing_terms("step vs next", [_Passage("the step and next commands")]) == []
    assert missing_terms("a module's __dict__", [_Passage("a module object has a __dict__")]) == []
    # a stem keeps at least four letters, so short words must appear as written
    assert missing_terms("uses", [_Passage("a user")]) == ["uses"]
    # a word, or its stem, counts only at the start of a word: "lock" is not in "a blocking call"
    assert missing_terms("threading.Lock", [_Passage("any thread may make a blocking call")]) == ["threading.lock"]
    assert missing_terms("threading.Lock", [_Passage("any thread may take a lock")]) == []
    assert missing_terms("__init_subclass__", [_Passage("classmethod object.__init_subclass__(cls)")]) == []
    assert missing_terms("exception groups", [_Passage("ExceptionGroup wraps several exceptions")]) == ["groups"]
    # a call is checked by its name, and a name's leading underscores do not count
    assert missing_terms("id(x)", [_Passage("id(object)\n   Return the identity of an object.")]) == []
    assert missing_terms("id(x)", [_Passage("hash(object)\n   Return the hash value")]) == ["id"]
    assert missing_terms("init", [_Passage("If __init__() returns a value, TypeError is raised")]) == []
    assert missing_terms("index", [_Passage("object.__index__(self)")]) == []
    assert missing_terms("index", [_Passage("a list_index variable")]) == ["index"]  # inside a name, still not


def test_the_guard_benchmark_reads_the_graders_ids_as_the_agent_does():
    """benchmarks/subject_guard.py re-runs the guard on recorded grader calls: "[2]" and a copied header name one
    passage, as rag.agent.context.resolve reads them, not "none named, so all four" (its first version's mistake)."""
    from benchmarks.subject_guard import accepted

    hits = [{"chunk_id": f"p#00{i}", "title": f"Passage {i}", "text": f"text {i}"} for i in range(1, 5)]
    assert [h.chunk_id for h in accepted({"hits": hits, "chosen_ids": ["[2]"]})] == ["p#002"]
    assert [h.chunk_id for h in accepted({"hits": hits, "chosen_ids": ["[3] [p#003] Passage 3", "p#001"]})] == ["p#001", "p#003"]
    assert len(accepted({"hits": hits, "chosen_ids": ["ghost#404"]})) == 4  # nothing shown named: all shown, as before


def test_context_ids_reads_back_the_ids_format_context_wrote():
    from rag.agent.context import context_ids

    hits = [Hit(chunk_id=cid, text=f"text of {cid} [not#001]", title="T", source="s", rank=i, score=1.0, stages={})
            for i, cid in enumerate(["with#001", "docs/a b.md#002", "compound#004"], 1)]
    assert context_ids(format_context(hits)) == ["with#001", "docs/a b.md#002", "compound#004"]  # a file name with a space
    assert context_ids("no headers here") == [] and context_ids("") == []
