"""rag golden: a golden set drafted for any index (rag.curate.draft), its checks (rag.report.golden_checks), its review
(rag.curate.review.review_golden) and rag eval --reviewed-only. Real tiny index and retriever; the drafting and the
labelling models are two scripted DummyLMs (keyed by the passage or the question each prompt holds), so which one
answered shows in what was written."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from dspy.utils import DummyLM

from rag.curate.draft import SAME_MODEL, draft_set, dropped_path, read_lines
from rag.curate.plan import parse_types, plan_draft, sample_seeds, spread, type_counts
from rag.curate.review import keep_reviewed, review_golden
from rag.errors import InputError
from rag.eval.golden import load_golden
from rag.eval.overlap import jaccard, near_duplicates
from rag.ingest.chunking import Chunk
from rag.report.golden_checks import check_lines, set_checks
from tests.catalogue_support import check, run_cli

MIX = "answerable=0.5,vague=0.17,unanswerable=0.33"  # 6 items: 3 answerable, 1 vague, 2 unanswerable
QUESTIONS = {
    "with#001": "What does the with statement call before the block runs?",
    "nonlocal#001": "What do names in a nonlocal statement refer to?",
    "lambda#001": "What do lambda expressions create?",
    "len#001": "Which method implements the built-in len()?",
    "yield#001": "Where can yield expressions be used?",
    "evil#001": "What does the injected passage ask the reader to do?",
}
NOT_RELEVANT = {"reason": "does not state it", "relevant": False}


def _header(chunk) -> str:
    return f"[[ ## passage ## ]]\n[{chunk.source} | {chunk.title}]"


def scripted(index, n=6, mix=MIX, seed=0, leave_out=()):
    """(drafting LM, labelling LM, plan): each seed gets a question of its planned type; the judge labels the seed
    relevant for the first answerable item and the first unanswerable one (so that one is dropped), and nothing else."""
    plan = plan_draft(index.chunks, n, parse_types(mix), seed)
    drafts, labels, firsts = {}, {}, set()
    for p in plan:
        if p.seed.id in leave_out:
            continue
        question = QUESTIONS[p.seed.id] if p.type != "unanswerable" else f"How is {p.seed.title} configured on Windows?"
        drafts[_header(p.seed)] = ({"question": question, "missing": "nothing on Windows"} if p.type == "unanswerable"
                                   else {"question": question, "reference_answer": f"As {p.seed.id} says."})
        kind = "unanswerable" if p.type == "unanswerable" else "answered"
        if kind not in firsts:
            firsts.add(kind)
            labels[f"{question}\n\n{_header(p.seed)}"] = {"reason": f"states it ({p.seed.id})", "relevant": True}
    labels["`[[ ## relevant ## ]]`"] = NOT_RELEVANT  # every other (question, passage): not relevant
    return DummyLM(drafts), DummyLM(labels), plan


def run_draft(retriever, out, lms, *, log=None, specs=None, **kw):
    lines = []
    result = draft_set(retriever, out, n=kw.pop("n", 6), mix=parse_types(kw.pop("mix", MIX)), pool=2,
                       lms={"answerer": lms[0], "judge": lms[1]},
                       specs=specs or {"answerer": "drafter-model", "judge": "judge-model"},
                       log=log or lines.append, **kw)
    return result, lines


# ------------------------------------------------------------------ seeds, types, splits
def _corpus():
    """3 documents: a.md with 3 sections of 2 passages, b.md with one section of 4, c.md with 2 sections of 1."""
    shape = {"a.md": {"s1": 2, "s2": 2, "s3": 2}, "b.md": {"s1": 4}, "c.md": {"s1": 1, "s2": 1}}
    return [Chunk(id=f"{doc}#{sec}-{i}", text=f"{doc} {sec} passage {i}", title=sec, source=doc)
            for doc, secs in shape.items() for sec, k in secs.items() for i in range(k)]


def test_seeds_are_stratified_by_document_then_section_and_seeded():
    chunks = _corpus()
    first = sample_seeds(chunks, 3, seed=0)
    assert {c.source for c in first} == {"a.md", "b.md", "c.md"}  # every document before any gives a second seed
    everything = sample_seeds(chunks, len(chunks), seed=0)
    assert sorted(c.id for c in everything) == sorted(c.id for c in chunks)  # each passage once
    a_seeds = [c.title for c in everything if c.source == "a.md"]
    assert sorted(a_seeds[:3]) == ["s1", "s2", "s3"]  # within a document, every section before a second passage
    assert [c.id for c in sample_seeds(chunks, 12, seed=0)] == [c.id for c in everything]  # same seed, same seeds
    assert any([c.id for c in sample_seeds(chunks, 12, seed=s)] != [c.id for c in everything] for s in range(1, 6))


def test_type_mix_counts_and_splits():
    assert type_counts(6, parse_types(MIX)) == {"answerable": 3, "vague": 1, "unanswerable": 2}
    assert type_counts(60, parse_types(None)) == {"answerable": 36, "vague": 9, "unanswerable": 15}
    dealt = spread({"answerable": 3, "vague": 1, "unanswerable": 2})
    assert Counter(dealt) == {"answerable": 3, "vague": 1, "unanswerable": 2} and dealt[0] == "answerable"
    halves = plan_draft(_corpus(), 12, parse_types("answerable=1,unanswerable=1"), seed=0)
    per_doc = Counter((p.seed.source, p.type) for p in halves)  # every document gets its share of each type
    assert per_doc == {("a.md", "answerable"): 3, ("a.md", "unanswerable"): 3, ("b.md", "answerable"): 2,
                       ("b.md", "unanswerable"): 2, ("c.md", "answerable"): 1, ("c.md", "unanswerable"): 1}
    plan = plan_draft(_corpus(), 10, parse_types("answerable=1"), seed=0)
    assert Counter(p.split for p in plan) == {"train": 4, "dev": 2, "test": 4}  # 40/20/40
    assert len({p.seed.id for p in plan}) == 10 and [p.id for p in plan][:2] == ["draft-a-001", "draft-a-002"]


@pytest.mark.parametrize("spec, says", [
    ("answerable=0.5,bogus=0.5", r"--types: unknown type 'bogus'; the types are answerable, vague, unanswerable"),
    ("answerable=lots", r"--types: 'answerable=lots' gives no number"),
    ("answerable=-1", r"--types: 'answerable=-1' must be a number >= 0"),
    ("answerable=0,vague=0", r"--types gives no type a share above 0"),
])
def test_bad_type_mix_is_one_line_naming_the_option(spec, says):
    with pytest.raises(InputError, match=says):
        parse_types(spec)


def test_an_empty_index_or_too_many_items_is_refused_with_the_fix():
    with pytest.raises(InputError, match=r"the index holds no passages.*rag index DOCS --index-dir DIR"):
        plan_draft([Chunk(id="blank", text="   ")], 1, parse_types(None))
    with pytest.raises(InputError, match=r"--n 13 is more than this index allows.*holds 12 .*; give --n 12 or fewer"):
        plan_draft(_corpus(), 13, parse_types(None))


def test_cli_bad_input_is_one_error_line(tmp_path, tiny_index, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "mine.jsonl"
    base = ("golden", "draft", "--out", out, "--index-dir", tiny_index.dir)
    check(run_cli(*base, "--types", "answerable=1,trick=1"), 1, r"^Error: --types: unknown type 'trick'")
    check(run_cli(*base, "--n", "99"), 1, r"^Error: --n 99 is more than this index allows.*give --n 6 or fewer")
    check(run_cli(*base, "--pool", "0"), 1, r"^Error: --pool must be >= 1")
    assert not out.exists()


# ------------------------------------------------------------------ drafting, pooled labels, drops
def test_draft_labels_with_the_judge_and_drops_answered_unanswerables(tmp_path, tiny_retriever):
    out = tmp_path / "mine.jsonl"
    draft_lm, judge_lm, plan = scripted(tiny_retriever.index)
    result, log = run_draft(tiny_retriever, out, (draft_lm, judge_lm))
    assert SAME_MODEL not in log and not result.skipped
    items = {it.id: it for it in load_golden(out)}  # the file is a valid golden set
    assert Counter(it.type for it in items.values()) == {"answerable": 3, "vague": 1, "unanswerable": 1}
    first_a = next(p for p in plan if p.type != "unanswerable")
    first_u, second_u = [p for p in plan if p.type == "unanswerable"]
    # gold comes from the judge's labels; the seed stays gold where the judge said no, flagged for review
    for p in plan:
        if p.type == "unanswerable":
            continue
        it = items[p.id]
        assert it.relevant_chunk_ids == [p.seed.id], p.id
        assert ("seed_gold" in it.meta) == (p is not first_a), p.id
        assert it.question == QUESTIONS[p.seed.id] and it.reference_answer == f"As {p.seed.id} says."
        assert it.meta["seed_chunk_id"] == p.seed.id and it.split == p.split and not it.should_refuse
        assert it.meta["drafted_by"] == "drafter-model" and it.meta["labelled_by"] == "judge-model"
        assert it.meta["prompt_version"].startswith("golden-draft/1-")
        pool = {lab["chunk_id"]: lab for lab in it.meta["pool"]}
        assert "seed" in pool[p.seed.id]["found_by"] and 1 < len(pool) <= 5  # top 2 dense + top 2 BM25 + the seed
        assert all(lab["found_by"] for lab in pool.values())
    # the unanswerable draft a pooled passage answers is dropped, with the judge's reason; the other is kept
    assert first_u.id not in items and items[second_u.id].should_refuse and items[second_u.id].relevant_chunk_ids == []
    dropped = read_lines(dropped_path(out))
    assert [d["id"] for d in dropped] == [first_u.id]
    assert f"{first_u.seed.id}: states it ({first_u.seed.id})" in dropped[0]["dropped"]
    # the checks
    checks = set_checks(list(items.values()), dropped, tiny_retriever.index.chunks)
    lines = "\n".join(check_lines(checks))
    assert "items: 5" in lines and "documents covered: 1 of 1 in the index; sections covered: 5 of 6" in lines
    assert "items without gold: 0" in lines and first_a.id not in checks["seed_gold"]
    assert "items whose only gold is their seed, which the labelling model did not label relevant: 3 (" in lines
    assert f"dropped: 1\n  {first_u.id} (" in lines and "near-duplicates: 0" in lines


def test_one_model_for_both_roles_is_said_and_an_unparsable_reply_skips_its_seed(tmp_path, tiny_retriever):
    plan = plan_draft(tiny_retriever.index.chunks, 6, parse_types(MIX), 0)
    lost = plan[1].seed.id
    draft_lm, judge_lm, _ = scripted(tiny_retriever.index, leave_out=(lost,))  # no reply scripted for this seed
    result, log = run_draft(tiny_retriever, tmp_path / "one.jsonl", (draft_lm, judge_lm),
                            specs={"answerer": "embedded", "judge": "embedded"})
    assert SAME_MODEL in log
    assert [i for i, _ in result.skipped] == [plan[1].id]
    assert any(line.startswith(f"warning: skipped {plan[1].id} (seed {lost})") for line in log)
    assert len(result.kept) + len(result.dropped) == 5


def test_an_interrupted_draft_resumes_where_it_stopped(tmp_path, tiny_retriever):
    out = tmp_path / "mine.jsonl"
    lms = scripted(tiny_retriever.index)[:2]
    written = []

    def stop_after_two(line):
        if line.startswith("["):
            written.append(line)
            if len(written) == 2:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_draft(tiny_retriever, out, lms, log=stop_after_two)
    before = len(read_lines(out)) + len(read_lines(dropped_path(out)))
    assert before == 2
    with out.open("a", encoding="utf-8") as fh:
        fh.write('{"id": "draft-a-0')  # a line cut short by the interruption
    with pytest.raises(InputError, match=r"drafted with other options.*same --n/--types/--seed/--pool"):
        run_draft(tiny_retriever, out, lms, seed=1)
    result, _ = run_draft(tiny_retriever, out, scripted(tiny_retriever.index)[:2])
    assert result.resumed == 2 and len(result.kept) + len(result.dropped) == 4
    ids = [it.id for it in load_golden(out)] + [d["id"] for d in read_lines(dropped_path(out))]
    assert sorted(ids) == sorted(p.id for p in plan_draft(tiny_retriever.index.chunks, 6, parse_types(MIX), 0))
    again, _ = run_draft(tiny_retriever, out, scripted(tiny_retriever.index)[:2])
    assert again.resumed == 6 and not again.kept and again.calls == 0


def test_a_file_not_drafted_here_is_never_appended_to(tmp_path, tiny_retriever):
    out = tmp_path / "hand.jsonl"
    out.write_text(json.dumps({"id": "h1", "type": "answerable", "question": "q?", "reference_answer": "a"}) + "\n")
    with pytest.raises(InputError, match="holds lines that rag golden draft did not write; give --out a new file"):
        run_draft(tiny_retriever, out, scripted(tiny_retriever.index)[:2])


def test_cli_draft_then_check(tmp_path, tiny_index, monkeypatch):
    monkeypatch.chdir(tmp_path)
    draft_lm, judge_lm, _ = scripted(tiny_index)
    monkeypatch.setattr("rag.lm.configure.configure_dspy", lambda settings: None)  # keep DSPy's ChatAdapter
    monkeypatch.setattr("rag.lm.configure.lms_for_roles", lambda settings: {"answerer": draft_lm, "judge": judge_lm})
    out = tmp_path / "mine.jsonl"
    res = run_cli("golden", "draft", "--out", out, "--index-dir", tiny_index.dir, "--n", "6", "--types", MIX,
                  "--pool", "2")
    assert res.code == 0 and "Traceback" not in res.err, res.err
    assert SAME_MODEL in res.err and "5 kept and 1 dropped now, 0 done before, 0 skipped" in res.err
    assert {r["drafted_by"] for r in read_lines(out)} == {"dummy"}  # each LM named by its model, as traces name it
    assert res.out.startswith("items: 5\n") and "dropped: 1\n" in res.out and "documents covered: 1 of 1" in res.out
    checked = run_cli("golden", "check", out)  # the index is found from the items
    assert checked.code == 0 and checked.out == res.out


@pytest.mark.slow
def test_cli_drafts_on_the_embedded_model_end_to_end(tmp_path, tiny_index, monkeypatch):
    """The real path: the embedded llama.cpp model (the small one, for speed) drafts and labels two items over a
    real index. What it writes is scored by the schema, not by its wording (a 135M model writes poor questions)."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "drafted.jsonl"
    res = run_cli("golden", "draft", "--out", out, "--index-dir", tiny_index.dir, "--n", "2", "--types",
                  "answerable=0.5,unanswerable=0.5", "--pool", "2", "--set", "embedded_model=smollm2-135m",
                  "--set", "cache=false")
    assert res.code == 0 and "Traceback" not in res.err, res.err
    assert SAME_MODEL in res.err  # one model configured: said so
    records = read_lines(out) + read_lines(dropped_path(out))
    assert len(records) == 2 and {r["type"] for r in records} == {"answerable", "unanswerable"}, res.err
    ids = {c.id for c in tiny_index.chunks}
    for rec in records:
        assert rec["drafted_by"] == rec["labelled_by"] == "embedded/smollm2-135m"
        assert rec["prompt_version"].startswith("golden-draft/") and rec["seed_chunk_id"] in ids
        assert rec["question"].strip() and all(p["chunk_id"] in ids and "relevant" in p for p in rec["pool"])
        # labelled, unless an unanswerable draft named only what the corpus holds (dropped before labelling)
        assert rec["pool"] or rec.get("dropped", "").startswith("every term it asks about is in the documents")
    for item in load_golden(out):  # what was kept loads as a golden set
        assert item.split in ("train", "dev", "test")
    checked = run_cli("golden", "check", out)
    assert checked.code == 0 and checked.out.startswith(f"items: {len(read_lines(out))}\n"), checked.err


# ------------------------------------------------------------------ near-duplicates
def test_near_duplicates_by_seed_or_word_overlap():
    assert jaccard("What does the with statement do?", "what does the WITH statement do") == 1.0
    others = [(s, f"What is the purpose of the '{s}' statement in Python?", None) for s in ("global", "break", "del")]
    pairs = near_duplicates(others + [("a", "What does the with statement do?", "s1"),
                                      ("b", "what does the WITH statement do, in Python?", None),
                                      ("c", "How do lambdas work?", "s1"), ("d", "Something else entirely", "s2"),
                                      ("e", "Why does Python have a with statement?", None)])
    assert [(a, b) for a, b, _ in pairs] == [("a", "b"), ("a", "c")]
    assert pairs[0][2].startswith("question word overlap 0.") and pairs[1][2] == "same seed passage s1"


def test_template_questions_about_different_subjects_are_not_near_duplicates():
    """A drafted set repeats templates; the one word that differs (the subject) is rare in the set and outweighs the
    template's common words, so only a real rewording is flagged."""
    template = "What is the purpose of the '{}' statement in Python?"
    items = [(s, template.format(s), None) for s in ("global", "break", "assert", "raise", "with", "del")]
    assert jaccard(items[0][1], items[1][1]) == 0.8  # what plain word overlap would flag
    assert near_duplicates(items) == []
    pairs = near_duplicates(items + [("again", "what is the purpose of the GLOBAL statement in python", None)])
    assert [(a, b) for a, b, _ in pairs] == [("global", "again")]


# ------------------------------------------------------------------ review
ITEMS = [
    {"id": "d1", "type": "answerable", "question": "What does with call first?", "reference_answer": "__enter__.",
     "relevant_chunk_ids": ["with#001"], "seed_chunk_id": "with#001", "split": "test"},
    {"id": "d2", "type": "vague", "question": "how do i make a tiny function", "reference_answer": "A lambda.",
     "relevant_chunk_ids": ["lambda#001"], "seed_chunk_id": "lambda#001", "split": "test"},
    {"id": "d3", "type": "unanswerable", "question": "How is yield configured on Windows?",
     "reference_answer": "Not covered.", "should_refuse": True, "seed_chunk_id": "yield#001", "split": "test"},
]



def script_agent(monkeypatch) -> None:
    """Every role of the agent on one scripted model that answers the items about the with statement (#with#001)."""
    from rag.lm.adapter import SieveAdapter

    replies = {"- relevant_chunk_ids (": {"subject": "with", "relevant_chunk_ids": ["with#001"], "relevant": True,
                                          "reason": "it says so"},
               "- query (": {"query": "with statement"},
               "- cited_ids (": {"cited_ids": ["with#001"], "answer": "__enter__ [with#001]."},
               "- faithful (": {"correct": True, "faithful": True, "reason": "matches"}}
    lm = DummyLM(replies, adapter=SieveAdapter())
    monkeypatch.setattr("rag.lm.configure.lms_for_roles", lambda settings: dict.fromkeys(
        ("grader", "rewriter", "answerer", "judge"), lm))

def _golden(path, items=ITEMS):
    path.write_text("".join(json.dumps(it) + "\n" for it in items), encoding="utf-8")
    return path


def _replies(*answers):
    queue = list(answers)

    def ask(prompt):
        if not queue:
            raise AssertionError(f"asked more than scripted: {prompt}")
        reply = queue.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply
    return ask, queue


def test_review_is_written_as_it_goes_and_resumes(tmp_path, tiny_index):
    path = _golden(tmp_path / "mine.jsonl")
    texts = {c.id: c for c in tiny_index.chunks}
    shown = []
    ask, left = _replies("x", "a",  # a bad reply is asked again, then accept
                         "e", "How do I write a tiny anonymous function?", "",  # edit the question, keep the reference
                         "s")  # skip d3
    done = review_golden(path, ask=ask, show=shown.append,
                         passages=lambda ids: [(i, texts[i].title, texts[i].text) for i in ids if i in texts])
    assert done == {"accept": 1, "edit": 1, "skip": 1} and not left
    assert "reply a, e, r, s or q" in shown
    assert any("Lambda expressions (sometimes called lambda forms)" in s and "[lambda#001 (seed)]" in s for s in shown)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r.get("review") for r in rows] == ["accept", "edit", None]
    assert rows[0]["reviewed_by"] == "human" and "reviewed_by" not in rows[2]
    assert rows[1]["question"] == "How do I write a tiny anonymous function?"
    assert rows[1]["edited_from"] == {"question": "how do i make a tiny function", "reference_answer": "A lambda."}
    assert rows[1]["reference_answer"] == "A lambda."
    # the next session starts at the first item still unreviewed; Ctrl-C there loses nothing decided
    ask, _ = _replies(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        review_golden(path, ask=ask, show=lambda _t: None)
    ask, _ = _replies("r")
    assert review_golden(path, ask=ask, show=lambda _t: None) == {"reject": 1}
    assert review_golden(path, ask=_replies()[0], show=lambda _t: None) == {}  # nothing left to ask
    items = load_golden(path)
    assert [it.meta["review"] for it in items] == ["accept", "edit", "reject"]
    assert [it.id for it in keep_reviewed(items)] == ["d1", "d2"]


def test_review_quits_on_q_or_on_replies_that_never_make_sense(tmp_path):
    path = _golden(tmp_path / "mine.jsonl")
    ask, _ = _replies("a", "q")
    assert review_golden(path, ask=ask, show=lambda _t: None) == {"accept": 1}
    ask, left = _replies("what", "?", "no")
    assert review_golden(path, ask=ask, show=lambda _t: None, max_tries=3) == {} and not left
    assert [json.loads(line).get("review") for line in path.read_text().splitlines()] == ["accept", None, None]


def test_cli_review_prompts_and_saves(tmp_path, monkeypatch):
    import typer

    path = _golden(tmp_path / "mine.jsonl")
    ask, _ = _replies("a", "r", "a")
    monkeypatch.setattr(typer, "prompt", lambda text, **kw: ask(text))
    res = run_cli("golden", "review", path)
    assert res.code == 0, res.err
    assert "decisions: accept 2, reject 1" in res.out and "passages with#001" in res.out  # no index: ids only
    assert [it.meta["review"] for it in load_golden(path)] == ["accept", "reject", "accept"]


# ------------------------------------------------------------------ rag eval --reviewed-only
def test_eval_reviewed_only_scores_the_accepted_and_edited_items(tmp_path, tiny_index, monkeypatch):
    monkeypatch.chdir(tmp_path)
    reviewed = [{**ITEMS[0], "review": "accept", "reviewed_by": "human"},
                {**ITEMS[1], "review": "reject", "reviewed_by": "human"}, ITEMS[2]]
    path = _golden(tmp_path / "mine.jsonl", reviewed)
    res = run_cli("eval", "--retrieval-only", "--golden", path, "--index-dir", tiny_index.dir, "--reviewed-only", "--json")
    assert res.code == 0, res.err
    assert json.loads(res.out)["items"] == 1
    assert json.loads(run_cli("eval", "--retrieval-only", "--golden", path, "--index-dir", tiny_index.dir,
                              "--json").out)["items"] == 3
    none = _golden(tmp_path / "none.jsonl")
    check(run_cli("eval", "--retrieval-only", "--golden", none, "--index-dir", tiny_index.dir, "--reviewed-only"), 1,
          r"^Error: .*none\.jsonl has no item reviewed as accept or edit; review it first: rag golden review")


def test_agent_eval_reviewed_only_runs_the_reviewed_items(tmp_path, tiny_index, monkeypatch):
    from rag.cli.cmd_eval import run_agent_eval_cli

    monkeypatch.chdir(tmp_path)
    script_agent(monkeypatch)
    path = _golden(tmp_path / "mine.jsonl", [{**ITEMS[0], "review": "edit", "reviewed_by": "human"}, *ITEMS[1:]])
    sets = [f"index_dir={tiny_index.dir}", f"artifacts_dir={tmp_path / 'arts'}"]
    code = run_agent_eval_cli("baseline", split="all", golden=path, set_pairs=sets, show_progress=False,
                              reviewed_only=True, out=tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert code == 0 and summary["n_selected"] == 1 and summary["ids"] == ["d1"]


def _slot_script(index, kind, drafts):
    """A one-slot plan of type ``kind``, and a drafting LM that writes ``drafts[k]`` (a question, or (question,
    reference answer)) from the k-th passage tried."""
    (p,) = plan_draft(index.chunks, 1, parse_types(f"{kind}=1"), 0)
    same = [c for c in index.chunks if c.source == p.seed.source and c.text.strip()]
    at = [c.id for c in same].index(p.seed.id)
    tried = [same[(at + k) % len(same)] for k in range(len(drafts))]
    replies = {}
    for c, d in zip(tried, drafts):
        q, ref = d if isinstance(d, tuple) else (d, "")
        replies[_header(c)] = {"question": q, "missing": "not said"} if kind == "unanswerable" else \
            {"question": q, "reference_answer": ref}
    return p, tried, DummyLM(replies)


def _unanswerable_script(index, questions):
    return _slot_script(index, "unanswerable", questions)


def test_an_unanswerable_draft_must_name_something_the_corpus_never_mentions(tmp_path, tiny_retriever):
    """The 1.5B's "unanswerable" drafts asked about what the corpus covers; a draft whose every term the corpus holds
    is drafted again from the next passage of its document, DRAFT_TRIES times, then dropped unlabelled."""
    from rag.curate.absent import COMMON
    from rag.curate.draft import DRAFT_TRIES

    index = tiny_retriever.index
    own = [w for w in index.chunks[0].text.lower().split() if w.isalpha() and len(w) > 3 and w not in COMMON][:2]
    covered = f"What about '{own[0]}' and '{own[1]}'?"  # every term of it is in the corpus
    p, tried, lm = _unanswerable_script(index, [covered, "How is nonlocal configured on Windows?"])
    result, _ = run_draft(tiny_retriever, tmp_path / "kept.jsonl", (lm, DummyLM([NOT_RELEVANT] * 10)), n=1,
                          mix="unanswerable=1")
    (kept,) = result.kept
    assert kept["seed_chunk_id"] == tried[1].id and kept["question"].endswith("on Windows?")
    assert set(kept["absent_terms"]) == {"configured", "windows"} and kept["pool"]
    p, tried, lm = _unanswerable_script(index, [covered] * DRAFT_TRIES)
    no_labels = DummyLM([])  # a labelling call would fail: a dropped draft spends none
    result, log = run_draft(tiny_retriever, tmp_path / "dropped.jsonl", (lm, no_labels), n=1, mix="unanswerable=1")
    (dropped,) = result.dropped
    assert not result.kept and dropped["pool"] == []
    assert dropped["dropped"].startswith(f"every term it asks about is in the documents, in {DRAFT_TRIES} draft(s)")
    assert read_lines(dropped_path(tmp_path / "dropped.jsonl"))[0]["id"] == p.id


def test_a_garbled_or_pointing_draft_is_drafted_again(tmp_path, tiny_retriever):
    """The embedded Qwen drifts into Chinese mid-answer ("... implicit访问") and asks about "the passage": such a
    draft is drafted again from the next passage of its document, DRAFT_TRIES times at most, then dropped unlabelled
    with why."""
    from rag.curate.draft import DRAFT_TRIES

    index = tiny_retriever.index
    garbled = ("What does a with statement call?", "It calls __enter__ 访问 first.")
    p, tried, lm = _slot_script(index, "answerable", [garbled, ("What does a with statement call?", "__enter__.")])
    result, _ = run_draft(tiny_retriever, tmp_path / "kept.jsonl", (lm, DummyLM([NOT_RELEVANT] * 10)), n=1,
                          mix="answerable=1")
    (kept,) = result.kept
    assert kept["seed_chunk_id"] == tried[1].id and kept["reference_answer"] == "__enter__."
    assert kept["relevant_chunk_ids"][0] == tried[1].id  # the passage it was drafted from is its seed and gold
    assert kept["redrafted"] == [{"question": garbled[0],
                                  "why": "letters of the CJK script, which its passage has none of"}]
    p, tried, lm = _slot_script(index, "vague", [garbled] * DRAFT_TRIES)
    result, _ = run_draft(tiny_retriever, tmp_path / "dropped.jsonl", (lm, DummyLM([])), n=1, mix="vague=1")
    (dropped,) = result.dropped
    assert not result.kept and dropped["pool"] == [] and dropped["reference_answer"] == garbled[1]
    assert dropped["dropped"].startswith(f"no draft passed the checks, in {DRAFT_TRIES} draft(s)")
    assert "letters of the CJK script, which its passage has none of" in dropped["dropped"]
    pointing = ("What types of statement are mentioned in the passage?", "with and nonlocal.")
    p, tried, lm = _slot_script(index, "answerable", [pointing, ("What does nonlocal do?", "It rebinds.")])
    result, _ = run_draft(tiny_retriever, tmp_path / "pointing.jsonl", (lm, DummyLM([NOT_RELEVANT] * 10)), n=1,
                          mix="answerable=1")
    assert [r["question"] for r in result.kept] == ["What does nonlocal do?"]  # drafted again: self-contained


def test_a_contents_page_seeds_nothing():
    """A passage listing numbered headings states no fact; drafted from, it gets an invented answer. It is no seed,
    and the count an index allows leaves it out."""
    contents = Chunk(id="a.md#toc", text="## Table of Contents 1. Purpose 2. Scope 3. Paid Time Off 4. Sick Leave",
                     title="Table of Contents", source="a.md")
    chunks = [contents, *_corpus()]
    assert contents.id not in {c.id for c in sample_seeds(chunks, len(chunks), seed=0)}
    with pytest.raises(InputError, match=r"holds 12 that state something \(not empty, not a contents page\)"):
        plan_draft(chunks, 13, parse_types(None))


def test_a_slot_drafting_again_passes_over_other_slots_seeds(tmp_path, tiny_retriever):
    """Drafting again from "the next passage" must not land on a passage another slot drafts from: the same passage
    would give that slot's question twice (a duplicate pair in the set)."""
    index = tiny_retriever.index
    plan = plan_draft(index.chunks, 3, parse_types("answerable=1"), 0)
    garbled = {plan[0].seed.id, plan[2].seed.id}  # two slots draft again, whose next free passage is the same
    replies = {_header(c): {"question": f"What does {c.id} say?",
                            "reference_answer": "它说" if c.id in garbled else f"What {c.id} says."}
               for c in index.chunks if c.text.strip()}
    result, _ = run_draft(tiny_retriever, tmp_path / "mine.jsonl", (DummyLM(replies), DummyLM([NOT_RELEVANT] * 30)),
                          n=3, mix="answerable=1")
    seeds = [r["seed_chunk_id"] for r in result.kept]
    assert len(result.kept) == 3 and len(set(seeds)) == 3  # no passage drafted from twice
    retried = [r["seed_chunk_id"] for r in result.kept if r["id"] in (plan[0].id, plan[2].id)]
    assert not set(retried) & {p.seed.id for p in plan}
