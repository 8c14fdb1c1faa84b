"""The critic's filters check, or its counts or records check, replayed on finished ``rag eval`` runs of the ops demo
(no model call).

    python benchmarks/critic_filters.py --index-dir $SIEVE_HOME/demo/ops/index \
        --run benchmarks/results/eval-ops-unanswerable6-xeon ... --out benchmarks/results/critic_filters.md
    python benchmarks/critic_filters.py --check counts --index-dir ... --run ... --out benchmarks/results/critic_counts.md
    python benchmarks/critic_filters.py --check records --index-dir ... --run ... --out benchmarks/results/critic_records.md
    python benchmarks/critic_filters.py --check empty --index-dir ... --run ... --out benchmarks/results/critic_empty.md

The check (rag.data.coverage.Coverage.invented, via rag.agent.critique.Critic.off_target) flags an answer whose cited
query keeps rows by a value that neither the question nor the passages shown beside it mention ("Was S00697 shipped
in a temperature-controlled trailer?" counted as ``service_level = 'express' AND hazardous = TRUE``). Per run:
the answers today's default checks leave open (the recorded verdicts, with the citation and columns checks replayed
on runs made before them), those the filters check flags, how many of them an answerable item got right anyway (its
key facts in the answer: a false flag), and the unanswerable items refused or flagged by today's checks and with the
filters check too (McNemar, paired), and those of the runs not marked ``--seen`` (their questions were not in view
when the check was written) pooled. ``--check counts`` measures the counts check (Coverage.uncounted: "how many
pallets" answered by a bare row count of one shipment) the same way, on top of today's checks with the filters check
replayed too; ``--check records`` the records check (Critic.rowless: a question naming a record, or routed to the
data alone, answered citing no query result that returned a row) the same way; ``--check empty`` the empty check
(Critic.empty: an answer to a question whose query found no row, only NULLs or a lone zero) the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.critic_citations import caught, records  # noqa: E402
from benchmarks.critic_columns import cited_queries, replay_command, replay_setup, today  # noqa: E402
from benchmarks.tables import emit, share  # noqa: E402


def shown_passages(record: dict, texts: dict[str, str]) -> str:
    """The text of the passages the answerer was shown (cited or not), read from the index by their ids."""
    p = record.get("prediction") or {}
    return " ".join(texts.get(s["chunk_id"], "") for s in [*(p.get("sources") or []), *(p.get("uncited") or [])]
                    if not s.get("sql"))


def check_flags(check: str, coverage, record: dict, texts: dict[str, str]) -> list[list[str]] | None:
    """Per cited query of ``record``, what ``check`` finds in it; None unless it finds something in every one (the
    records check: what the question names, when the answer cites no query result with a row)."""
    if check == "records":
        return rowless(coverage, record)
    if check == "empty":
        return found_empty(record)
    queries = cited_queries(record)
    if check == "filters":
        found = [coverage.invented(record["question"], q, shown_passages(record, texts)) for q in queries]
    else:
        found = [[why] if (why := coverage.uncounted(record["question"], q)) else [] for q in queries]
    return found if queries and all(found) else None


def found_empty(record: dict) -> list[list[str]] | None:
    """[[why]] when a query the recorded run ran for the question found nothing (rag.agent.critique.found_nothing:
    no row, only NULLs, one row of zeros), cited or not (rag.agent.critique.Critic.empty); None otherwise."""
    from rag.agent.stated import found_nothing

    steps = ((record.get("prediction") or {}).get("trace") or {}).get("steps") or []
    empty = [s["result"]["sql"] for s in steps if s.get("node") == "sql" and s.get("result")
             and not s["result"].get("truncated") and found_nothing(s["result"].get("rows") or [])]
    return [[f"found nothing: {empty[0][:80]}"]] if empty else None


def rowless(coverage, record: dict) -> list[list[str]] | None:
    """[[why]] when the recorded answer to a question naming a record, or routed to the data alone, cites no query
    result that returned a row (rag.agent.critique.Critic.rowless); None otherwise."""
    p = record.get("prediction") or {}
    if any(s.get("rows") for s in p.get("sources") or [] if s.get("sql") and s["chunk_id"] in p.get("citations", [])):
        return None
    named = coverage.records(record["question"])
    routes = [s.get("route") for s in (p.get("trace") or {}).get("steps") or [] if s.get("node") == "route"]
    if not named and routes[:1] != ["data"]:
        return None
    return [[", ".join(named) or "routed to the data alone"]]


def main() -> None:
    from rag.stats.intervals import compare_paired

    args, index, coverage = replay_setup(__doc__, ("filters", "counts", "records", "empty"))
    texts = {c.id: c.text for c in index.chunks}
    check = args.check
    lines = [f"# The critic's {check} check replayed on ops runs (no model call)", "",
             replay_command("critic_filters.py", args), "",
             f"| run | check written with it in view | answered, not flagged by today's checks | the {check} check "
             "flags | of them answerable: key facts right (a false flag) / wrong | unanswerable refused or flagged: "
             f"today's checks -> with the {check} check too |", "| --- | --- | --- | --- | --- | --- |"]
    found: list[str] = []
    pooled: list[list[float]] = [[], []]  # the unanswerable items of the runs not --seen: today's checks, + the check
    for run in args.run:
        recs = records(run)
        hollow, columns = today(recs, coverage)
        before = {k for k, r in recs.items() if caught(r) or k in hollow or k in columns}
        if check != "filters":  # the filters check is on by default: replayed on runs made before it
            before |= {k for k, r in recs.items() if k not in before and check_flags("filters", coverage, r, texts)}
        if check == "empty":  # so is the records check since: replayed on runs made before it too
            before |= {k for k, r in recs.items() if k not in before and check_flags("records", coverage, r, texts)}
        flags = {r["id"]: conditions for r in recs.values() if r["id"] not in before
                 and (conditions := check_flags(check, coverage, r, texts))}
        answerable = [k for k in flags if not recs[k].get("should_refuse")]
        right = [k for k in answerable if ((recs[k].get("scores") or {}).get("data") or {}).get("key_facts_ok")]
        bad = [r for r in recs.values() if r.get("should_refuse")]
        steps = [[float(r["id"] in before) for r in bad], [float(r["id"] in before or r["id"] in flags) for r in bad]]
        if run.name not in args.seen:
            pooled[0] += steps[0]
            pooled[1] += steps[1]
        moved = (" -> ".join(share(int(sum(s)), len(bad)) for s in steps)
                 + f" (p={compare_paired(steps[0], steps[1]).p:.3f})") if bad else "n/a"
        lines.append(f"| `{run.name}` | {'yes' if run.name in args.seen else 'no'} | {len(recs) - len(before)} | "
                     f"{len(flags)} | {len(right)} / {len(answerable) - len(right)} | {moved} |")
        found += [f"- `{run.name}` `{k}` ({'unanswerable' if recs[k].get('should_refuse') else 'answerable'}"
                  f"{', key facts right' if k in right else ''}): {recs[k]['question'][:90]} -> "
                  f"{'; '.join(c for conds in v for c in conds)}" for k, v in flags.items()]
    if pooled[0]:
        lines.append(f"| all runs not seen, pooled | no | | | | {share(int(sum(pooled[0])), len(pooled[0]))} -> "
                     f"{share(int(sum(pooled[1])), len(pooled[1]))} (p={compare_paired(*pooled).p:.3f}) |")
    emit(lines + ["", "Answers the check flags:", "", *found], args.out)


if __name__ == "__main__":
    main()
