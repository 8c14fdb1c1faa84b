"""The on-disk layout of an eval run, and safe reads/writes of it.

A run lives in one directory, by default ``sieve_home()/runs/<config>-<golden hash>/``::

    run.json        what this run is: config name, golden hash, the settings that shape results
    results.jsonl   one record per finished item, appended (and fsynced) as it finishes
    summary.json    rag.eval.agent_metrics.summarize over the items the last invocation selected plus every other
                    finished item in results.jsonl, so it never describes less than the results file holds

A full disk (ENOSPC, or EDQUOT for a quota) while writing any of them is :class:`DiskFull`: one line saying how many
finished items results.jsonl keeps and about how much space the rest of the run needs. A failed write is undone
(results.jsonl cut back to its last whole line, a half-written temporary file removed), so resuming is safe.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import errno
import hashlib
import json
import os
import re
import shutil
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag.errors import InputError, SieveError
from rag.eval.agent_metrics import summarize
from rag.ingest.jsonl import dump_json, write_bytes

RESULTS, SUMMARY, RUN = "results.jsonl", "summary.json", "run.json"
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class DiskFull(SieveError):
    """No space (or quota) left while a run writes its files; what finished is kept and the same command resumes."""


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def golden_hash(path: str | Path) -> str:
    """First 12 hex digits of the SHA-256 of the golden file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]


def items_hash(items: Sequence[Any]) -> str:
    """First 12 hex digits of the SHA-256 of the selected golden items (each as its fields, in id order): what a
    run's results depend on, where the file's hash also changes when a split is appended elsewhere."""
    def fields(item: Any) -> dict[str, Any]:
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            return dataclasses.asdict(item)
        return dict(item) if isinstance(item, Mapping) else dict(getattr(item, "__dict__", {"repr": repr(item)}))

    rows = sorted(map(fields, items), key=lambda r: str(r.get("id")))
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:12]


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
    write_bytes(tmp, dump_json(data, indent=2, ensure_ascii=False).encode("utf-8"), append=False)
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
        if _same_items(old, meta):  # the golden file changed, none of the selected items did (a split appended)
            print(f"the golden file changed since {out_dir} started (hash {old.get('golden_hash')} -> "
                  f"{meta.get('golden_hash')}), but none of the items it selects did: resuming", file=sys.stderr)
            write_json(path, {**old, "golden_hash": meta.get("golden_hash")})
            old = {**old, "golden_hash": meta.get("golden_hash")}
        for key in ("config_name", "golden_hash", "config"):
            if not _same(key, old.get(key), meta.get(key)):
                raise InputError(
                    f"{out_dir} holds a run with a different {key} ({_diff(old.get(key), meta.get(key))}); "
                    f"resume only continues the same config and golden file{_older(old.get(key), meta.get(key))}. "
                    f"Use --out NEW_DIR, or delete {out_dir}")
        return
    others = sorted({str(r["config"]) for r in read_records(out_dir) if r.get("config") not in (None, meta.get("config_name"))})
    if others:
        raise InputError(f"{out_dir / RESULTS} holds results of config {', '.join(others)}, not "
                         f"{meta.get('config_name')!r}; use --out NEW_DIR")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the run folder {out_dir} ({exc.strerror or exc}); use --out DIR") from None
    try:
        write_json(path, {**meta, "created": now()})
    except OSError as exc:
        _raise_disk_full(exc, out_dir, RUN, items_left=0, payload=4096)
        raise


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
    """Whether a run.json value matches; a setting added by a later version counts as the same when the new run
    has it at the value that behaves as the old run did: its default, or, for a setting whose default changed what
    Sieve does (``router``: the model before, schema cues now), rag.config.BEFORE_THE_SETTING's value."""
    if key != "config" or not isinstance(old, dict) or not isinstance(new, dict):
        return old == new
    from rag.config import BEFORE_THE_SETTING, setting_defaults

    before = {**setting_defaults(), **BEFORE_THE_SETTING}  # what a run made before each setting existed did
    added = {k for k in new.keys() - old.keys() if k in before and new[k] == before[k]}
    return old == {k: v for k, v in new.items() if k not in added}


def _same_items(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a run whose golden file's hash changed selects the same items, unchanged (both recorded an
    ``items_hash`` and they match): its results still stand. A run from before items_hash: no."""
    return (old.get("golden_hash") != new.get("golden_hash") and bool(old.get("items_hash"))
            and old.get("items_hash") == new.get("items_hash"))


def _older(old: Any, new: Any) -> str:
    """How to resume a run made before a setting whose default changed behaviour: ``--set name=old value`` for that
    setting and for every other setting the run recorded at another value (a default changed with it, as rrf_k did
    with dense_weight), so that following the hint resumes."""
    from rag.config import BEFORE_THE_SETTING, setting_defaults

    if not isinstance(old, dict) or not isinstance(new, dict):
        return ""
    changed = {k: v for k, v in BEFORE_THE_SETTING.items() if k in new and k not in old and new[k] != v}
    if not changed:
        return ""
    settings = setting_defaults()
    also = {k: v for k, v in old.items() if k in settings and k in new and new[k] != v and v is not None}
    return (f" (that run predates {', '.join(changed)}: resume it with "
            f"{' '.join(f'--set {k}={v}' for k, v in {**changed, **also}.items())})")


def _diff(old: Any, new: Any) -> str:
    """``key: old -> new`` for the keys of two dicts that differ; ``old -> new`` otherwise."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        return ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in keys)
    return f"{old!r} -> {new!r}"


def append_record(out_dir: Path, record: Mapping[str, Any], *, items_left: int = 0) -> None:
    """Append one record as one line, fsynced (the caller serialises writers). A full disk undoes the partial line
    and raises :class:`DiskFull` (``items_left``: how many items, this one included, still need writing)."""
    data = (dump_json(record, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        write_bytes(Path(out_dir) / RESULTS, data, append=True)
    except OSError as exc:
        _raise_disk_full(exc, out_dir, RESULTS, items_left=max(items_left, 1), payload=len(data))
        raise


def _raise_disk_full(exc: OSError, out_dir: str | Path, name: str, *, items_left: int, payload: int) -> None:
    """Raise :class:`DiskFull` for an ENOSPC/EDQUOT ``exc`` raised writing ``name`` in ``out_dir`` (return otherwise):
    how many finished items results.jsonl keeps, and about how much space the ``items_left`` items and the
    summary need (the mean record size so far, or ``payload``, the bytes of the failed write)."""
    if exc.errno not in DISK_FULL:
        return
    out_dir = Path(out_dir)
    with warnings.catch_warnings():  # counting only; read_records warns about damaged lines to readers
        warnings.simplefilter("ignore")
        kept = len({r["id"] for r in read_records(out_dir)})
    results, summary = out_dir / RESULTS, out_dir / SUMMARY
    per_item = results.stat().st_size // kept if kept and results.is_file() else payload
    summary_size = max(payload if name != RESULTS else 0, summary.stat().st_size if summary.is_file() else 0)
    need = per_item * items_left + 2 * summary_size  # summary.json is replaced atomically: old and new side by side
    raise DiskFull(f"{(exc.strerror or 'no space left on device').lower()} writing {out_dir / name}: "
                   f"{kept} finished item(s) are kept in {results}; free about {_size(need)} "
                   f"({f'for {items_left} item(s) left and the summary' if items_left else 'for the summary'}) "
                   "and run the same command again to resume") from None


def _size(n: int) -> str:
    n = max(n, 1024)
    return f"{n / 1024:.0f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MB"


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
    """Summarize into summary.json (atomically) and return it: the selected items plus every other finished item in
    results.jsonl (``n_requested`` the selection, ``n_extra`` the others), so a narrower ``--limit`` or
    ``--split`` on a bigger run never writes a summary that contradicts the results file. A full disk is
    :class:`DiskFull`."""
    out_dir = Path(out_dir)
    records = read_records(out_dir)
    wanted = [it.id for it in selected]
    chosen = set(wanted)
    extra = list(dict.fromkeys(r["id"] for r in records if r["id"] not in chosen))
    summary = {**_summary(records, wanted + extra, config_name=config_name, ghash=ghash, k=k,
                          max_rewrites=max_rewrites), "n_requested": len(wanted), "n_extra": len(extra)}
    try:
        write_json(out_dir / SUMMARY, summary)
    except OSError as exc:
        _raise_disk_full(exc, out_dir, SUMMARY, items_left=summary["n_selected"] - summary["n_done"],
                         payload=len(dump_json(summary, indent=2, ensure_ascii=False).encode("utf-8")))
        raise
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
