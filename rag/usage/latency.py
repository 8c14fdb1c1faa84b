"""Originally measured latency of LM steps, so a cache hit is charged what the call really cost.

A served-from-cache step takes milliseconds; an ops table built from that would flatter every rerun.
``LatencyLedger`` remembers the latency of each uncached LM step under a fingerprint of what shaped its
prompt (node, model, question, query, shown chunk ids), and stamps ``original_latency_ms`` on cached
steps with the same fingerprint. rag.eval.agent_metrics charges that value and counts the step as cached.
The ledger is a JSONL file next to the DSPy cache (``<cache_dir>/latency_ledger.jsonl``).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from rag.ingest.jsonl import split_lines

LM_NODES = ("condense", "route", "grade", "rewrite", "sql", "answer", "critique")  # nodes that call an LM


def fingerprint(question: str, step: Mapping[str, Any]) -> str:
    parts = [step["node"], step.get("model"), question, step.get("query"), list(step.get("shown_ids") or [])]
    return hashlib.sha1(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()


class LatencyLedger:
    """``apply(question, steps)`` records uncached LM steps and stamps cached ones (thread-safe)."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else None
        self.known: dict[str, float] = {}
        self._lock = threading.Lock()
        if self.path and self.path.is_file():
            for line in split_lines(self.path.read_text(encoding="utf-8")):
                try:
                    row = json.loads(line)
                    self.known[row["key"]] = float(row["latency_ms"])
                except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                    continue  # a torn or foreign line: ignore it, the ledger is only an aid

    def apply(self, question: str, steps: Sequence[MutableMapping[str, Any]]) -> None:
        new: list[tuple[str, float]] = []
        with self._lock:
            for step in steps:
                if step["node"] not in LM_NODES or not step.get("model"):
                    continue
                key = fingerprint(question, step)
                if step.get("cached"):
                    if key in self.known:
                        step["original_latency_ms"] = self.known[key]
                elif key not in self.known:
                    self.known[key] = float(step.get("latency_ms") or 0.0)
                    new.append((key, self.known[key]))
            if new and self.path:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.writelines(json.dumps({"key": k, "latency_ms": v}) + "\n" for k, v in new)
