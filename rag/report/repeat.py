"""``rag eval --repeat N``: the same evaluation N times with the LM cache off, and the spread of every metric.

Each repeat is an ordinary run folder (``<run dir>-repeat/repeat-<i>``, or ``--out DIR/repeat-<i>``), so it
resumes like any run and ``rag report`` reads it. The spread shows run-to-run variance: how much a metric
moves when nothing but the models' sampling changes. With deterministic decoding (the embedded model) it is 0.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any


def repeat_dirs(base: Path, n: int) -> list[Path]:
    return [Path(base) / f"repeat-{i}" for i in range(1, n + 1)]


def spread(summaries: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per metric: the value in each repeat, and mean, sample standard deviation, min and max of those computed."""
    names = list(summaries[0]["metrics"]) if summaries else []
    out = {}
    for name in names:
        values = [s["metrics"].get(name) for s in summaries]
        xs = [v for v in values if v is not None]
        mean = sum(xs) / len(xs) if xs else None
        sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else None
        out[name] = {"values": values, "n": len(xs), "mean": mean, "sd": sd,
                     "min": min(xs) if xs else None, "max": max(xs) if xs else None}
    return out


def render(table: Mapping[str, Mapping[str, Any]], rows: Sequence[tuple[str, str, str]], k: Any) -> str:
    """Plain text: one line per metric (rag.report.markdown.ROWS order) with mean, sd, min-max and each repeat's value."""
    from rag.report.markdown import fmt

    width = max(len(label) for _, label, _ in rows)
    lines = [f"{'metric':<{width}}  {'mean':>10}  {'sd':>10}  {'min - max':>21}  per repeat"]
    for key, label, kind in rows:
        s = table.get(key)
        if s is None:
            continue
        cells = [fmt(s["mean"], kind), fmt(s["sd"], kind) if s["sd"] is not None else "—",
                 f"{fmt(s['min'], kind)} - {fmt(s['max'], kind)}" if s["n"] else "—"]
        each = ", ".join(fmt(v, kind) if v is not None else "—" for v in s["values"])
        lines.append(f"{label.replace('@k', f'@{k}'):<{width}}  {cells[0]:>10}  {cells[1]:>10}  {cells[2]:>21}  {each}")
    return "\n".join(lines)


def run_repeats(n: int, run_one: Callable[[Path], Mapping[str, Any]], base: Path, *, json_out: bool = False,
                gate: Callable[[Mapping[str, Any]], int] | None = None) -> int:
    """Run ``run_one(dir)`` for each repeat folder, print the spread; exit code 1 when ``gate`` fails any repeat."""
    from rag.report.markdown import ROWS

    if n < 1:
        from rag.errors import InputError

        raise InputError(f"--repeat must be at least 1, got {n}")
    summaries = []
    for i, folder in enumerate(repeat_dirs(base, n), 1):
        print(f"repeat {i} of {n}: {folder}", file=sys.stderr)
        summaries.append(run_one(folder))
    table = spread(summaries)
    if json_out:
        print(json.dumps({"repeats": n, "run_dirs": [str(d) for d in repeat_dirs(base, n)], "spread": table}, indent=2))
    else:
        print(f"{summaries[0]['config_name']}: {n} repeats (LM cache off), {summaries[0]['n_done']} items each")
        print(render(table, ROWS, summaries[0].get("k")))
    print(f"results: {base}/repeat-1 .. repeat-{n}", file=sys.stderr)
    return max((gate(s) for s in summaries), default=0) if gate else 0
