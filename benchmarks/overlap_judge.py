"""Reference overlap (token F1, no model) against the embedded LM judge, both scored against human labels.

Run: python benchmarks/overlap_judge.py [--dev RUN ...] [--test RUN ...] [--out FILE]

Every labelled answer (``golden/judge_labels.jsonl``) of an answerable or vague item in the given runs counts:
its human "correct" label against (a) the overlap rule, token F1 with the reference answer >= t (rag.eval.overlap),
and (b) the LM judge's verdict stored in the run, where the run was judged. The threshold t is chosen on the dev
runs only (the value with the highest Cohen's kappa; the lowest such value on ties) and then applied unchanged to
the test runs, which are only reported. Intervals: 1,000 bootstrap resamples of the answers (seeded).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit  # noqa: E402
from rag.eval.calibrate import cohen_kappa, labelled_answers, load_labels  # noqa: E402
from rag.eval.overlap import F1_CORRECT, token_f1  # noqa: E402
from rag.eval.runs import read_records  # noqa: E402
from rag.stats.intervals import bootstrap  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
DEV_RUNS = [RESULTS / "dev-answer-context" / name for name in ("graded", "accepted", "graded-gpc600")]
TEST_RUNS = [RESULTS / name for name in ("eval-full-qwen1.5b-graded", "eval-full-qwen1.5b", "eval-baseline-qwen1.5b")]


def labelled(runs: list[Path], labels: list[dict]) -> list[dict]:
    """One row per labelled answer of an answerable item: F1, the human label, the judge's verdict (or None)."""
    rows = []
    for run in runs:
        for r, lab in labelled_answers(read_records(run), labels):
            if lab is None:
                continue
            judge = r.get("judge") if isinstance(r.get("judge"), dict) and "error" not in r["judge"] else None
            reference = r.get("reference_answer") or lab.get("reference_answer") or ""
            rows.append({"f1": token_f1(r["prediction"]["answer"], reference), "human": bool(lab["correct"]),
                         "judge": None if judge is None else bool(judge["correct"]), "run": run.name})
    return rows


def agreement(pairs: list[tuple[bool, bool]]) -> str:
    if not pairs:
        return "—"
    acc = sum(a == b for a, b in pairs) / len(pairs)
    kappa = cohen_kappa([a for a, _ in pairs], [b for _, b in pairs])
    ci = bootstrap(pairs, lambda s: cohen_kappa([a for a, _ in s], [b for _, b in s]))
    ci_text = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
    kappa_text = "undefined" if kappa is None else f"{kappa:.2f}{ci_text}"
    return f"{acc:.1%} / {kappa_text} (n={len(pairs)}, rule yes {sum(a for a, _ in pairs)}, human yes {sum(b for _, b in pairs)})"


def best_threshold(rows: list[dict]) -> float:
    def kappa_at(t: float) -> float:
        return cohen_kappa([r["f1"] >= t for r in rows], [r["human"] for r in rows]) or -1.0
    candidates = sorted({round(r["f1"], 2) for r in rows} | {0.0})
    return max(candidates, key=lambda t: (kappa_at(t), -t))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", type=Path, nargs="+", default=DEV_RUNS)
    parser.add_argument("--test", type=Path, nargs="+", default=TEST_RUNS)
    parser.add_argument("--labels", type=Path, default=ROOT / "golden" / "judge_labels.jsonl")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    labels = load_labels(args.labels)
    dev, test = labelled(args.dev, labels), labelled(args.test, labels)
    chosen = best_threshold(dev)
    lines = ["# Reference overlap against the LM judge, scored against human labels", "",
             f"Command: `python benchmarks/overlap_judge.py` (defaults: the committed runs below), labels from "
             f"`{args.labels.relative_to(ROOT) if args.labels.is_relative_to(ROOT) else args.labels}` "
             f"({len(labels)} labels, every run). Only answers of answerable or vague items count.", "",
             f"Threshold chosen on dev: token F1 >= {chosen:.2f} (rag.eval.overlap.F1_CORRECT = {F1_CORRECT}).", "",
             "| split | answers | overlap rule: accuracy / Cohen's kappa [95% interval] | LM judge on the answers it judged | "
             "overlap rule on those same answers |", "| --- | --- | --- | --- | --- |"]
    for name, rows, runs in (("dev (selection)", dev, args.dev), ("test (report)", test, args.test)):
        judged = [r for r in rows if r["judge"] is not None]
        lines.append(f"| {name} | {len(rows)} from {', '.join(run.name for run in runs)} | "
                     f"{agreement([(r['f1'] >= chosen, r['human']) for r in rows])} | "
                     f"{agreement([(r['judge'], r['human']) for r in judged])} | "
                     f"{agreement([(r['f1'] >= chosen, r['human']) for r in judged])} |")
    if round(chosen, 2) != F1_CORRECT:
        lines += ["", f"NOTE: rag.eval.overlap.F1_CORRECT ({F1_CORRECT}) is not the threshold these dev runs choose; "
                  "the harness uses F1_CORRECT."]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
