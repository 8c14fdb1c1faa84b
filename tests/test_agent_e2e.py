"""One end-to-end run of the agent on the real embedded model over real built-in Python reference topics."""

from __future__ import annotations

import json

import pytest

from rag.agent.module import REFUSAL, Sieve, prediction_to_dict
from rag.agent.trace import NODES

pytestmark = pytest.mark.slow


def test_real_model_answers_or_refuses_with_a_valid_trace(tmp_path):
    import dspy

    from rag.config import Settings
    from rag.lm.configure import configure_dspy, lms_for_roles
    from rag.retrieval.retriever import Retriever
    from tests.retrieval_support import small_index

    settings = Settings(cache=False, cache_dir=tmp_path / "cache")
    configure_dspy(settings)
    agent = Sieve(Retriever(small_index(), top_k=3), max_rewrites=1, lms=lms_for_roles(settings))
    pred = agent(question="What does the assert statement do when debugging is off?")

    data = json.loads(json.dumps(prediction_to_dict(pred)))  # JSON-serialisable
    steps = data["trace"]["steps"]
    assert [s["node"] for s in steps][:2] == ["retrieve", "grade"]
    assert all(s["node"] in NODES for s in steps)
    assert data["trace"]["outcome"] in ("answered", "refused")
    if pred.refused:
        assert pred.answer == REFUSAL and steps[-1]["node"] == "refuse" and pred.closest
    else:
        assert steps[-1]["node"] == "answer" and pred.answer.strip()
        shown = set(steps[-1]["shown_ids"])
        assert set(pred.citations) <= shown  # only passages that were shown can be cited
    for s in steps:
        if s["node"] in ("grade", "rewrite", "answer"):
            assert s["tokens_in"] > 0 and s["tokens_out"] > 0 and s["model"] and s["latency_ms"] > 0
    assert data["trace"]["totals"]["tokens_in"] == sum(s["tokens_in"] for s in steps)
    assert isinstance(dspy.settings.adapter, dspy.JSONAdapter)
