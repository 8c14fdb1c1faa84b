"""rag compile end to end with a scripted DummyLM over the tiny real index; artifacts and their bad cases."""

from __future__ import annotations

import json

import dspy
import pytest
from dspy.utils import DummyLM

from optimize.compile import compile_program, parse_roles
from rag.agent import artifacts
from rag.agent.module import Sieve
from rag.config import load_settings
from rag.errors import ArtifactError, ConfigError, InputError

ITEMS = [
    ("a1", "answerable", "What does the with statement wrap?", "A block, with a context manager's methods.",
     ["wrap the execution of a block"], "train"),
    ("a2", "answerable", "What does nonlocal refer to?", "Variables in the nearest enclosing scope.",
     ["nearest enclosing scope excluding globals"], "train"),
    ("a3", "answerable", "What do lambda expressions create?", "Anonymous functions.",
     ["used to create anonymous functions"], "dev"),
    ("a4", "answerable", "Which method implements len()?", "object.__len__.",
     ["is called to implement the built-in function"], "test"),
    ("u1", "unanswerable", "What does numpy.einsum compute?", "Not covered.", [], "train"),
    ("u2", "unanswerable", "How do I set a timeout in requests.get?", "Not covered.", [], "dev"),
    ("u3", "unanswerable", "When was CPython 3.13 released?", "Not covered.", [], "test"),
]

# One scripted reply per role, picked by the output fields the prompt asks for.
REPLIES = {
    "`[[ ## relevant_chunk_ids ## ]]`": {"reason": "it says so", "relevant": True, "relevant_chunk_ids": ["with#001"]},
    "`[[ ## query ## ]]`": {"query": "with statement context manager"},
    "`[[ ## cited_ids ## ]]`": {"answer": "A block [with#001].", "cited_ids": ["with#001"]},
    "`[[ ## faithful ## ]]`": {"reason": "matches", "correct": True, "faithful": True},
}


def write_golden(path, items=ITEMS):
    with open(path, "w", encoding="utf-8") as f:
        for id_, type_, q, ref, evidence, split in items:
            f.write(json.dumps({"id": id_, "type": type_, "question": q, "reference_answer": ref,
                                "should_refuse": type_ == "unanswerable", "evidence": evidence,
                                "split": split}) + "\n")
    return path


@pytest.fixture
def setup(tmp_path, tiny_index, monkeypatch):
    monkeypatch.setenv("SIEVE_HOME", str(tmp_path / "home"))  # checkpoints of one test never leak into another
    settings = load_settings({"index_dir": tiny_index.dir, "artifacts_dir": tmp_path / "artifacts", "top_k": 3})
    lm = DummyLM(REPLIES)
    return settings, write_golden(tmp_path / "golden.jsonl"), {r: lm for r in ("grader", "rewriter", "answerer", "judge")}


def test_compile_writes_an_artifact_that_loads_back_and_behaves_the_same(setup):
    settings, golden, lms = setup
    result = compile_program(settings, golden=golden, optimizer="bootstrap", roles=["grader", "rewriter", "answerer"],
                             out="tiny", lms=lms, show_progress=False)
    art = result.artifact
    assert art is not None and art.program_path.is_file() and art.name == "tiny"
    m = art.manifest
    assert m["format"] == "sieve-artifact/1" and m["dspy_version"] == dspy.__version__
    assert set(m["scores"]) == {"grader", "rewriter", "answerer"}
    assert {"dev_before", "dev_after", "test_before", "test_after"} <= set(m["scores"]["grader"])
    assert m["golden"]["sizes"]["grader"] == {"train": 3, "dev": 2, "test": 2}
    assert m["spend"]["lm_calls"] > 0
    state = json.loads(art.program_path.read_text())
    assert state["grade"]["demos"], "bootstrap should have kept passing grader demos"

    from rag.retrieval.retriever import Retriever

    retriever = Retriever.from_settings(settings)
    fresh, loaded = Sieve(retriever, top_k=3), Sieve(retriever, top_k=3)
    artifacts.apply(loaded, artifacts.load(art.path))
    assert len(loaded.grade.demos) == len(json.loads(art.program_path.read_text())["grade"]["demos"]) > 0
    assert len(fresh.grade.demos) == 0
    again = Sieve(retriever, top_k=3)
    again.load(str(art.program_path))

    def grader_prompt(agent: Sieve) -> str:  # what the grader is sent for a test question
        from dspy.clients.base_lm import GLOBAL_HISTORY  # the agent calls a private copy of the LM (rag.usage.metering)

        with dspy.context(lm=DummyLM(REPLIES)):
            agent(question="Which method implements len()?")
        return next(str(e["messages"]) for e in reversed(GLOBAL_HISTORY) if "relevant_chunk_ids" in str(e["messages"]))

    # the scripted LM ignores demos, so compare what is SENT: the compiled demos reach the model after a load
    demo_question = state["grade"]["demos"][0]["question"]
    assert demo_question != "Which method implements len()?"
    assert demo_question in grader_prompt(loaded) and demo_question not in grader_prompt(fresh)
    assert grader_prompt(again) == grader_prompt(loaded)


def test_rerun_reuses_finished_roles(setup, capsys):
    settings, golden, lms = setup
    compile_program(settings, golden=golden, roles=["grader"], out="one", lms=lms, show_progress=False)
    capsys.readouterr()
    compile_program(settings, golden=golden, roles=["grader"], out="two", lms=lms, show_progress=False)
    assert "reusing finished work" in capsys.readouterr().err


def test_dry_run_plans_without_calling_any_model(setup):
    settings, golden, _ = setup
    result = compile_program(settings, golden=golden, roles=["grader", "answerer"], dry_run=True, lms={})
    assert result.artifact is None
    assert result.plan.calls["grader"] == 3 + 2 * (2 + 2)  # bootstrap: train; scoring: dev+test, before+after
    assert "LM calls" in result.plan.render()


def test_budget_trims_the_plan_to_fit(setup):
    settings, golden, _ = setup
    result = compile_program(settings, golden=golden, roles=["grader"], dry_run=True, budget=9, lms={})
    assert sum(result.plan.calls.values()) <= 9
    with pytest.raises(ConfigError, match="too small"):
        compile_program(settings, golden=golden, roles=["grader"], dry_run=True, budget=2, lms={})


def test_empty_split_is_a_clear_error(setup, tmp_path):
    settings, _, lms = setup
    golden = write_golden(tmp_path / "nodev.jsonl", [i for i in ITEMS if i[5] != "dev"])
    with pytest.raises(InputError, match="no 'dev' examples"):
        compile_program(settings, golden=golden, roles=["grader"], dry_run=True, lms={})


def test_golden_set_with_one_type_is_a_clear_error(setup, tmp_path):
    settings, _, _ = setup
    golden = write_golden(tmp_path / "onetype.jsonl", [i for i in ITEMS if i[1] == "unanswerable"])
    with pytest.raises(InputError, match="both relevant and not-relevant"):
        compile_program(settings, golden=golden, roles=["grader"], dry_run=True, lms={})


def test_unknown_roles_and_optimizers_list_allowed_values(setup):
    settings, golden, _ = setup
    with pytest.raises(ConfigError, match="allowed: grader, rewriter, answerer, judge"):
        parse_roles("grader,critic")
    with pytest.raises(ConfigError, match="bootstrap, random-search, mipro, gepa"):
        compile_program(settings, golden=golden, optimizer="adam", roles=["grader"], dry_run=True, lms={})


def _artifact(tmp_path, tiny_retriever, **manifest):
    return artifacts.save(Sieve(tiny_retriever), tmp_path / "arts" / "a", {"models": {"grader": "embedded"}, **manifest})


def test_corrupt_program_json_is_a_clear_error(tmp_path, tiny_retriever):
    art = _artifact(tmp_path, tiny_retriever)
    art.program_path.write_text("{not json")
    with pytest.raises(ArtifactError, match="program.json: not valid JSON"):
        artifacts.load(art.path)


def test_foreign_program_json_is_a_clear_error(tmp_path, tiny_retriever):
    art = _artifact(tmp_path, tiny_retriever)
    art.program_path.write_text(json.dumps({"classifier": {"demos": [], "signature": {}}}))
    with pytest.raises(ArtifactError, match="does not match Sieve's predictors"):
        artifacts.apply(Sieve(tiny_retriever), artifacts.load(art.path))


def test_artifact_from_another_dspy_version_is_refused(tmp_path, tiny_retriever):
    art = _artifact(tmp_path, tiny_retriever)
    manifest = json.loads((art.path / "manifest.json").read_text())
    manifest["dspy_version"] = "2.6.0"
    (art.path / "manifest.json").write_text(json.dumps(manifest))
    models = {"grader": "embedded"}
    with pytest.raises(ArtifactError, match="compiled with DSPy 2.6.0"):
        artifacts.select(tmp_path / "arts", models, name="a")
    chosen, messages = artifacts.select(tmp_path / "arts", models)
    assert chosen is None and "DSPy 2.6.0" in messages[0]


def test_model_mismatch_is_never_a_silent_wrong_program(tmp_path, tiny_retriever):
    _artifact(tmp_path, tiny_retriever)
    chosen, messages = artifacts.select(tmp_path / "arts", {"grader": "groq/openai/gpt-oss-20b"})
    assert chosen is None and "other models" in messages[0]


def _scored(before, after, test_before=(0.5,), test_after=(0.5,)):
    """Manifest scores of one role, per example as rag compile keeps them (means beside)."""
    return {"dev_before": sum(before) / len(before), "dev_after": sum(after) / len(after),
            "test_before": sum(test_before) / len(test_before), "test_after": sum(test_after) / len(test_after),
            "per_example": {"dev": {"before": list(before), "after": list(after)},
                            "test": {"before": list(test_before), "after": list(test_after)}}}


def test_artifacts_are_selected_on_dev_when_the_gain_clears_noise(tmp_path, tiny_retriever):
    models = {"grader": "embedded"}
    # six dev examples that all improve: sign-flip p = 2/64 = 0.031 -> selected, though test got WORSE (never used)
    _artifact(tmp_path, tiny_retriever, scores={"grader": _scored([0.2] * 6, [0.8] * 6, [0.9] * 8, [0.1] * 8)})
    chosen, messages = artifacts.select(tmp_path / "arts", models)
    assert chosen is not None and chosen.name == "a" and messages == []
    assert chosen.dev_verdict() == (True, "its dev gain clears noise (grader +0.600 (p=0.031, n=6))")
    assert chosen.test_gain() < 0  # reported by rag artifacts, not a reason to skip


def test_data_route_demos_are_chosen_only_for_the_index_they_were_compiled_on(tmp_path, tiny_retriever):
    """Router and SQL demos name one index's tables and columns: on another index such an artifact is passed
    over, however well it did on dev; an artifact that also holds other roles is chosen as before."""
    models = {"grader": "embedded"}
    gain = _scored([0.2] * 6, [0.8] * 6)
    _artifact(tmp_path, tiny_retriever, scores={"router": gain, "sql": gain}, index_fingerprint="ops")
    assert artifacts.select(tmp_path / "arts", models, fingerprint="ops")[0].name == "a"
    assert artifacts.select(tmp_path / "arts", models, fingerprint="builtin") == (None, [])
    _artifact(tmp_path, tiny_retriever, scores={"router": gain, "grader": gain}, index_fingerprint="ops")
    chosen, messages = artifacts.select(tmp_path / "arts", models, fingerprint="builtin")
    assert chosen.name == "a" and messages == ["artifact a was compiled on another corpus; its demos come from that corpus"]


def test_a_dev_gain_within_noise_is_not_picked_silently(tmp_path, tiny_retriever):
    models = {"grader": "embedded"}
    # three dev examples that all improve: the smallest possible p is 2/8 = 0.25 -> within noise
    _artifact(tmp_path, tiny_retriever, scores={"grader": _scored([0.267] * 3, [0.667] * 3)})
    chosen, messages = artifacts.select(tmp_path / "arts", models)
    assert chosen is None and messages == [
        "skipped artifact a (agent): its dev gain is within noise (grader +0.400 (p=0.25, n=3)); "
        "use --artifact a to run it anyway"]
    named, _ = artifacts.select(tmp_path / "arts", models, name="a")  # asked for by name: used
    assert named is not None and named.name == "a"


def test_a_detectable_loss_on_any_role_or_missing_per_example_scores_skip_an_artifact(tmp_path, tiny_retriever):
    models = {"grader": "embedded"}
    scores = {"grader": _scored([0.2] * 6, [0.8] * 6), "answerer": _scored([1.0] * 6, [0.0] * 6)}
    _artifact(tmp_path, tiny_retriever, scores=scores)
    chosen, messages = artifacts.select(tmp_path / "arts", models)
    assert chosen is None and "scored worse on dev than the uncompiled prompts" in messages[0]
    assert "answerer -1.000 (p=0.031, n=6)" in messages[0]
    old = {"grader": {"dev_before": 0.2, "dev_after": 0.9, "test_before": 0.5, "test_after": 0.6}}  # means only
    art = _artifact(tmp_path, tiny_retriever, scores=old)
    ok, why = art.dev_verdict()
    assert not ok and "no per-example dev scores for grader" in why and "recompile" in why
    assert art.describe("grader") == ("grader    dev 0.200 -> 0.900 (no per-example scores)   "
                                      "test 0.500 -> 0.600 (no per-example scores)")


def test_random_search_compiles_and_saves(setup):
    settings, golden, lms = setup
    result = compile_program(settings, golden=golden, optimizer="random-search", roles=["grader"], out="rs",
                             lms=lms, show_progress=False)
    assert result.artifact.manifest["optimizer"] == "random-search"
    assert set(result.artifact.manifest["scores"]["grader"]) >= {"dev_before", "dev_after"}
    assert json.loads(result.artifact.program_path.read_text())["grade"]["signature"]["instructions"]



# MIPROv2 and GEPA call the LM with their own signatures too (GEPA's reflection always through a JSONAdapter), so
# this script answers every signature, keyed by the output fields a JSONAdapter prompt asks for, as production
# (rag.lm.configure.configure_dspy) configures it.
JSON_REPLIES = {
    "`relevant_chunk_ids`": REPLIES["`[[ ## relevant_chunk_ids ## ]]`"],
    "`query`": REPLIES["`[[ ## query ## ]]`"],
    "`cited_ids`": REPLIES["`[[ ## cited_ids ## ]]`"],
    "`faithful`": REPLIES["`[[ ## faithful ## ]]`"],
    "`proposed_instruction`": {"proposed_instruction": "Decide from the passages alone; cite their ids."},
    "`program_description`": {"program_description": "A retrieval-grounded question answerer."},
    "`module_description`": {"module_description": "One step of the agent."},
    "`summary`": {"summary": "Questions about the Python language reference."},
    "`observations`": {"observations": "Short factual questions about Python."},
    "`new_instruction`": {"new_instruction": "Say relevant only if a passage states the answer; cite its id."},
}


# the instruction each optimizer's scripted proposer writes (JSON_REPLIES)
PROPOSED = {"mipro": "Decide from the passages alone", "gepa": "Say relevant only if a passage states the answer"}
GOLD_ID = {q: f"{cid}#001" for q, cid in (("What does the with statement wrap?", "with"),
                                           ("What does nonlocal refer to?", "nonlocal"),
                                           ("What do lambda expressions create?", "lambda"),
                                           ("Which method implements len()?", "len"))}


class FollowsInstruction(DummyLM):
    """The scripted LM, except that its grader is exact when its instructions contain ``marker``: relevant with the
    gold id for an answerable question, not relevant otherwise (the script says relevant to everything). An
    optimizer that proposes the marker's instruction must find it scores higher, and keep it."""

    def __init__(self, answers, marker, adapter=None):
        super().__init__(answers, adapter=adapter)
        self.marker = marker
        self._install()

    def _install(self):
        from dspy.clients.engines.dummy_engine import AsyncDummyEngine, DummyEngine
        from dspy.lm15 import Message, Response, TextPart, Usage

        owner = self

        class Engine(DummyEngine):
            def _complete_messages(self, messages):
                last = messages[-1]["content"]
                system = " ".join(m["content"] for m in messages if m["role"] == "system")
                if "`relevant_chunk_ids`" not in last or owner.marker not in system:
                    return super()._complete_messages(messages)
                gold = next((cid for q, cid in GOLD_ID.items() if q in last), None)
                reply = {"reason": "checked", "relevant": gold is not None, "relevant_chunk_ids": [gold] if gold else []}
                return Response(id=None, model="dummy", finish_reason="stop",
                                message=Message.assistant([TextPart(owner._format_answer_fields(reply))]),
                                usage=Usage(input_tokens=0, output_tokens=0, total_tokens=0))

        self._engine_spec = Engine(self)
        self._async_engine_spec = AsyncDummyEngine(self._engine_spec)

    def copy(self, **kwargs):
        copied = super().copy(**kwargs)
        copied._install()
        return copied


@pytest.mark.parametrize(("optimizer", "role"), [*((o, r) for o in ("bootstrap", "random-search", "mipro", "gepa")
                                                      for r in ("grader", "answerer")), ("mipro", "agent")])
def test_every_optimizer_compiles_within_its_planned_call_bound(setup, optimizer, role, capsys):
    from dspy.adapters import JSONAdapter

    settings, golden, _ = setup
    dspy.configure(adapter=JSONAdapter())
    # DummyLM never caches: every call is counted
    lm = FollowsInstruction(JSON_REPLIES, PROPOSED.get(optimizer, PROPOSED["mipro"]), adapter=JSONAdapter())
    lms = {r: lm for r in ("grader", "rewriter", "answerer", "judge")}
    result = compile_program(settings, golden=golden, optimizer=optimizer, roles=[role], out=f"{optimizer}-{role}",
                             lms=lms, show_progress=True)
    out, err = capsys.readouterr()
    assert out == "", "stdout is for results: the optimizer's own progress goes to stderr"
    assert f"compiling with {optimizer}" in err
    m = result.artifact.manifest
    assert m["optimizer"] == optimizer and m["optimizer_settings"]["effort"] == "light"
    assert 0 < m["spend"]["lm_calls"] <= result.plan.calls[role] == m["spend"]["planned_calls_upper_bound"]
    assert m["spend"]["model_calls"] == m["spend"]["lm_calls"]  # none of them from the cache
    assert {"dev_before", "dev_after", "test_before", "test_after"} <= set(m["scores"][role])
    attr = {"grader": "grade", "answerer": "respond", "agent": "respond"}[role]
    instructions = json.loads(result.artifact.program_path.read_text())[attr]["signature"]["instructions"]
    if optimizer in PROPOSED and role == "grader":
        # the grader is exact only under the proposed instruction (FollowsInstruction): the optimizer must keep it
        assert instructions.startswith(PROPOSED[optimizer]), instructions[:80]
        assert m["scores"]["grader"]["dev_after"] > m["scores"]["grader"]["dev_before"]
    elif optimizer == "mipro":  # its proposer was asked (first for dataset observations; the instructions go to
        # a copy of it, to bypass the cache); it kept one of its candidates
        assert any("`observations`" in str(e.get("messages")) for e in lm.history)
        assert instructions.startswith((PROPOSED["mipro"], "Answer the question"))


def test_a_resumed_compile_still_reports_what_the_finished_roles_spent(setup):
    settings, golden, lms = setup
    first = compile_program(settings, golden=golden, roles=["grader"], out="first", lms=lms, show_progress=False)
    again = compile_program(settings, golden=golden, roles=["grader"], out="again", lms=lms, show_progress=False)
    spent, resumed = first.artifact.manifest["spend"], again.artifact.manifest["spend"]
    assert spent["lm_calls"] > 0 and resumed["lm_calls"] == spent["lm_calls"]
    assert resumed["per_role"]["grader"]["reused"] is True and spent["per_role"]["grader"]["reused"] is False
    redone = compile_program(settings, golden=golden, roles=["grader"], out="redone", lms=lms, show_progress=False,
                             fresh=True).artifact.manifest["spend"]
    assert redone["per_role"]["grader"]["reused"] is False and redone["lm_calls"] == spent["lm_calls"]


def test_max_examples_caps_every_split_and_rejects_nonsense(setup):
    from optimize.compile import parse_max_examples

    settings, golden, _ = setup
    result = compile_program(settings, golden=golden, roles=["grader"], dry_run=True, lms={},
                             max_examples=parse_max_examples("1,1,2"))
    assert result.plan.sizes["grader"] == {"train": 1, "dev": 1, "test": 2}
    assert parse_max_examples("3") == (3, 3, 3) and parse_max_examples(None) is None
    for bad in ("0", "1,2", "a,b,c"):
        with pytest.raises(ConfigError, match="TRAIN,DEV,TEST"):
            parse_max_examples(bad)


def test_max_demos_caps_the_demos_of_every_role_and_is_recorded(setup):
    settings, golden, lms = setup
    one = compile_program(settings, golden=golden, roles=["grader", "answerer"], out="one-demo", lms=lms,
                          show_progress=False, max_demos=1).artifact
    state = json.loads(one.program_path.read_text())
    assert [len(state[p]["demos"]) for p in ("grade", "respond")] == [1, 1]
    assert one.manifest["optimizer_settings"]["max_demos"] == 1
    none = compile_program(settings, golden=golden, roles=["grader"], out="no-demos", lms=lms,
                           show_progress=False, max_demos=0).artifact
    assert json.loads(none.program_path.read_text())["grade"]["demos"] == []  # not the 1-demo checkpoint reused
    with pytest.raises(ConfigError, match="--max-demos must be 0 or more"):
        compile_program(settings, golden=golden, roles=["grader"], dry_run=True, lms={}, max_demos=-1)


def test_role_examples_show_passages_cut_as_the_agent_cuts_them(setup):
    from optimize.tasks import build_tasks
    from rag.eval.golden import load_golden
    from rag.retrieval.retriever import Retriever

    settings, golden, _ = setup
    items, retriever = load_golden(golden), Retriever.from_settings(settings)
    whole = build_tasks(["grader", "answerer"], items, retriever, settings)
    cut = build_tasks(["grader", "answerer"], items, retriever, settings.replace(grade_passage_chars=40))
    for role in ("grader", "answerer"):
        long, short = whole[role].train[0].context, cut[role].train[0].context
        assert len(short) < len(long) and short.splitlines()[0] == long.splitlines()[0]  # same passages, cut


def test_answerer_examples_show_the_context_the_agents_answerer_reads(setup):
    """With answer_context="graded" the agent's answerer reads the whole graded retrieval, not only the gold
    passages: compiling scores it (and draws its demos) on that same task; a labelled demo cites only the gold."""
    from optimize.tasks import build_tasks
    from rag.eval.golden import gold_chunk_ids, load_golden
    from rag.retrieval.retriever import Retriever

    settings, golden, _ = setup
    items, retriever = load_golden(golden), Retriever.from_settings(settings)
    by_id = {i.id: i for i in items}
    graded = build_tasks(["answerer"], items, retriever, settings)["answerer"]
    accepted = build_tasks(["answerer"], items, retriever, settings.replace(answer_context="accepted"))["answerer"]
    checked = 0
    for g, a in zip(graded.train + graded.dev + graded.test, accepted.train + accepted.dev + accepted.test):
        item = by_id[g.item_id]
        gold = gold_chunk_ids(item, retriever.index.chunks)
        first = [h.chunk_id for h in retriever.search(item.question, k=settings.top_k)]
        if not gold & set(first):
            continue
        checked += 1
        assert g.shown_ids == first and len(first) == settings.top_k  # every passage the grader read, in its order
        assert a.shown_ids == [c for c in first if c in gold]
        assert g.cited_ids == a.cited_ids == [c for c in first if c in gold]
    assert checked >= 3


def test_demo_sources_show_passages_cut_to_demo_chars_and_scored_splits_do_not(setup):
    from optimize.tasks import build_tasks
    from rag.eval.golden import load_golden
    from rag.retrieval.retriever import Retriever

    settings, golden, _ = setup
    items, retriever = load_golden(golden), Retriever.from_settings(settings)
    whole = build_tasks(["grader", "answerer"], items, retriever, settings)
    demo = build_tasks(["grader", "answerer"], items, retriever, settings, demo_chars=30)
    for role in ("grader", "answerer"):
        assert [e.context for e in demo[role].dev + demo[role].test] == [e.context for e in whole[role].dev + whole[role].test]
        long, short = whole[role].train[0].context, demo[role].train[0].context
        assert len(short) < len(long) and short.splitlines()[0] == long.splitlines()[0]
        assert all(len(body) <= 30 for body in short.split("<<<\n")[1:] for body in [body.split("\n>>>")[0]])
    with pytest.raises(ConfigError, match="--demo-passage-chars must be 1 or more"):
        compile_program(settings, golden=golden, roles=["grader"], dry_run=True, lms={}, demo_passage_chars=0)


def test_the_whole_agent_compiles_end_to_end(setup):
    settings, golden, lms = setup
    result = compile_program(settings, golden=golden, roles=["agent"], out="e2e", lms=lms, show_progress=False)
    m = result.artifact.manifest
    # the scripted grader calls everything relevant: answerable items score 1, unanswerable ones 0
    assert m["scores"]["agent"]["test_before"] == 0.5 and m["golden"]["sizes"]["agent"]["test"] == 2
    state = json.loads(result.artifact.program_path.read_text())
    assert state["grade"]["demos"] and state["respond"]["demos"], "demos bootstrapped from whole-agent traces"
    assert all("context" in d for d in state["grade"]["demos"] + state["respond"]["demos"]), "no raw golden rows"
    from rag.retrieval.retriever import Retriever

    agent = Sieve(Retriever.from_settings(settings), top_k=3)
    artifacts.apply(agent, artifacts.load(result.artifact.path))
    assert len(agent.respond.demos) == len(state["respond"]["demos"])


def test_gepa_feedback_says_what_the_grader_got_wrong():
    from optimize.optimizers import with_feedback
    from optimize.roles import grader_metric

    metric = with_feedback("grader", grader_metric)
    gold = dspy.Example(relevant=False, relevant_chunk_ids=[], shown_ids=["a#1", "b#1"])
    out = metric(gold, dspy.Prediction(relevant=True, relevant_chunk_ids=["a#1"], reason=""))
    assert out.score < 0.5 and "no passage shown contains the answer" in out.feedback
    gold = dspy.Example(relevant=True, relevant_chunk_ids=["b#1"], shown_ids=["a#1", "b#1"])
    out = metric(gold, dspy.Prediction(relevant=False, relevant_chunk_ids=[], reason=""))
    assert "['b#1'] answer the question" in out.feedback


def test_capped_splits_keep_every_question_type(setup):
    """The golden file is sorted by type; a cap must not leave only answerable items in a split."""
    from optimize.compile import plan
    from optimize.tasks import build_tasks
    from rag.eval.golden import load_golden
    from rag.retrieval.retriever import Retriever

    settings, golden, _ = setup
    tasks = build_tasks(["grader", "agent"], load_golden(golden), Retriever.from_settings(settings), settings)
    plan(tasks, "bootstrap", budget=None, max_examples=(2, 2, 2))
    for role in ("grader", "agent"):
        ids = {split: sorted(ex.item_id for ex in getattr(tasks[role], split)) for split in ("train", "dev", "test")}
        assert ids == {"train": ["a1", "u1"], "dev": ["a3", "u2"], "test": ["a4", "u3"]}, role


def test_finished_work_is_reused_only_for_the_same_examples(setup, capsys, monkeypatch):
    """Same golden file, same split sizes, other examples (as when the stratification changes): no reuse."""
    import rag.eval.golden

    settings, golden, lms = setup
    kw = dict(golden=golden, roles=["grader"], lms=lms, show_progress=False, max_examples=(1, 1, 1))
    compile_program(settings, out="one", **kw)
    capsys.readouterr()
    monkeypatch.setattr(rag.eval.golden, "interleave_types", lambda items: list(reversed(items)))
    compile_program(settings, out="two", **kw)
    assert "reusing finished work" not in capsys.readouterr().err
    compile_program(settings, out="three", **kw)
    assert "reusing finished work" in capsys.readouterr().err
    from dataclasses import replace

    compile_program(replace(settings, top_k=2), out="four", **kw)  # other prompts for the same examples
    assert "reusing finished work" not in capsys.readouterr().err


@pytest.mark.parametrize("optimizer", ["mipro", "gepa"])
def test_a_separate_proposer_writes_the_new_instructions(setup, optimizer):
    from dspy.adapters import JSONAdapter

    settings, golden, _ = setup
    dspy.configure(adapter=JSONAdapter())
    task_lm = DummyLM(JSON_REPLIES, adapter=JSONAdapter())
    proposer = DummyLM(JSON_REPLIES, adapter=JSONAdapter())
    lms = {**{r: task_lm for r in ("grader", "rewriter", "answerer", "judge")}, "proposer": proposer}
    compile_program(settings, golden=golden, optimizer=optimizer, roles=["grader"], lms=lms, show_progress=False)

    def asked(lm, field):
        return sum(f"`{field}`" in str(entry["messages"]) for entry in lm.history)

    # MIPROv2 asks a copy of its proposer for each instruction (to bypass the cache), so the proposer's own history
    # shows the dataset observations it asks for first; GEPA asks the proposer itself
    field, first = ("proposed_instruction", "observations") if optimizer == "mipro" else ("new_instruction",) * 2
    assert asked(proposer, first) > 0 and asked(task_lm, field) == 0 and asked(task_lm, first) == 0
    assert asked(task_lm, "relevant_chunk_ids") > 0 and asked(proposer, "relevant_chunk_ids") == 0


def test_the_judge_compiles_against_human_labels_as_rag_calibrate_writes_them(setup, tmp_path):
    settings, golden, lms = setup
    labels = tmp_path / "labels.jsonl"
    rows = [{"id": i, "question": q, "reference_answer": r, "answer": r if t == "answerable" else "Not covered.",
             "correct": t == "answerable", "faithful": True, "note": "", "run": "full", "labeller": "human"}
            for i, t, q, r, _, _ in ITEMS]
    labels.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = compile_program(settings, golden=golden, roles=["judge"], labels=labels, lms=lms, show_progress=False)
    assert result.artifact.manifest["golden"]["sizes"]["judge"] == {"train": 3, "dev": 2, "test": 2}
    # the scripted judge says correct and faithful to everything: right on a4, wrong on u3's "correct"
    assert result.scores["judge"]["test_before"] == 0.75
    assert result.artifact.judge_path is not None and result.artifact.judge_path.is_file()


def test_judge_labels_without_a_split_say_how_to_label_one(tiny_retriever, tmp_path):
    from optimize.tasks import build_tasks
    from rag.config import PROJECT_ROOT, Settings
    from rag.eval.golden import load_golden

    items = load_golden(PROJECT_ROOT / "golden" / "python_ref.jsonl")
    committed = PROJECT_ROOT / "golden" / "judge_labels.jsonl"
    task = build_tasks(["judge"], items, tiny_retriever, Settings(top_k=3), labels_path=committed)["judge"]
    assert min(len(task.train), len(task.dev), len(task.test)) > 0, "the committed labels cover every split"

    split = {i.id: i.split for i in items}
    no_train = tmp_path / "labels.jsonl"
    no_train.write_text("".join(line + "\n" for line in committed.read_text().splitlines()
                                if split[json.loads(line)["id"]] != "train"))
    with pytest.raises(InputError, match=r"labels.jsonl: no human labels for 'train'-split questions; "
                                         r"label some: rag eval --config full --split train"):
        build_tasks(["judge"], items, tiny_retriever, Settings(top_k=3), labels_path=no_train)


def test_a_label_without_its_reference_answer_takes_the_golden_one():
    from optimize.roles import judge_example

    label = {"id": "a1", "question": "q?", "answer": "x", "correct": False, "faithful": True}
    assert judge_example(label, "the golden reference").reference_answer == "the golden reference"
    assert judge_example({**label, "reference_answer": "its own"}, "golden").reference_answer == "its own"


def test_judge_examples_read_the_passages_the_labelled_answer_cites(setup, tmp_path):
    """Labels store no context; "faithful" was labelled against the passages the answer cites, so a judge example
    shows those (as rag eval's judge sees passages), not an empty context."""
    from optimize.tasks import build_tasks
    from rag.eval.golden import load_golden
    from rag.retrieval.retriever import Retriever

    settings, golden, _ = setup
    items, retriever = load_golden(golden), Retriever.from_settings(settings)
    labels = tmp_path / "labels.jsonl"
    rows = [{"id": i, "question": q, "reference_answer": r, "answer": f"{r} [with#001]", "correct": True,
             "faithful": False, "citations": ["with#001", "gone#009"] if t == "answerable" else [], "note": ""}
            for i, t, q, r, _, _ in ITEMS]
    labels.write_text("".join(json.dumps(row) + "\n" for row in rows))
    task = build_tasks(["judge"], items, retriever, settings, labels_path=labels)["judge"]
    examples = {ex.item_id: ex for ex in task.train + task.dev + task.test}
    cited = examples["a1"].context
    assert "[with#001]" in cited and "wrap the execution of a block" in cited and "gone#009" not in cited
    assert examples["u1"].context == "(no passages)"


def test_the_hyde_stage_compiles_against_recall_and_applies_to_an_agent_with_hyde_on(setup):
    """No judge: the metric is whether the question plus the hypothetical passage retrieves the gold chunk."""
    from rag.retrieval.expansion import QueryExpander
    from rag.retrieval.retriever import Retriever

    settings, golden, lms = setup
    hyde_lm = DummyLM({"`[[ ## passage ## ]]`": {"passage": "The with statement wraps the execution of a block "
                                                             "with methods defined by a context manager."}})
    result = compile_program(settings, golden=golden, roles=["hyde"], out="hyde", show_progress=False,
                             lms={**lms, "rewriter": hyde_lm})
    m = result.artifact.manifest
    assert set(m["scores"]) == {"hyde"} and m["golden"]["sizes"]["hyde"] == {"train": 2, "dev": 1, "test": 1}
    assert 0 <= m["scores"]["hyde"]["dev_before"] <= 1
    state = json.loads(result.artifact.program_path.read_text())
    demos = state["expander.hyde"]["demos"]
    assert demos and all(d.get("passage") for d in demos)
    retriever = Retriever.from_settings(settings)
    on = Sieve(retriever, top_k=3, expander=QueryExpander(0, hyde=True))
    artifacts.apply(on, artifacts.load(result.artifact.path))
    assert len(on.expander.hyde.demos) == len(demos)
    off = Sieve(retriever, top_k=3)  # hyde off: the artifact still loads, its HyDE demos have nowhere to go
    artifacts.apply(off, artifacts.load(result.artifact.path))
    assert off.expander is None


def test_the_sql_role_compiles_the_writer_as_the_agent_runs_it():
    """optimize.roles.SQLStep answers with a ```sql block when the agent does (sql_output = "text", the default), so
    the demos and instructions a compile keeps are scored in the format they will be used in."""
    from dspy.clients.base_lm import GLOBAL_HISTORY
    from dspy.utils import DummyLM

    from optimize.roles import SQLStep
    from rag.agent.sqltext import ASK, SQLTextAdapter

    dspy.configure(lm=DummyLM([{"sql": "SELECT 1"}], adapter=SQLTextAdapter()))
    start = len(GLOBAL_HISTORY)
    assert SQLStep(text=True)(question="q", tables="TABLE t", documents="").sql == "SELECT 1"
    assert GLOBAL_HISTORY[start]["messages"][-1]["content"].endswith(ASK)
