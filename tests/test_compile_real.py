"""A tiny real compile on the embedded model: the grader role, a handful of LM calls, within the CI budget."""

from __future__ import annotations

import json

import pytest

from rag.paths import PROJECT_ROOT

pytestmark = pytest.mark.slow
SPLITS = {"pyref-a-001": "train", "pyref-u-001": "train", "pyref-a-002": "dev", "pyref-u-002": "dev",
          "pyref-a-003": "test", "pyref-u-003": "test"}


def test_tiny_real_compile_of_the_grader(tmp_path):
    from optimize.compile import compile_program
    from rag.agent import artifacts
    from rag.agent.module import Sieve
    from rag.config import Settings
    from rag.lm.configure import configure_dspy
    from rag.retrieval.retriever import Retriever
    from tests.retrieval_support import small_index

    rows = [json.loads(line) for line in (PROJECT_ROOT / "golden" / "python_ref.jsonl").read_text().splitlines()]
    golden = tmp_path / "tiny.jsonl"
    golden.write_text("".join(json.dumps({**r, "split": SPLITS[r["id"]]}) + "\n" for r in rows if r["id"] in SPLITS))
    index = small_index()
    # the fast packaged model: this tests the compile mechanics on a real engine, not the default model's quality
    settings = Settings(index_dir=index.dir, artifacts_dir=tmp_path / "artifacts", top_k=2, cache_dir=tmp_path / "cache",
                        embedded_model="smollm2-135m")
    configure_dspy(settings)
    result = compile_program(settings, golden=golden, optimizer="bootstrap", roles=["grader"], budget=8,
                             out="tiny-real", show_progress=False)
    art = result.artifact
    assert sum(result.plan.calls.values()) <= 8
    scores = art.manifest["scores"]["grader"]
    assert all(0.0 <= scores[k] <= 1.0 for k in ("dev_before", "dev_after", "test_before", "test_after"))
    assert 0 < art.manifest["spend"]["lm_calls"] <= 8
    assert art.manifest["models"]["grader"] == "embedded"
    state = json.loads(art.program_path.read_text())
    assert state["grade"]["demos"], "the compiled grader carries demos"
    agent = Sieve(Retriever(index, top_k=2))
    artifacts.apply(agent, artifacts.load(art.path))
    assert len(agent.grade.demos) == len(state["grade"]["demos"])
