"""Did a compiled grader copy its demo? Counts grade calls whose subject is a grader demo's subject on questions
that do not mention it, and the refusals that followed. No LM calls: it re-reads recorded runs.

Run: python benchmarks/demo_leak.py RUN_DIR [RUN_DIR ...] [--artifact qwen1.5b-bootstrap]
                                    [--out benchmarks/results/demo_leak.md]

The demo subjects are read from the artifact's ``program.json`` (the ``grade`` predictor's demos). A run made
without the artifact is the control: its grader never saw the demo, so any copy there is chance.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit  # noqa: E402
from rag.eval.runs import read_records  # noqa: E402


def grade_demos(artifact: str) -> list[dict]:
    """The compiled grader's demos in ``artifacts/<artifact>/program.json`` (its ``grade`` predictor's)."""
    path = ROOT / "artifacts" / artifact / "program.json"
    if not path.is_file():
        raise SystemExit(f"{path} does not exist; name a folder under artifacts/ (rag artifacts lists them)")
    demos = (json.loads(path.read_text()).get("grade") or {}).get("demos") or []
    if not demos:
        raise SystemExit(f"{path} holds no grader demos")
    return demos


def demo_subjects(demos: list[dict]) -> set[str]:
    return {str(d.get("subject", "")).strip().lower() for d in demos if d.get("subject")}


def copies_demo(subject: str | None, question: str, subjects: set[str]) -> bool:
    """The grader named a demo's subject on a question that mentions none of them."""
    question = question.lower()
    return (subject or "").strip().lower() in subjects and not any(sub in question for sub in subjects)


def leak_row(run: Path, subjects: set[str]) -> list[str]:
    calls = copied = 0
    items = {"answerable": [0, 0, 0], "unanswerable": [0, 0, 0]}  # items, items with a copy, refused after a copy
    for rec in read_records(run):
        pred = rec.get("prediction") or {}
        steps = [s for s in (pred.get("trace") or {}).get("steps", []) if s.get("node") == "grade" and s.get("tokens_in")]
        leaked = [s for s in steps if copies_demo(s.get("subject"), rec["question"], subjects)]
        calls, copied = calls + len(steps), copied + len(leaked)
        kind = items["unanswerable" if rec.get("should_refuse") else "answerable"]
        kind[0] += 1
        kind[1] += bool(leaked)
        kind[2] += bool(leaked) and bool(pred.get("refused"))
    ans, una = items["answerable"], items["unanswerable"]
    return [run.name, str(calls), f"{copied} ({copied / calls:.0%})" if calls else "0",
            f"{ans[1]} of {ans[0]}", str(ans[2]), f"{una[1]} of {una[0]}", str(una[2])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--artifact", default="qwen1.5b-bootstrap", help="a folder name under artifacts/")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    subjects = demo_subjects(grade_demos(args.artifact))
    if not subjects:
        raise SystemExit(f"artifacts/{args.artifact}/program.json has no grader demo with a subject")
    lines = [f"Grader demo subjects of `artifacts/{args.artifact}`: {', '.join(sorted(subjects))} "
             f"(`python benchmarks/demo_leak.py {' '.join(str(r) for r in args.runs)} --artifact {args.artifact}`)", "",
             "| run | grade calls | naming a demo subject the question lacks | answerable items with such a call | "
             "... then refused | unanswerable items with such a call | ... then refused |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    lines += ["| " + " | ".join(leak_row(run, subjects)) + " |" for run in args.runs]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
