"""The on-disk layout of an eval run, and safe reads/writes of it.

A run lives in one directory, by default ``sieve_home()/runs/<config>-<golden hash>/``::

    run.json        what this run is: config name, golden hash, the settings that shape results
    results.jsonl   one record per finished item, appended (and fsynced) as it finishes
    summary.json    rag.agent_metrics.summarize over the items selected by the last invocation
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag.agent_metrics import summarize
from rag.errors import InputError

RESULTS, SUMMARY, RUN = "results.jsonl", "summary.json", "run.json"


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def golden_hash(path: str | Path) -> str:
    """First 12 hex digits of the SHA-256 of the golden file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]


def default_run_dir(config_name: str, ghash: str, overrides: list[str] | None = None) -> Path:
    """``sieve_home()/runs/<config>-<golden hash>``, plus ``-set<hash>`` when ``--set`` overrides were given."""
    from rag.config import sieve_home

    variant = ""
    if overrides:
        variant = "-set" + hashlib.sha256("\n".join(sorted(overrides)).encode()).hexdigest()[:6]
    return sieve_home() / "runs" / f"{config_name}-{ghash}{variant}"


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically: a temporary file, then rename."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)


def open_run(out_dir: Path, meta: Mapping[str, Any]) -> None:
    """Create ``out_dir`` with its run.json, or check that the run there is the same one (else InputError)."""
    path = out_dir / RUN
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        for key in ("config_name", "golden_hash", "config"):
            if old.get(key) != meta.get(key):
                raise InputError(
                    f"{out_dir} holds a run with a different {key} ({_diff(old.get(key), meta.get(key))}); "
                    f"resume only continues the same config and golden file. Use --out NEW_DIR, or delete {out_dir}")
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(path, {**meta, "created": now()})


def _diff(old: Any, new: Any) -> str:
    """``key: old -> new`` for the keys of two dicts that differ; ``old -> new`` otherwise."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        return ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in keys)
    return f"{old!r} -> {new!r}"


def append_record(out_dir: Path, record: Mapping[str, Any]) -> None:
    """Append one record as one line, flushed and fsynced (the caller serialises writers)."""
    with (out_dir / RESULTS).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_records(out_dir: str | Path) -> list[dict[str, Any]]:
    """All records in ``results.jsonl``; a torn last line (a crash mid-write) is cut off the file."""
    path = Path(out_dir) / RESULTS
    if not path.is_file():
        return []
    records, good = [], 0
    with path.open("rb") as fh:
        for raw in fh:
            try:
                records.append(json.loads(raw))
            except json.JSONDecodeError:
                break
            good += len(raw)
    if good < path.stat().st_size:
        with path.open("rb+") as fh:
            fh.truncate(good)
    return records


def write_summary(out_dir: str | Path, selected: Sequence[Any], *, config_name: str, ghash: str, k: int,
                  max_rewrites: int) -> dict[str, Any]:
    """Summarize the selected items' records into summary.json (atomically) and return it."""
    out_dir = Path(out_dir)
    wanted = [it.id for it in selected]
    by_id = {r["id"]: r for r in read_records(out_dir)}
    records = [by_id[i] for i in wanted if i in by_id]
    summary = {"config_name": config_name, "golden_hash": ghash, "k": k, "max_rewrites": max_rewrites,
               "ids": wanted, "n_selected": len(wanted), "n_done": len(records),
               "complete": len(records) == len(wanted), "updated": now(),
               **summarize([r["scores"] for r in records])}
    write_json(out_dir / SUMMARY, summary)
    return summary
