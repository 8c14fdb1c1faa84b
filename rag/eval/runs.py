"""The on-disk layout of an eval run, and safe reads/writes of it.

A run lives in one directory, by default ``sieve_home()/runs/<config>-<golden hash>/``::

    run.json        what this run is: config name, golden hash, the settings that shape results
    results.jsonl   one record per finished item, appended (and fsynced) as it finishes
    summary.json    rag.eval.agent_metrics.summarize over the items selected by the last invocation
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import shutil
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag.errors import InputError
from rag.eval.agent_metrics import summarize

RESULTS, SUMMARY, RUN = "results.jsonl", "summary.json", "run.json"


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def golden_hash(path: str | Path) -> str:
    """First 12 hex digits of the SHA-256 of the golden file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]


def default_run_dir(config_name: str, ghash: str, overrides: list[str] | None = None) -> Path:
    """``sieve_home()/runs/<config>-<golden hash>``, plus ``-set<hash>`` when ``--set`` overrides were given."""
    from rag.paths import sieve_home

    variant = ""
    if overrides:
        variant = "-set" + hashlib.sha256("\n".join(sorted(overrides)).encode()).hexdigest()[:6]
    return sieve_home() / "runs" / f"{config_name}-{ghash}{variant}"


def names_apart(names: Sequence[str], dirs: Sequence[Path]) -> list[str]:
    """Run names that tell two runs of one config apart: "full (eval-full-a)", "full (eval-full-b)"; a run without a
    name is named after its folder."""
    return [(f"{n} ({Path(d).name})" if n else Path(d).name) if names.count(n) > 1 else n for n, d in zip(names, dirs)]


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically: a temporary file, then rename."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)


def check_run_folder(out_dir: Path) -> None:
    """``--out`` must be a new or empty folder, or a Sieve run (its run.json or results.jsonl, or the repeat-N
    folders of ``--repeat``): a run never writes into, or over the summary.json of, any other folder."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir} is a file, not a run folder; give --out a folder")
    if not out_dir.is_dir():
        return
    entries = sorted(p.name for p in out_dir.iterdir())
    if not entries or RUN in entries or RESULTS in entries or all(re.fullmatch(r"repeat-\d+", e) for e in entries):
        return
    shown = ", ".join(entries[:4]) + (f" and {len(entries) - 4} more" if len(entries) > 4 else "")
    raise InputError(f"{out_dir} is neither empty nor a Sieve run (it holds {shown}); rag eval would write "
                     f"{RUN}, {RESULTS} and {SUMMARY} there. Give --out a new or empty folder")


def protected_by(path: Path) -> str | None:
    """What ``path`` belongs to when it is an existing file of a run, an index or an artifact (which a report or
    any other output must not overwrite), else None."""
    path = Path(path)
    if not path.exists():
        return None
    folder = path.parent
    if (folder / RUN).is_file() or (folder / RESULTS).is_file():
        return f"the eval run {folder}"
    if (folder / "manifest.json").is_file():  # an index (rag.index.layout) or a compiled artifact (rag.agent.artifacts)
        return f"the index or artifact {folder}"
    return None


def open_run(out_dir: Path, meta: Mapping[str, Any]) -> None:
    """Create ``out_dir`` with its run.json, or check that the run there is the same one (else InputError)."""
    path = out_dir / RUN
    check_run_folder(out_dir)
    if path.is_file():
        old = read_run_json(out_dir)
        for key in ("config_name", "golden_hash", "config"):
            if not _same(key, old.get(key), meta.get(key)):
                raise InputError(
                    f"{out_dir} holds a run with a different {key} ({_diff(old.get(key), meta.get(key))}); "
                    f"resume only continues the same config and golden file. Use --out NEW_DIR, or delete {out_dir}")
        return
    others = sorted({str(r["config"]) for r in read_records(out_dir) if r.get("config") not in (None, meta.get("config_name"))})
    if others:
        raise InputError(f"{out_dir / RESULTS} holds results of config {', '.join(others)}, not "
                         f"{meta.get('config_name')!r}; use --out NEW_DIR")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the run folder {out_dir} ({exc.strerror or exc}); use --out DIR") from None
    write_json(path, {**meta, "created": now()})


def read_run_json(out_dir: Path) -> dict[str, Any]:
    """run.json of ``out_dir``; a damaged one is an InputError that says the results are intact and how to resume."""
    path = Path(out_dir) / RUN
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    except (OSError, ValueError) as exc:
        why = f"invalid JSON at line {exc.lineno}: {exc.msg}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise InputError(f"{path} is damaged ({why}); the finished items in {RESULTS} are intact. To resume, delete "
                         f"{path.name} and run the same command again, or use --out NEW_DIR") from None
    return data


def _same(key: str, old: Any, new: Any) -> bool:
    """Whether a run.json value matches; a setting added by a later version counts as the same when the
    new run has it at its default, since the old run could only have used that behaviour."""
    if key != "config" or not isinstance(old, dict) or not isinstance(new, dict):
        return old == new
    from rag.config import setting_defaults

    defaults = setting_defaults()
    added = {k for k in new.keys() - old.keys() if k in defaults and new[k] == defaults[k]}
    return old == {k: v for k, v in new.items() if k not in added}


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


def _is_record(rec: Any) -> bool:
    return isinstance(rec, dict) and isinstance(rec.get("id"), str) and isinstance(rec.get("scores"), dict)


def read_records(out_dir: str | Path) -> list[dict[str, Any]]:
    """Every well-formed record in ``results.jsonl``, in file order. Never writes to the file.

    A damaged line (not a JSON object with an ``id`` and ``scores``) is skipped with a warning naming the
    file and line; its item counts as not done, so a resumed run answers it again. A torn last line (a run
    stopped mid-write) is repaired only by the run's writer (:func:`repair_torn_tail`).
    """
    path = Path(out_dir) / RESULTS
    if not path.is_file():
        return []
    records = []
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw.decode("utf-8"))
                why = "" if _is_record(rec) else "not a record with an id and scores"
            except UnicodeDecodeError as exc:
                rec, why = None, f"not UTF-8 at byte {exc.start}"
            except json.JSONDecodeError as exc:
                rec, why = None, f"invalid JSON: {exc.msg}, column {exc.colno}"
            if why:
                torn = not raw.endswith(b"\n")
                warnings.warn(f"{path}:{lineno}: {'torn last line (a run stopped mid-write)' if torn else 'damaged line'} "
                              f"skipped ({why}); the file is left as it is"
                              + ("; the next rag eval of this run repairs it" if torn else
                                 "; that item counts as not done"), stacklevel=2)
                continue
            records.append(rec)
    return records


def repair_torn_tail(out_dir: str | Path) -> Path | None:
    """The run's writer only: make ``results.jsonl`` end with a whole line before appending to it.

    A last line without its newline is completed when it is a whole record, else cut off after the file is
    copied to ``results.jsonl.torn-<time>`` (returned; None when nothing was cut)."""
    path = Path(out_dir) / RESULTS
    if not path.is_file():
        return None
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return None
    start = data.rfind(b"\n") + 1
    try:
        whole = _is_record(json.loads(data[start:]))
    except ValueError:
        whole = False
    if whole:
        with path.open("ab") as fh:
            fh.write(b"\n")
        return None
    backup = path.with_name(f"{RESULTS}.torn-{_dt.datetime.now().strftime('%Y%m%dT%H%M%S')}")
    shutil.copy2(path, backup)
    with path.open("rb+") as fh:
        fh.truncate(start)
        os.fsync(fh.fileno())
    return backup


def write_summary(out_dir: str | Path, selected: Sequence[Any], *, config_name: str, ghash: str, k: int,
                  max_rewrites: int) -> dict[str, Any]:
    """Summarize the selected items' records into summary.json (atomically) and return it."""
    out_dir = Path(out_dir)
    summary = _summary(read_records(out_dir), [it.id for it in selected], config_name=config_name, ghash=ghash,
                       k=k, max_rewrites=max_rewrites)
    write_json(out_dir / SUMMARY, summary)
    return summary


def recompute_summary(out_dir: str | Path, records: Sequence[dict[str, Any]] | None = None,
                      ids: list[str] | None = None) -> dict[str, Any]:
    """What summary.json holds, rebuilt in memory from run.json and results.jsonl over ``ids`` (default: every
    finished item), for readers when summary.json is missing, damaged or counts unreadable lines; writes nothing."""
    out_dir = Path(out_dir)
    try:
        meta = read_run_json(out_dir)
    except InputError:
        meta = {}
    config = meta.get("config") if isinstance(meta.get("config"), dict) else {}
    records = read_records(out_dir) if records is None else records
    return _summary(records, [r["id"] for r in records] if ids is None else ids, config_name=meta.get("config_name") or out_dir.name,
                    ghash=meta.get("golden_hash", "?"), k=config.get("top_k"),
                    max_rewrites=config.get("max_rewrites", 0) if config.get("reflection", True) else 0)


def _summary(all_records: Sequence[dict[str, Any]], wanted: list[str], *, config_name: str, ghash: str, k: Any,
             max_rewrites: int) -> dict[str, Any]:
    by_id = {r["id"]: r for r in all_records}
    records = [by_id[i] for i in wanted if i in by_id]
    return {"config_name": config_name, "golden_hash": ghash, "k": k, "max_rewrites": max_rewrites,
            "ids": wanted, "n_selected": len(wanted), "n_done": len(records),
            "complete": len(records) == len(wanted), "updated": now(),
            **summarize([r["scores"] for r in records])}
