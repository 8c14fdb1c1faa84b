"""rag.report.analysis and rag.report.plots on the committed fixture: real `rag eval` runs (tests/fixtures/README.md).

Expected values were counted by hand from tests/fixtures/runs/*/results.jsonl (ids, nodes, verdicts, judge).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rag.errors import InputError
from rag.report import analysis, compare, plots

FIXTURE_RUNS = Path(__file__).parent / "fixtures" / "runs"
IDS = ["pyref-a-003", "pyref-a-005", "pyref-a-008", "pyref-a-010", "pyref-a-013", "pyref-a-015", "pyref-a-018",
       "pyref-a-020"]  # the first 8 test items: all answerable
# Counted by hand from the JSONL. full: a-013 and a-020 rewrote once (6 steps), the rest retrieve/grade/answer;
# a-008's judge failed to parse (unjudged). baseline: retrieve/answer only; a-013 judged wrong, binary#001 never
# retrieved (retrieval miss). Grade steps (full), set level: tp a-003 a-005 a-015 a-018; fp a-008 a-010 and the
# second grades of a-013 and a-020; fn a-020's first grade (shown comparisons#004, said not relevant); tn a-013's
# first. Chunk level (4 shown per grade), scored on the passages the agent USED (rag.eval.decisions.used_ids): a
# rejected grade used none, "relevant" without ids used all four. tp 4 (a-003, a-005, a-015, a-018: gold shown and
# used), fn 1 (a-020#1 rejected the context holding comparisons#004, though it listed it), fp 3+3 (a-003, a-005)
# +4 (a-008, no ids) +4 (a-010) +4 (a-013#2) +3+3 (a-015, a-018) +4 (a-020#2, no ids) = 28, tn 4 (a-013#1) + 3
# (a-020#1) = 7.
HAND = {
    "full_steps": {"pyref-a-003": 3, "pyref-a-005": 3, "pyref-a-008": 3, "pyref-a-010": 3, "pyref-a-013": 6,
                   "pyref-a-015": 3, "pyref-a-018": 3, "pyref-a-020": 6},
    "full_rewrites": 2,
    "outcomes": {"full/correct": 7, "full/answered (unjudged)": 1, "baseline/correct": 7, "baseline/wrong": 1},
    "steps_per_config": {"full": 30, "baseline": 16},
    "full_nodes": {"retrieve": 10, "grade": 10, "answer": 8, "rewrite": 2},
    "full_verdicts": {True: 8, False: 2},
    # 7 of 8 each; Wilson 95%: center (0.875 + 1.92/8) / 1.4802 = 0.7534, half 1.96 x 0.16935 / 1.4802 = 0.2242
    "full_e2e": "87.5% [52.9%, 97.8%] n=8", "baseline_e2e": "87.5% [52.9%, 97.8%] n=8",
    "confusion_set": {"tp": 4, "fp": 4, "fn": 1, "tn": 1},
    "confusion_chunk": {"tp": 4, "fp": 28, "fn": 1, "tn": 7},
    "refused": 0, "full_unjudged": 1,
    "diagnoses": {"retrieval miss/baseline": 1},
    "retrieval_misses": [["baseline", "pyref-a-013"]],
    "rewrite_item": ["full", "pyref-a-020"],
    "node_counts": {"baseline/answer": 8, "baseline/retrieve": 8, "full/answer": 8, "full/grade": 10,
                    "full/retrieve": 10, "full/rewrite": 2},
    "flips": [["pyref-a-013", "wrong->right"]],
}


@pytest.fixture(scope="module")
def runs():
    return analysis.load_runs(FIXTURE_RUNS)


def _raw(config: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURE_RUNS / config / "results.jsonl").read_text().splitlines()]


def test_fixture_is_small_and_real():
    size = sum(p.stat().st_size for p in FIXTURE_RUNS.rglob("*") if p.is_file())
    assert size < 300_000
    for config in ("full", "baseline"):
        records = _raw(config)
        assert [r["id"] for r in records] == IDS and len(records) <= 8
        assert all(r["prediction"]["trace"]["steps"][0]["node"] == "retrieve" for r in records)
        assert json.loads((FIXTURE_RUNS / config / "summary.json").read_text())["complete"]


def test_items_frame(runs):
    items = analysis.items_frame(runs)
    assert len(items) == 2 * len(IDS)
    full = items[items.config == "full"].set_index("id")
    assert full.steps.to_dict() == HAND["full_steps"]
    assert full.rewrites.sum() == HAND["full_rewrites"]
    assert items.groupby("config").outcome.value_counts().to_dict() == {tuple(k.split("/")): v for k, v in HAND["outcomes"].items()}


def test_steps_frame(runs):
    steps = analysis.steps_frame(runs)
    assert steps.groupby("config").size().to_dict() == HAND["steps_per_config"]
    assert steps[steps.config == "full"].node.value_counts().to_dict() == HAND["full_nodes"]
    assert set(steps[steps.config == "baseline"].node) == {"retrieve", "answer"}  # reflection off
    grades = steps[(steps.node == "grade")]
    assert grades.verdict.value_counts().to_dict() == HAND["full_verdicts"]
    # latency charged per step adds up to the item's latency in the scores
    items = analysis.items_frame(runs).set_index(["config", "id"])
    per_item = steps.groupby(["config", "id"]).latency_ms.sum()
    assert per_item.round(6).to_dict() == items.latency_ms.round(6).to_dict()


def test_metric_table_matches_summary_and_says_why(runs):
    values = analysis.metric_values(runs)
    for run in runs:
        for key, value in run.summary["metrics"].items():
            if key in values.index:
                assert (pd.isna(values.loc[key, run.name]) and value is None) or values.loc[key, run.name] == pytest.approx(value)
    table = analysis.metric_table(runs)
    assert table.loc["Grader precision (set)", "baseline"] == "n/a (no grade steps: reflection off)"
    assert table.loc["End-to-end accuracy", "full"] == HAND["full_e2e"]
    assert table.loc["End-to-end accuracy", "baseline"] == HAND["baseline_e2e"]


def test_grader_confusion_by_hand_and_as_summarized(runs):
    for level in ("set", "chunk"):
        conf = analysis.grader_confusion(runs, level=level)
        assert list(conf.config) == ["full"] and list(conf.type) == ["answerable"]  # baseline has no grade steps
        row = conf.iloc[0]
        assert {k: int(row[k]) for k in ("tp", "fp", "fn", "tn")} == HAND[f"confusion_{level}"]
        summary = runs["full"].summary["metrics"]
        assert row.precision == pytest.approx(summary[f"grader_{level}_precision"])
        assert row.recall == pytest.approx(summary[f"grader_{level}_recall"])
    with pytest.raises(InputError, match="level"):
        analysis.grader_confusion(runs, level="item")
    with pytest.raises(InputError, match="by must be"):
        analysis.grader_confusion(runs, by="split")
    pooled = analysis.grader_confusion(runs, level="set", by=None)
    assert list(pooled.columns[:5]) == ["config", "tp", "fp", "fn", "tn"] and int(pooled.n.sum()) == 10


def test_refusal_outcomes(runs):
    table = analysis.refusal_outcomes(runs).set_index(["config", "type"])
    assert table.n.to_dict() == {("baseline", "answerable"): len(IDS), ("full", "answerable"): len(IDS)}
    assert table.refused.sum() == HAND["refused"]
    assert table.loc[("full", "answerable"), "answered (unjudged)"] == HAND["full_unjudged"]


def test_failures_grouped_by_diagnosis(runs):
    counts = analysis.failure_counts(runs)
    assert {(k, c): int(counts.loc[k, c]) for k in counts.index for c in counts.columns if counts.loc[k, c]} == \
        {tuple(k.split("/")): v for k, v in HAND["diagnoses"].items()}
    f = analysis.failures(runs, diagnosis="retrieval miss")
    assert sorted(zip(f.config, f.id)) == sorted(tuple(x) for x in HAND["retrieval_misses"])
    assert analysis.failures(runs, diagnosis="rewrite loop").empty
    with pytest.raises(InputError, match="unknown diagnosis"):
        analysis.failures(runs, diagnosis="bad luck")
    text = analysis.render_failures(runs)
    assert text.startswith("===== retrieval miss: ") and all(i in text for _, i in HAND["retrieval_misses"])


def test_render_trace_step_by_step(runs):
    config, item_id = HAND["rewrite_item"]
    rec = analysis.record(runs, config, item_id)
    text = analysis.render_trace(rec)
    steps = rec["prediction"]["trace"]["steps"]
    assert rec["question"] in text
    for i, st in enumerate(steps, 1):
        assert f"{i}. {st['node']}" in text
        for h in st.get("hits") or []:
            assert f"{h['chunk_id']}  score={h['score']:.4f}" in text
        if st["node"] == "grade":
            assert ("NOT RELEVANT" if not st["verdict"] else "RELEVANT") in text and f"reason: {st['reason']}" in text
        if st["node"] == "rewrite":
            assert repr(st["rewrite"]) in text
    assert text.splitlines()[-1].startswith(f"= answered: {len(steps)} steps, 1 rewrites")
    # a-020's gold comparisons#004 was retrieved first (rank 2) and shown to the first grade: marked both times
    gold = rec["gold_ids"][0]
    rank = next(h["rank"] for h in steps[0]["hits"] if h["chunk_id"] == gold)
    assert f"* #{rank} {gold}" in text and "*" + gold in text.split("2. grade", 1)[1].splitlines()[1]
    body = text.split("\n1. retrieve", 1)[1]  # below the header line that lists the gold ids
    assert body.count(gold) == body.count("*" + gold) + body.count(f"* #{rank} {gold}")  # never unmarked


def test_latency_by_node(runs):
    table = analysis.latency_by_node(runs).set_index(["config", "node"])
    assert table.n.to_dict() == {tuple(k.split("/")): v for k, v in HAND["node_counts"].items()}
    for run in runs:
        for node, s in run.summary["latency_by_node"].items():
            assert table.loc[(run.name, node), "p50_ms"] == pytest.approx(s["p50_ms"])
            assert table.loc[(run.name, node), "p95_ms"] == pytest.approx(s["p95_ms"])


def test_flips_baseline_to_full(runs):
    f = compare.flips(runs["baseline"], runs["full"])
    assert sorted(zip(f.id, f.flip)) == sorted(tuple(x) for x in HAND["flips"])
    deltas = compare.metric_deltas(runs["baseline"], runs["full"])
    assert deltas.loc["steps_mean", "delta"] == pytest.approx(
        runs["full"].summary["metrics"]["steps_mean"] - runs["baseline"].summary["metrics"]["steps_mean"])


def test_plots(runs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plots.metrics_bar(runs, metrics=("e2e_accuracy", "grader_set_precision"))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == runs.names
    assert len(ax.patches) == 3  # baseline has no grader precision: 2 + 1 bars, and an n/a label
    assert any(t.get_text() == "n/a" for t in ax.texts)
    fig2 = plots.latency_by_node(runs)
    assert len(fig2.axes[0].get_xticklabels()) == len(HAND["node_counts"])
    fig3 = plots.steps_histogram(runs)
    heights = sorted(int(p.get_height()) for p in fig3.axes[0].patches if p.get_height())
    assert sum(heights) == 2 * len(IDS)
    plt.close("all")
