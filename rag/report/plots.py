"""Matplotlib figures over eval runs (rag.report.analysis tables): metrics across configs, latency per node, steps
per query. Each function returns a ``matplotlib.figure.Figure``; nothing is shown or saved here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag.report import analysis

DEFAULT_METRICS = ("e2e_accuracy", "answer_correctness", "faithfulness", "correct_refusal_rate",
                   "false_refusal_rate", "grader_set_precision", "grader_set_recall", "recall_at_k", "hit_at_k")


def _subplots(**kw: Any):
    import matplotlib.pyplot as plt

    return plt.subplots(**kw)


def metrics_bar(runs: Any, metrics: Sequence[str] = DEFAULT_METRICS):
    """Grouped bars: one group per metric (rates in [0, 1]), one bar per run; metrics a run could not compute
    are left out of its group and marked ``n/a``."""
    values = analysis.metric_values(runs).loc[list(metrics)]
    fig, ax = _subplots(figsize=(max(6.0, 1.1 * len(metrics)), 3.8), layout="constrained")
    width = 0.8 / max(1, values.shape[1])
    for j, name in enumerate(values.columns):
        xs = [i + (j - (values.shape[1] - 1) / 2) * width for i in range(len(metrics))]
        col = values[name]
        ax.bar([x for x, v in zip(xs, col) if v == v], [v for v in col if v == v], width, label=name)
        for x, v in zip(xs, col):
            if v != v:  # NaN: not computed in this run
                ax.text(x, 0.01, "n/a", ha="center", va="bottom", rotation=90, fontsize=7)
    ax.set_xticks(range(len(metrics)), [m.replace("_", " ") for m in metrics], rotation=30, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("rate")
    ax.set_title("Metrics across configs")
    ax.legend(fontsize=8)
    return fig


def latency_by_node(runs: Any):
    """Box plot of step latency (ms, log scale) per node, one box per run and node."""
    steps = analysis.steps_frame(runs)
    fig, ax = _subplots(figsize=(7.0, 3.8), layout="constrained")
    groups = list(steps.groupby(["node", "config"], sort=True)) if not steps.empty else []
    ax.boxplot([g.latency_ms.clip(lower=0.01).tolist() for _, g in groups])
    ax.set_xticks(range(1, len(groups) + 1), [f"{node}\n{config}" for (node, config), _ in groups], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("latency per step (ms)")
    ax.set_title("Latency distribution per node")
    return fig


def steps_histogram(runs: Any):
    """Histogram of trace steps per query, one series per run."""
    items = analysis.items_frame(runs)
    fig, ax = _subplots(figsize=(6.0, 3.5), layout="constrained")
    ok = items[items.steps.notna()] if not items.empty else items
    top = int(ok.steps.max()) if not ok.empty else 1
    bins = [b - 0.5 for b in range(1, top + 2)]
    for name, g in ok.groupby("config", sort=False):
        ax.hist(g.steps.astype(int), bins=bins, alpha=0.6, label=name)
    ax.set_xticks(range(1, top + 1))
    ax.set_xlabel("steps per query")
    ax.set_ylabel("items")
    ax.set_title("Steps per query")
    if not ok.empty:
        ax.legend(fontsize=8)
    return fig
