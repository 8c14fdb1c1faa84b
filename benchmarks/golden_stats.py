"""Print the counts of a golden-set JSONL file per type x split (a Markdown table) plus coverage facts.

Usage (from the repository root)::

    python benchmarks/golden_stats.py                      # golden/python_ref.jsonl
    python benchmarks/golden_stats.py path/to/other.jsonl

The table in ``golden/README.md`` is this script's output. It needs only the standard library.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

TYPES = ("answerable", "vague", "unanswerable")
SPLITS = ("train", "dev", "test")
DEFAULT = Path(__file__).resolve().parents[1] / "golden" / "python_ref.jsonl"


def load(path: Path) -> list[dict]:
    """Read one JSON object per non-blank line; exit with the line number on bad JSON."""
    rows = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                sys.exit(f"{path}:{lineno}: invalid JSON ({exc}); fix or remove the line")
    return rows


def table(rows: list[dict]) -> str:
    """Markdown table of item counts per type (rows) and split (columns), with totals."""
    counts = Counter((r.get("type"), r.get("split")) for r in rows)
    lines = ["| type | " + " | ".join(SPLITS) + " | total |", "|---|" + "---:|" * (len(SPLITS) + 1)]
    for kind in TYPES:
        cells = [counts[kind, s] for s in SPLITS]
        lines.append(f"| {kind} | " + " | ".join(map(str, cells)) + f" | {sum(cells)} |")
    totals = [sum(counts[k, s] for k in TYPES) for s in SPLITS]
    lines.append("| **all** | " + " | ".join(map(str, totals)) + f" | {sum(totals)} |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    path = Path(argv[0]) if argv else DEFAULT
    rows = load(path)
    print(table(rows))
    topics = Counter(t for r in rows for t in r.get("relevant_topics", []))
    evidence = [e for r in rows for e in r.get("evidence", [])]
    words = sorted(len(e.split()) for e in evidence)
    print(f"\n{len(rows)} items; {len(topics)} distinct relevant topics; {len(evidence)} evidence strings "
          f"({words[0]}-{words[-1]} words, median {words[len(words) // 2]})" if words else f"\n{len(rows)} items")


if __name__ == "__main__":
    main(sys.argv[1:])
