"""The critic's ``fill`` step replayed on finished ``rag eval`` runs of the ops demo (no model call).

    python benchmarks/critic_fill.py --index-dir $SIEVE_HOME/demo/ops/index \
        --run benchmarks/results/eval-ops-sqlblind14-xeon --run benchmarks/results/eval-ops-unanswerable14-xeon \
        --out benchmarks/results/critic_fill.md

The embedded model often cites a query result where its value belongs ("For each reason, the share rejected is
[sql:1]."); the ``citations`` check flags such an answer. With ``fill`` (rag.agent.critique.Critic.fill) the cited
result's rows, when it has 1 to FILL_ROWS of them, are written out in front of the citation, and the answer goes on
still flagged: the check judges the answer as the model wrote it. Per run, paired over its items: answerable items
with their key facts in the answer as the model wrote it (a run made with ``fill`` keeps that in its answer step's
note) and in the filled answer, and unanswerable items refused or flagged (the same by construction, shown as a
check).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.critic_citations import caught, records  # noqa: E402
from benchmarks.critic_columns import replay_command, replay_setup  # noqa: E402
from benchmarks.tables import emit, share  # noqa: E402

WRITTEN = re.compile(r"written out from the result's rows \(no model call\); as the model wrote it: (.*)", re.S)


def as_written(record: dict) -> str:
    """The recorded answer as the model wrote it: from its answer step's note when the run filled it live."""
    p = record.get("prediction") or {}
    for step in (p.get("trace") or {}).get("steps") or []:
        for note in step.get("notes") or []:
            if m := WRITTEN.search(note):
                return m.group(1)
    return p.get("answer") or ""


def filled(critic, record: dict) -> str:
    """The recorded answer as the model wrote it, with the rows of each query result it cites where the value belongs
    written out (Critic.fill)."""
    from rag.agent.trace import Step, Trace

    p = record.get("prediction") or {}
    trace = Trace(question=record["question"])
    trace.add(Step(node="answer"))
    hits = [SimpleNamespace(chunk_id=s["chunk_id"], meta={k: s[k] for k in ("sql", "columns", "rows", "truncated") if k in s})
            for s in [*(p.get("sources") or []), *(p.get("uncited") or [])]]
    return critic.fill(as_written(record), hits, trace)


def main() -> None:
    from rag.agent.critique import Critic
    from rag.eval.data_metrics import _norm
    from rag.stats.intervals import compare_paired

    args, _, coverage = replay_setup(__doc__)
    critic = Critic(checks="citations+fill", coverage=coverage)
    lines = ["# The critic's fill step replayed on ops runs (no model call)", "", replay_command("critic_fill.py", args),
             "", "| run | answers filled | answerable: key facts right, as written -> filled | unanswerable: refused or "
             "flagged, as written -> filled |", "| --- | --- | --- | --- |"]
    found: list[str] = []
    pooled: dict[str, list[list[float]]] = {"right": [[], []], "caught": [[], []]}
    for run in args.run:
        rows: dict[str, list[list[float]]] = {"right": [[], []], "caught": [[], []]}
        n = 0
        for k, r in records(run).items():
            p = r.get("prediction") or {}
            written, answer = as_written(r), filled(critic, r)
            facts = [str(f) for f in (r.get("data_gold") or {}).get("key_facts") or []]
            if answer != written:
                n += 1
                found.append(f"- `{run.name}` `{k}`: {written[:160]!r} -> {answer[:240]!r}")
            if r.get("should_refuse"):  # the flag is judged on the answer as written: the same either way
                rows["caught"][0].append(float(caught(r)))
                rows["caught"][1].append(float(caught(r)))
            elif facts:
                for i, text in enumerate((written, answer)):
                    rows["right"][i].append(float(not p.get("refused") and all(_norm(f) in _norm(text) for f in facts)))
        for key, (a, b) in rows.items():
            pooled[key][0] += a
            pooled[key][1] += b
        lines.append(f"| `{run.name}` | {n} | {_paired(rows['right'], compare_paired)} | "
                     f"{_paired(rows['caught'], compare_paired)} |")
    lines.append(f"| **pooled** | | {_paired(pooled['right'], compare_paired)} | {_paired(pooled['caught'], compare_paired)} |")
    emit(lines + ["", "Answers filled (as the model wrote them -> filled):", "", *found], args.out)


def _paired(pair: list[list[float]], compare) -> str:
    a, b = pair
    if not a:
        return "n/a"
    worse = sum(1 for x, y in zip(a, b) if x > y)
    return (f"{share(int(sum(a)), len(a))} -> {share(int(sum(b)), len(b))} "
            f"({sum(1 for x, y in zip(a, b) if y > x)} better, {worse} worse, p={compare(a, b).p:.3f})")


if __name__ == "__main__":
    main()
