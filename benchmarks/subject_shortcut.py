"""The subject shortcut re-read on recorded runs: which grade calls it skips, and what they decided.

    python benchmarks/subject_shortcut.py RUN_DIR [RUN_DIR ...] [--out FILE]     # no LM calls

The agent (``subject_shortcut``, rag.agent.module) rejects a context without a grade call when the subject the grader named
earlier in the same question is in none of its passages (``rag.agent.context.missing_terms``). It is deterministic given
the recorded traces of a run made without it: for every grade step after the first of a question, it would have
been skipped exactly when the subject named before is missing from the passages shown. Per run: those steps, how
many the grader (after the subject guard) rejected anyway (the same decision) and which it accepted (the shortcut
changes them: the grader named another subject that time), and the grade-call seconds they took, which the
shortcut saves. A step it skips leads to a rewrite or the refusal without any other change, so the decisions of
the rest of the question are the run's own wherever the verdict is the same. Choose on dev; a test run is for
reporting.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit  # noqa: E402
from rag.agent.context import missing_terms  # noqa: E402
from rag.eval.runs import read_records  # noqa: E402


def passages(index_dir: Path) -> dict[str, SimpleNamespace]:
    out = {}
    with open(index_dir / "chunks.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            out[d["id"]] = SimpleNamespace(text=d["text"], title=d.get("title") or "")
    return out


def reread(run: Path, chunks: dict[str, SimpleNamespace]) -> tuple[list[str], list[str]]:
    later = same = 0
    saved: list[float] = []
    changed: list[str] = []
    per_item: list[tuple[float, float, bool]] = []  # (seconds as run, without the skipped grade calls, refused)
    for r in read_records(run):
        steps = ((r.get("prediction") or {}).get("trace") or {}).get("steps") or []
        named, skip_s, total_s = None, 0.0, sum(float(s.get("latency_ms") or 0) for s in steps) / 1000
        for st in steps:
            if st["node"] != "grade":
                continue
            if named is not None:
                later += 1
                missing = missing_terms(named, [chunks[i] for i in st.get("shown_ids") or [] if i in chunks])
                if missing:
                    saved.append(float(st.get("latency_ms") or 0) / 1000)
                    skip_s += saved[-1]
                    if st.get("verdict"):
                        changed.append(f"{r['id']} ({r['type']}): named {named!r} before, then {st.get('subject')!r} "
                                       f"and accepted {', '.join(st.get('chosen_ids') or st.get('shown_ids') or [])}")
                    else:
                        same += 1
            named = st.get("subject") or named
        if r.get("prediction"):
            per_item.append((total_s, total_s - skip_s, bool(r["prediction"]["refused"])))
    refused = [t for t in per_item if t[2]]

    def p50s(rows: list[tuple[float, float, bool]]) -> str:
        return f"{statistics.median(a for a, _, _ in rows):.1f} / {statistics.median(b for _, b, _ in rows):.1f}" if rows else "n/a"

    row = (f"| `{run}` | {len(per_item)} | {later} | {len(saved)} | {same} | {len(changed)} | {sum(saved):.0f} | "
           f"{p50s(per_item)} | {p50s(refused)} |")
    return [row], changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--index-dir", type=Path, help="the index the runs used (default: the configured one)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.index_dir is None:
        from rag.config import load_settings

        args.index_dir = load_settings().index_dir
    chunks = passages(args.index_dir)
    lines = ["# The subject shortcut re-read on recorded runs (no LM calls)", "",
             f"`python benchmarks/subject_shortcut.py {' '.join(sys.argv[1:])}`", "",
             "| run | items | grade steps after a question's first | skipped by the shortcut | of them rejected anyway "
             "(same decision) | accepted (decision changes) | grade-call seconds saved | agent seconds per item p50, "
             "as run / without them | the same, refused items |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    notes = []
    for run in args.runs:
        rows, changed = reread(run, chunks)
        lines += rows
        notes += [f"- `{run.name}`: {c}" for c in changed]
    lines += ["", "Decisions the shortcut changes:" if notes else "The shortcut changes no decision in these runs.", "",
              *notes]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
