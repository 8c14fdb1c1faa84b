"""rag serve with the real program (rag.agent.program.build_program) on the embedded model: a question streams through
the loopback server step by step. The fast packaged SmolLM2-135M plays every role: this tests the wiring on a real
engine, not the answers' quality."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.serve_support import ANSWERABLE, FIXTURE_RUNS, serve_index

pytestmark = pytest.mark.slow


def test_a_question_streams_through_the_embedded_model(tmp_path_factory, tmp_path):
    from rag.lm.configure import configure_dspy
    from rag.serve.app import create_app
    from rag.serve.evalview import RunBrowser
    from rag.serve.programs import Programs
    from rag.serve.server import Background

    index = serve_index(tmp_path_factory)
    sets = [f"index_dir={index.dir}", "embedded_model=smollm2-135m", "cache=false", "top_k=2", "max_rewrites=0",
            f"artifacts_dir={tmp_path / 'artifacts'}", "embedded_max_tokens=96"]
    programs = Programs(sets)
    configure_dspy(programs.settings("full"))
    app = create_app(programs, RunBrowser(FIXTURE_RUNS))
    with Background(app) as url, httpx.Client(base_url=url, timeout=600) as client:
        seen = []
        with client.stream("GET", "/api/stream", params={"question": ANSWERABLE, "config": "full"}) as r:
            assert r.status_code == 200
            kind = None
            for line in r.iter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    seen.append((kind, json.loads(line[6:])))
    kinds = [k for k, _ in seen if k != "progress"]
    assert kinds[-1] == "done", seen[-1]
    program = next(d for k, d in seen if k == "program")
    assert set(program["models"].values()) == {"embedded/smollm2-135m"} and program["artifact"] is None
    steps = [d for k, d in seen if k == "step"]
    assert [s["node"] for s in steps[:2]] == ["retrieve", "grade"] and steps[-1]["node"] in ("answer", "refuse")
    grade = steps[1]
    assert grade["model"] == "embedded/smollm2-135m" and grade["tokens_in"] > 0 and grade["latency_ms"] > 0
    assert seen[-1][1]["trace"]["steps"] == [{k: v for k, v in s.items() if k != "index"} for s in steps]
