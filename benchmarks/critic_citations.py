"""The critic's citation check replayed on finished ``rag eval`` runs of the ops demo (no model call).

    python benchmarks/critic_citations.py --run benchmarks/results/eval-ops-unanswerable2-epyc \
        --run benchmarks/results/eval-ops-sqlblind2-default ... --out benchmarks/results/critic_citations.md

The check (rag.agent.critique.cited_for_values) finds an answer that puts a citation where its value belongs
("The credit limit is [sql:1]."); such an answer is returned flagged ``low_confidence``. Per run made without the
check (``critic_checks = "numbers"``): the answers it finds, how many of them an answerable item got right anyway
(its key facts in the answer: a flag there would be false), and the unanswerable items refused or flagged as
recorded and with the check (McNemar, paired). ``--revised BASE=RUN`` adds a run of the same items made with the
check in its first form, which wrote a flagged answer again with the reason: how often the answer written again
stated a value, and how often it was still flagged.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit, share  # noqa: E402


def records(run: Path) -> dict[str, dict]:
    from rag.eval.runs import read_records

    return {r["id"]: r for r in read_records(run)}


def caught(record: dict) -> bool:
    p = record.get("prediction") or {}
    return bool(p.get("refused") or p.get("low_confidence"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, action="append", required=True, help="a run without the check; repeatable")
    parser.add_argument("--revised", action="append", default=[], metavar="BASE=RUN",
                        help="BASE (one of --run) made again with the check writing flagged answers again")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from rag.agent.stated import cited_for_values
    from rag.stats.intervals import compare_paired

    lines = ["# The critic's citation check replayed on ops runs made without it (no model call)", "",
             "Command: `python benchmarks/critic_citations.py " + " ".join(f"--run {r}" for r in args.run)
             + "".join(f" --revised {r}" for r in args.revised) + "`", "",
             "| run | items | answered, not flagged | a citation where the value belongs | of them, key facts right "
             "(a false flag) | unanswerable refused or flagged: as recorded -> with the check |",
             "| --- | --- | --- | --- | --- | --- |"]
    found: list[str] = []
    for run in args.run:
        recs = records(run)
        open_answers = [r for r in recs.values() if not caught(r)]
        hollow = {r["id"]: cited_for_values((r.get("prediction") or {}).get("answer") or "") for r in open_answers}
        hollow = {k: v for k, v in hollow.items() if v}
        right = [k for k in hollow if ((recs[k].get("scores") or {}).get("data") or {}).get("key_facts_ok")]
        bad = [r for r in recs.values() if r.get("should_refuse")]
        before = [float(caught(r)) for r in bad]
        after = [float(caught(r) or r["id"] in hollow) for r in bad]
        moved = (f"{share(int(sum(before)), len(bad))} -> {share(int(sum(after)), len(bad))} "
                 f"(p={compare_paired(before, after).p:.3f})") if bad else "n/a"
        answerable_hollow = [k for k in hollow if not recs[k].get("should_refuse")]
        lines.append(f"| `{run.name}` | {len(recs)} | {len(open_answers)} | {len(hollow)} | "
                     f"{len(right)} of {len(answerable_hollow)} answerable | {moved} |")
        found += [f"- `{run.name}` `{k}` ({'unanswerable' if recs[k].get('should_refuse') else 'answerable'}): "
                  f"{'; '.join(v)}" for k, v in hollow.items()]
    if args.revised:
        lines += ["", "## Written again with the reason (the check's first form)", "",
                  "| run | flagged answers written again | the answer written again | no citation in the value's "
                  "place any more | still flagged | key facts right after |", "| --- | --- | --- | --- | --- | --- |"]
        for pair in args.revised:
            base, _, again = pair.partition("=")
            a, b = records(Path(base)), records(Path(again))
            first = {k for k, r in a.items() if not caught(r)
                     and cited_for_values((r.get("prediction") or {}).get("answer") or "")}
            still = [k for k in first if b[k]["prediction"].get("low_confidence")]
            stated = [k for k in first if not b[k]["prediction"].get("low_confidence")
                      and not cited_for_values(b[k]["prediction"].get("answer") or "")]
            fixed = [k for k in first if ((b[k].get("scores") or {}).get("data") or {}).get("key_facts_ok")]
            echoed = [k for k in first if "reviewer" in (b[k]["prediction"].get("answer") or "").lower()]
            lines.append(f"| `{Path(again).name}` | {len(first)} | {len(echoed)} of them echo the reason "
                         f"(\"The reviewer found ...\") | {len(stated)} | {len(still)} | {len(fixed)} |")
    emit(lines + ["", "Answers the check finds:", "", *found], args.out)


if __name__ == "__main__":
    main()
