"""Builders for hand-made agent traces (shared by the metric and diagnosis tests)."""

from __future__ import annotations

from rag.eval.golden import GoldenItem


def item(iid, typ="answerable", evidence=()):
    return GoldenItem(id=iid, type=typ, question=f"q {iid}", reference_answer="ref",
                      should_refuse=typ == "unanswerable", relevant_chunk_ids=[], evidence=list(evidence),
                      split="test", meta={})


def retrieve(*ids, latency=10.0):
    return {"node": "retrieve", "hits": [{"chunk_id": c, "rank": i} for i, c in enumerate(ids, 1)],
            "latency_ms": latency}


def grade(shown, verdict, chosen=(), latency=100.0, cached=False, tokens=(50, 5)):
    return {"node": "grade", "shown_ids": list(shown), "verdict": verdict, "chosen_ids": list(chosen),
            "latency_ms": latency, "model": "m", "cached": cached, "tokens_in": tokens[0], "tokens_out": tokens[1],
            "cost": 0.001}


def rewrite(latency=50.0):
    return {"node": "rewrite", "latency_ms": latency, "model": "m", "tokens_in": 30, "tokens_out": 8, "cost": 0.0005}


def answer(shown, latency=200.0):
    return {"node": "answer", "shown_ids": list(shown), "latency_ms": latency, "model": "m",
            "tokens_in": 80, "tokens_out": 20, "cost": 0.002}


def pred(steps, refused=False, citations=(), invalid=()):
    return {"answer": "x", "refused": refused, "citations": list(citations), "invalid_citations": list(invalid),
            "trace": {"question": "q", "steps": steps, "outcome": "refused" if refused else "answered"}}


def record(it, prediction, gold, *, judge=None, max_rewrites=2, k=4, error=None):
    """An eval record as rag.eval.runner writes it (the fields rag.eval.diagnose and rag.report.markdown read)."""
    from rag.eval.agent_metrics import score_item

    return {"id": it.id, "type": it.type, "question": it.question, "reference_answer": it.reference_answer,
            "should_refuse": it.should_refuse, "gold_ids": sorted(gold), "evidence": list(it.evidence),
            "status": "error" if prediction is None else "ok", "error": error, "prediction": prediction,
            "judge": judge, "scores": score_item(it, prediction, gold, k=k, max_rewrites=max_rewrites,
                                                 judge=judge, error=error)}
