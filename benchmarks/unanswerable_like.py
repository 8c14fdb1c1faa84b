"""Questions like ones labelled unanswerable, flagged (rag.agent.lookalike): what it adds to recorded runs, and what
it costs on answerable questions.

    python benchmarks/unanswerable_like.py --index-dir $SIEVE_HOME/demo/ops/index \
        --learn golden/ops_unanswerable.jsonl:all-blind18,blind19,blind20 golden/ops_routes.jsonl:all \
        --unanswerable golden/ops_unanswerable.jsonl:blind18,blind19,blind20 \
        --runs benchmarks/results/eval-ops-unanswerable18-xeon benchmarks/results/eval-ops-unanswerable19-xeon \
        --answerable golden/ops_routes.jsonl:twentyfourth --out benchmarks/results/unanswerable_like_dev.md

No model call. ``FILE:SPLITS`` names a golden file's splits: ``a,b``, ``all``, or ``all-a,b`` (every split but
those). The flag is fitted, as ``unanswerable_labels`` fits it in the agent, from the ``--learn`` items (their
should_refuse says which kind). On the ``--unanswerable`` questions, refused-or-flagged before is what the recorded
``rag eval`` runs (``--runs``, matched by question) did; after, that or the flag, which depends on the question
alone and only adds; paired exact McNemar, also without the questions that repeat a learned unanswerable one
(benchmarks/router_learned.repeating). On the ``--answerable`` questions: how many it flags (each flag is a
low_confidence on an answer the sources hold). The flagged questions are listed with the labelled question they
are like.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.router_learned import repeating  # noqa: E402
from benchmarks.tables import emit, share  # noqa: E402
from rag.stats.intervals import compare_paired  # noqa: E402


def selected(spec: str) -> list:
    """The golden items of ``FILE:SPLITS`` (module docstring)."""
    from rag.eval.golden import load_golden

    file, _, splits = spec.partition(":")
    items = load_golden(ROOT / file if not Path(file).is_absolute() else file)
    if not splits or splits == "all":
        return items
    if splits.startswith("all-"):
        left_out = set(splits[4:].split(","))
        return [i for i in items if i.split not in left_out]
    return [i for i in items if i.split in set(splits.split(","))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index-dir", type=Path, required=True, help="the ops demo's index (rag demo ops)")
    parser.add_argument("--learn", nargs="+", required=True, help="FILE:SPLITS learned from")
    parser.add_argument("--unanswerable", nargs="*", default=[], help="FILE:SPLITS of unanswerable questions")
    parser.add_argument("--runs", nargs="*", default=[], help="recorded rag eval runs over --unanswerable")
    parser.add_argument("--answerable", nargs="*", default=[], help="FILE:SPLITS of answerable questions")
    parser.add_argument("--margin", type=float, default=0.05, help="unanswerable_margin")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from rag.agent.lookalike import Lookalikes
    from rag.config import load_settings
    from rag.index.store import Index

    index = Index.load(args.index_dir, load_settings({"index_dir": args.index_dir}))
    encode = index.query_encoder.encode
    learned = [i for spec in args.learn for i in selected(spec)]
    no = [i for i in learned if i.should_refuse]
    yes = [i.question for i in learned if not i.should_refuse]
    flagger = Lookalikes.from_questions([i.question for i in no], yes, encode, args.margin, "the labels")
    caught: dict[str, bool] = {}
    for run in args.runs:
        for line in (Path(run) / "results.jsonl").read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            p = r.get("prediction") or {}
            caught[r["question"]] = bool(p.get("refused") or p.get("low_confidence"))

    command = " ".join(["python benchmarks/unanswerable_like.py --index-dir $SIEVE_HOME/demo/ops/index",
                        "--learn", *args.learn, *(["--unanswerable", *args.unanswerable] if args.unanswerable else []),
                        *(["--runs", *args.runs] if args.runs else []),
                        *(["--answerable", *args.answerable] if args.answerable else []),
                        *([f"--margin {args.margin:g}"] if args.margin != 0.05 else []),
                        *([f"--out {args.out.as_posix()}"] if args.out else [])])
    lines = ["# Questions like ones labelled unanswerable, flagged", "", f"Command: `{command}`", "",
             f"Learned from {len(no)} unanswerable and {len(yes)} answerable labelled questions; "
             f"unanswerable_margin {args.margin:g}. No model call.", ""]
    listed: list[str] = []
    if args.unanswerable:
        items = [i for spec in args.unanswerable for i in selected(spec)]
        missing = [i.id for i in items if i.question not in caught]
        if missing:
            raise SystemExit(f"no recorded run holds {len(missing)} of the questions, e.g. {missing[0]}; give --runs")
        repeats = repeating(items, no)
        lines += ["| unanswerable questions | n | refused or flagged, recorded | with the flag | new catches | "
                  "paired (McNemar) |", "|---|---|---|---|---|---|"]
        for name, chosen in ((", ".join(args.unanswerable), items),
                             (f"without the {len(repeats)} that repeat a learned unanswerable question",
                              [i for i in items if i.id not in repeats])):
            before = [caught[i.question] for i in chosen]
            reasons = [flagger.like(i.question) for i in chosen]
            after = [b or bool(r) for b, r in zip(before, reasons)]
            c = compare_paired([float(x) for x in before], [float(x) for x in after], "recorded", "flagged")
            lines.append(f"| {name} | {len(chosen)} | {share(sum(before), len(chosen))} | "
                         f"{share(sum(after), len(chosen))} | {c.only_b} | {c.only_a} worse, {c.only_b} better, "
                         f"p={c.p:.4f} |")
            if chosen is items:
                listed += ["", "New catches (the recorded run answered unflagged):", ""]
                listed += [f"- `{i.id}`{' (repeat)' if i.id in repeats else ''}: {i.question} -- {r}"
                           for i, b, r in zip(chosen, before, reasons) if r and not b]
        lines.append("")
    if args.answerable:
        lines += ["| answerable questions | n | flagged |", "|---|---|---|"]
        every = []
        for spec in args.answerable:
            chosen = selected(spec)
            reasons = [flagger.like(i.question) for i in chosen]
            every += [(i, r) for i, r in zip(chosen, reasons)]
            lines.append(f"| {spec} | {len(chosen)} | {share(sum(bool(r) for r in reasons), len(chosen))} |")
        if len(args.answerable) > 1:
            lines.append(f"| **together** | {len(every)} | {share(sum(bool(r) for _, r in every), len(every))} |")
        listed += ["", "Answerable questions flagged:", ""] + [f"- `{i.id}`: {i.question} -- {r}" for i, r in every if r]
    emit(lines + listed, args.out)


if __name__ == "__main__":
    main()
