"""The grounding critic's checks replayed on a run's hand-labelled answers: which check agrees with the humans.

Run: python benchmarks/critic_checks.py --run benchmarks/results/eval-ops-qwen1.5b-xeon \
         --labels golden/ops_demo_labels.jsonl --index-dir $SIEVE_HOME/demo/ops/index [--out FILE]

For every answer of ``--run`` that has a hand label (``faithful``), the evidence it cited is rebuilt from the run
record (SQL results as the agent showed them, passages from ``--index-dir``), and each check gives its verdict:
``model`` is the GroundingCritic's last verdict recorded in the run (the one on the answer returned); ``numbers``
is rag.agent.critique.unsupported_numbers, run here (no model); ``numbers+model`` flags when the numbers fail and
otherwise keeps the model's verdict. Reported per check: Cohen's kappa with the hand labels (95% bootstrap
interval over answers), accuracy, unfaithful answers flagged and faithful ones flagged wrongly. No model is called.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit  # noqa: E402
from rag.eval.calibrate import cohen_kappa  # noqa: E402
from rag.stats.intervals import bootstrap  # noqa: E402


def evidence_texts(pred: dict, passages: dict[str, str]) -> list[str]:
    """The texts the critic read: the cited sources (all shown sources when none is cited), SQL as the agent shows it."""
    from rag.data.warehouse import QueryResult

    cited = set(pred.get("citations") or [])
    sources = [*pred.get("sources", []), *pred.get("uncited", [])]
    chosen = [s for s in sources if s["chunk_id"] in cited] or sources
    texts = []
    for s in chosen:
        if "sql" in s:
            result = QueryResult(sql=s["sql"], columns=s.get("columns", []), rows=[tuple(r) for r in s.get("rows", [])],
                                 truncated=bool(s.get("truncated")), seconds=0.0)
            texts.append(f"SQL: {result.sql}\nResult:\n{result.as_text()}")
        else:
            texts.append(passages.get(s["chunk_id"], ""))
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--labels", type=Path, required=True)
    parser.add_argument("--index-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from rag.agent.stated import unsupported_numbers
    from rag.config import load_settings
    from rag.eval.calibrate import load_labels
    from rag.index.store import Index

    index = Index.load(args.index_dir, load_settings({"index_dir": args.index_dir}))
    passages = {c.id: c.text for c in index.chunks}
    labels = {(lab["id"], " ".join(lab["answer"].split())): lab for lab in load_labels(args.labels)}
    rows = []  # (faithful, model, numbers)
    for line in (args.run / "results.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        pred = rec.get("prediction") or {}
        lab = labels.get((rec["id"], " ".join(str(pred.get("answer") or "").split())))
        verdicts = [s.get("verdict") for s in pred.get("trace", {}).get("steps", []) if s["node"] == "critique"]
        if lab is None or pred.get("refused") or not verdicts or verdicts[-1] is None:
            continue
        missing = unsupported_numbers(pred["answer"], [rec["question"], *evidence_texts(pred, passages)])
        rows.append((bool(lab["faithful"]), bool(verdicts[-1]), not missing))
    checks = {"model": lambda r: r[1], "numbers": lambda r: r[2], "numbers+model": lambda r: r[2] and r[1]}
    lines = [f"# The critic's checks against the hand labels: {args.run.name}", "",
             f"Command: `python benchmarks/critic_checks.py --run {args.run} --labels {args.labels} --index-dir ...`", "",
             f"n = {len(rows)} answered items with a hand label ({sum(r[0] for r in rows)} faithful). Yes = grounded / "
             "faithful; kappa with a 95% bootstrap interval over answers (1,000 resamples, seeded).", "",
             "| check | Cohen's kappa [95%] | accuracy | unfaithful flagged | faithful flagged (wrongly) |",
             "|---|---|---|---|---|"]
    for name, verdict in checks.items():
        def kappa(sample, verdict=verdict):
            return cohen_kappa([verdict(r) for r in sample], [r[0] for r in sample])
        k, ci = kappa(rows), bootstrap(rows, kappa)
        acc = sum(verdict(r) == r[0] for r in rows) / len(rows)
        caught = sum(not verdict(r) and not r[0] for r in rows)
        wrong = sum(not verdict(r) and r[0] for r in rows)
        lines.append(f"| {name} | {k:.2f} [{ci[0]:.2f}, {ci[1]:.2f}] | {acc:.0%} | {caught} of {sum(not r[0] for r in rows)} "
                     f"| {wrong} of {sum(r[0] for r in rows)} |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
