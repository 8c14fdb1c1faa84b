"""The critic's columns check replayed on finished ``rag eval`` runs of the ops demo (no model call).

    python benchmarks/critic_columns.py --index-dir $SIEVE_HOME/demo/ops/index \
        --run benchmarks/results/eval-ops-unanswerable2-epyc ... --out benchmarks/results/critic_columns.md

The check (rag.data.coverage.Coverage.unasked, via rag.agent.critique.Critic.off_target) flags an answer whose cited
query returns no column the question asks about ("the driver" read from ``carriers.name``). Per run: the answers it
finds among those not already refused or flagged, how many of them an answerable item got right anyway (its key facts
in the answer: a false flag), and the unanswerable items refused or flagged as recorded, with the citation check
(today's pattern, for runs made before it), and with the columns check too (McNemar, paired against the one before).
A run's questions marked ``--seen`` were in view when the check was written; the others were not.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.critic_citations import caught, records  # noqa: E402
from benchmarks.tables import emit, share, shown_path  # noqa: E402


def cited_queries(record: dict) -> list[str]:
    """The statements of the query results the recorded answer cites."""
    p = record.get("prediction") or {}
    return [s["sql"] for s in p.get("sources") or [] if s.get("sql") and s.get("rows") is not None]


def today(recs: dict[str, dict], coverage) -> tuple[set[str], dict[str, list]]:
    """(the ids the citation check finds, the answers the columns check flags with their columns) among ``recs``,
    replayed with today's checks: the columns check only on answers neither recorded as caught nor hollow."""
    from rag.agent.stated import cited_for_values

    hollow = {k for k, r in recs.items() if cited_for_values((r.get("prediction") or {}).get("answer") or "")}
    open_answers = [r for r in recs.values() if not caught(r) and r["id"] not in hollow]
    flags = {r["id"]: cols for r in open_answers
             if (queries := cited_queries(r)) and all(cols := [coverage.unasked(r["question"], q) for q in queries])}
    return hollow, flags


def replay_setup(doc: str, checks: tuple[str, ...] = ()) -> tuple[argparse.Namespace, Any, Any]:
    """The arguments of a replay script (``doc``: its docstring; ``checks``: the ones ``--check`` may name, the
    first the default), the ops index they name, and its coverage."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    if checks:
        parser.add_argument("--check", choices=checks, default=checks[0], help="the check replayed on top of the others")
        parser.set_defaults(default_check=checks[0])  # replay_command leaves the default out of the command line
    parser.add_argument("--index-dir", type=Path, required=True, help="the ops demo's index the runs were made on")
    parser.add_argument("--run", type=Path, action="append", required=True, help="a finished run; repeatable")
    parser.add_argument("--seen", action="append", default=[], help="a run (its folder name) whose questions were in "
                        "view when the check was written; repeatable")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from rag.config import load_settings
    from rag.data import Warehouse
    from rag.data.coverage import Coverage
    from rag.index.store import Index

    index = Index.load(args.index_dir, load_settings({"index_dir": args.index_dir}))
    return args, index, Coverage.for_index(index, Warehouse(index.tables_path))


def replay_command(script: str, args: argparse.Namespace) -> str:
    """The command line that made a replay's output, as its report shows it."""
    return (f"Command: `python benchmarks/{script} --index-dir {shown_path(args.index_dir)} "
            + (f"--check {args.check} " if getattr(args, "check", None) != getattr(args, "default_check", None) else "")
            + " ".join(f"--run {r}" for r in args.run) + "".join(f" --seen {s}" for s in args.seen) + "`")


def main() -> None:
    from rag.stats.intervals import compare_paired

    args, _, coverage = replay_setup(__doc__)
    lines = ["# The critic's columns check replayed on ops runs (no model call)", "",
             replay_command("critic_columns.py", args), "",
             "| run | check written with it in view | answered, not flagged | the columns check flags | of them "
             "answerable: key facts right (a false flag) / wrong | unanswerable refused or flagged: as recorded -> "
             "with the citation check -> with the columns check too |", "| --- | --- | --- | --- | --- | --- |"]
    found: list[str] = []
    for run in args.run:
        recs = records(run)
        hollow, flags = today(recs, coverage)
        open_answers = [r for r in recs.values() if not caught(r) and r["id"] not in hollow]
        answerable = [k for k in flags if not recs[k].get("should_refuse")]
        right = [k for k in answerable if ((recs[k].get("scores") or {}).get("data") or {}).get("key_facts_ok")]
        bad = [r for r in recs.values() if r.get("should_refuse")]
        steps = [[float(caught(r)) for r in bad], [float(caught(r) or r["id"] in hollow) for r in bad],
                 [float(caught(r) or r["id"] in hollow or r["id"] in flags) for r in bad]]
        moved = (" -> ".join(share(int(sum(s)), len(bad)) for s in steps)
                 + f" (p={compare_paired(steps[1], steps[2]).p:.3f})") if bad else "n/a"
        lines.append(f"| `{run.name}` | {'yes' if run.name in args.seen else 'no'} | {len(open_answers)} | "
                     f"{len(flags)} | {len(right)} / {len(answerable) - len(right)} | {moved} |")
        found += [f"- `{run.name}` `{k}` ({'unanswerable' if recs[k].get('should_refuse') else 'answerable'}): "
                  f"{recs[k]['question'][:90]} -> {'; '.join(c for cols in v for c in cols)}" for k, v in flags.items()]
    emit(lines + ["", "Answers the check flags:", "", *found], args.out)


if __name__ == "__main__":
    main()
