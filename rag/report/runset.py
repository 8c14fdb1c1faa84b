"""Which eval runs to analyse: ``load_runs`` finds ``rag eval`` run folders and loads them as a ``RunSet``.

Where results are found:

- no argument: ``$SIEVE_RUNS`` if set (one or more paths joined by ``os.pathsep``), else
  ``sieve_home()/runs`` (``$SIEVE_HOME/runs``, default ``~/.cache/sieve/runs``);
- a run directory (holds ``summary.json``, written by ``rag eval``): that run;
- a directory of run directories: the latest run of each configuration in it (by ``summary.json`` "updated";
  a compiled run, whose run.json names an artifact, counts apart from the uncompiled one).

A run is named after its config, plus ``+<artifact>`` when it ran a compiled program.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag.errors import InputError
from rag.eval.runs import RUN, SUMMARY
from rag.report.markdown import load_run

ENV_RUNS = "SIEVE_RUNS"
MAX_RUN_DIRS = 10_000  # bound on the run directories scanned under one folder


@dataclass
class Run:
    """One ``rag eval`` run: its name (config, plus the artifact when compiled), folder, run.json, summary, records."""

    name: str
    dir: Path
    meta: dict[str, Any]
    summary: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def config(self) -> str:
        return self.summary.get("config_name") or self.meta.get("config_name") or self.dir.name

    @property
    def artifact(self) -> str | None:
        return (self.meta.get("config") or {}).get("artifact")

    def record(self, item_id: str) -> dict[str, Any]:
        for r in self.records:
            if r["id"] == item_id:
                return r
        raise KeyError(f"{item_id!r} is not in run {self.name} ({self.dir})")


@dataclass
class RunSet:
    """Runs by name, in load order."""

    runs: list[Run]

    def __iter__(self) -> Iterator[Run]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)

    def __getitem__(self, key: int | str) -> Run:
        if isinstance(key, int):
            return self.runs[key]
        for r in self.runs:
            if r.name == key:
                return r
        raise KeyError(f"no run named {key!r}; loaded: {', '.join(self.names)}")

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.runs]

    def __repr__(self) -> str:
        rows = [f"  {r.name}: {r.summary.get('n_done')}/{r.summary.get('n_selected')} items, {r.dir}" for r in self.runs]
        return "RunSet(\n" + "\n".join(rows) + "\n)"


def default_paths() -> list[Path]:
    """``$SIEVE_RUNS`` (``os.pathsep``-separated) if set, else ``sieve_home()/runs``."""
    env = os.environ.get(ENV_RUNS, "").strip()
    if env:
        return [Path(p).expanduser() for p in env.split(os.pathsep) if p.strip()]
    from rag.paths import sieve_home

    return [sieve_home() / "runs"]


def _run_dirs(path: Path) -> list[Path]:
    if (path / SUMMARY).is_file():
        return [path]
    if not path.is_dir():
        raise InputError(f"{path} does not exist; pass a run directory written by rag eval, a folder of them, "
                         f"or set {ENV_RUNS}")
    found = sorted(p.parent for p in path.glob(f"*/{SUMMARY}"))[:MAX_RUN_DIRS]
    latest: dict[str, tuple[str, Path]] = {}
    for d in found:
        summary = json.loads((d / SUMMARY).read_text(encoding="utf-8"))
        key = summary.get("config_name", d.name) + "@" + str(_meta(d).get("config", {}).get("artifact"))
        stamp = summary.get("updated", "")
        if key not in latest or stamp >= latest[key][0]:
            latest[key] = (stamp, d)
    return sorted(d for _, d in latest.values())


def _meta(run_dir: Path) -> dict[str, Any]:
    path = run_dir / RUN
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def load_runs(paths_or_dirs: str | Path | Iterable[str | Path] | None = None) -> RunSet:
    """Load runs (see the module docstring for where they are looked for); InputError when none are found."""
    if paths_or_dirs is None:
        paths = default_paths()
    elif isinstance(paths_or_dirs, (str, Path)):
        paths = [Path(p) for p in str(paths_or_dirs).split(os.pathsep) if p]
    else:
        paths = [Path(p) for p in paths_or_dirs]
    runs: list[Run] = []
    for d in (d for p in paths for d in _run_dirs(Path(p).expanduser())):
        loaded = load_run(d)
        meta = _meta(d)
        run = Run(name="", dir=d, meta=meta, summary=loaded["summary"], records=loaded["records"])
        run.name = run.config + (f"+{run.artifact}" if run.artifact else "")
        if run.name in {r.name for r in runs}:
            run.name = f"{run.name} ({d.name})"
        runs.append(run)
    if not runs:
        where = ", ".join(str(p) for p in paths)
        raise InputError(f"no eval runs in {where}; run `rag eval --config full --split test` first, "
                         f"or point {ENV_RUNS} at a run directory")
    return RunSet(runs)


def as_list(runs: RunSet | Run | Sequence[Run]) -> list[Run]:
    """One run, a RunSet or a list of runs, as a list."""
    return [runs] if isinstance(runs, Run) else list(runs)
