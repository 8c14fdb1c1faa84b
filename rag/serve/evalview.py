"""The evaluation browser's data: the runs ``rag eval`` wrote and the artifacts ``rag compile`` wrote, as JSON.

Nothing is computed here that the library does not compute: tables come from ``rag.report.analysis``, ``rag.report.markdown``
(its formatted intervals) and ``rag.report.compare``; figures from ``rag.report.plots``. Runs are found under one folder
(``SIEVE_HOME/runs`` or ``rag serve --runs DIR``): each sub-folder with a ``summary.json``, or the folder itself
when it is one run. A run is addressed by its folder's name, looked up among those found, never joined into a path.
A run's counts are read as ``rag report`` reads them (``rag.report.markdown.load_run``): a summary.json that counts
lines results.jsonl no longer holds, or that is damaged, is recomputed from the readable records, and the row says why.
"""

from __future__ import annotations

import io
import json
import threading
import warnings
from pathlib import Path
from typing import Any

from rag.errors import InputError, NotFound, SieveError
from rag.eval.runs import RUN, SUMMARY

PLOTS = {"metrics": "metrics_bar", "latency": "latency_by_node", "steps": "steps_histogram"}
MAX_RUNS = 1000  # run folders listed under one root
_PLOT_LOCK = threading.Lock()  # pyplot is not thread-safe
_WARN_LOCK = threading.Lock()  # warnings.catch_warnings is process-wide: one listing records at a time


def records(frame: Any) -> list[dict[str, Any]]:
    """A DataFrame as JSON-ready rows (NaN and numpy scalars become null and plain numbers)."""
    return json.loads(frame.to_json(orient="records", default_handler=str))


def _summary(folder: Path) -> tuple[dict[str, Any], list[str]]:
    """The run's summary as ``rag report`` reads it, and the warnings that reading gave (damaged lines, stale counts)."""
    from rag.report.markdown import load_run

    with _WARN_LOCK, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = load_run(folder)["summary"]
    return summary, list(dict.fromkeys(str(w.message) for w in caught))


class RunBrowser:
    def __init__(self, root: Path, golden_dir: Path | None = None, artifacts_dir: Path | None = None) -> None:
        self.root = Path(root).expanduser()
        self.golden_dir = golden_dir
        self.artifacts_dir = artifacts_dir

    # ---------------------------------------------------------------- runs
    def folders(self) -> dict[str, Path]:
        """Run folder name -> folder, for every run under the root."""
        if (self.root / SUMMARY).is_file():
            return {self.root.name: self.root}
        if not self.root.is_dir():
            return {}
        found = sorted(p.parent for p in self.root.glob(f"*/{SUMMARY}"))[:MAX_RUNS]
        return {d.name: d for d in found}

    def _golden_names(self) -> dict[str, str]:
        """Golden hash -> file name, for the golden files beside the project (a run records only the hash)."""
        from rag.eval.runs import golden_hash

        if self.golden_dir is None or not self.golden_dir.is_dir():
            return {}
        return {golden_hash(p): p.name for p in sorted(self.golden_dir.glob("*.jsonl"))}

    def listing(self) -> list[dict[str, Any]]:
        """One row per run: config, artifact, golden set and hash, items done/selected, complete, date."""
        names, rows = self._golden_names(), []
        for name, folder in self.folders().items():
            try:
                summary, notes = _summary(folder)
                meta = json.loads((folder / RUN).read_text(encoding="utf-8")) if (folder / RUN).is_file() else {}
                if not isinstance(meta, dict):
                    raise ValueError(f"{folder / RUN} is not a JSON object")
            except (OSError, ValueError, SieveError) as exc:
                rows.append({"name": name, "error": f"unreadable: {exc}"})
                continue
            config = meta.get("config") if isinstance(meta.get("config"), dict) else {}
            rows.append({"name": name, "config": summary.get("config_name") or meta.get("config_name"),
                         "artifact": config.get("artifact"), "golden_hash": summary.get("golden_hash"),
                         "golden": names.get(summary.get("golden_hash")), "n_done": summary.get("n_done"),
                         "n_selected": summary.get("n_selected"), "complete": summary.get("complete"),
                         "updated": summary.get("updated") or meta.get("created"), "k": summary.get("k"),
                         "models": config.get("models") or {}, "notes": notes})
        return rows

    def load(self, names: list[str]) -> Any:
        """The named runs as a rag.report.analysis RunSet (NotFound names an unknown run)."""
        from rag.report.analysis import load_runs

        folders = self.folders()
        unknown = [n for n in names if n not in folders]
        if unknown:
            raise NotFound(f"no run named {unknown[0]!r} under {self.root}")
        if not names:
            raise InputError("choose at least one run")
        return load_runs([folders[n] for n in names])

    def metrics(self, names: list[str]) -> dict[str, Any]:
        """The metric table across runs, each cell ``value [95% interval] n`` (``rag.report.analysis.metric_table``)."""
        from rag.report import analysis
        from rag.report.markdown import INTERVALS_NOTE

        runs = self.load(names)
        table = analysis.metric_table(runs)
        return {"runs": runs.names, "note": INTERVALS_NOTE,
                "rows": [{"metric": label, "cells": list(row)} for label, row in zip(table.index, table.values)]}

    def run(self, name: str) -> dict[str, Any]:
        """One run: its metric table, per-type breakdowns, refusals, latency per node, failures with their records."""
        from rag.eval.diagnose import diagnose
        from rag.report import analysis
        from rag.report.markdown import ROWS, TYPE_ROWS, fmt_ci, run_intervals

        runs = self.load([name])
        run = runs[0]
        as_report = {"summary": run.summary, "records": run.records}
        by_type = []
        for t, sub in sorted((run.summary.get("by_type") or {}).items()):
            ci = run_intervals(as_report, t)
            kinds = {key: (label, kind) for key, label, kind in ROWS}
            by_type.append({"type": t, "n": sub.get("n"), "rows": [
                {"metric": kinds[key][0], "value": fmt_ci(sub["metrics"].get(key), kinds[key][1],
                                                          (sub.get("why") or {}).get(key), ci.get(key))}
                for key in TYPE_ROWS]})
        failed = []
        for row in records(analysis.failures(runs)):
            rec = run.record(row["id"])
            failed.append({**row, "record": {k: rec.get(k) for k in ("id", "type", "question", "reference_answer",
                                                                     "gold_ids", "prediction", "judge", "error")},
                           "diagnosis": (diagnose(rec) or {}).get("kind")})
        listing = next((r for r in self.listing() if r["name"] == name), {})
        counts = analysis.failure_counts(runs)
        return {**listing, "run": run.name, "metrics": self.metrics([name])["rows"], "by_type": by_type,
                "refusals": records(analysis.refusal_outcomes(runs)),
                "latency": records(analysis.latency_by_node(runs)),
                "failure_counts": {} if counts.empty else {k: int(v) for k, v in counts.iloc[:, 0].items()},
                "failures": failed}

    def plot(self, kind: str, names: list[str]) -> bytes:
        """A ``rag.report.plots`` figure over the named runs, as PNG bytes."""
        if kind not in PLOTS:
            raise NotFound(f"no plot {kind!r}; one of: {', '.join(PLOTS)}")
        try:
            import matplotlib
        except ImportError:
            raise InputError("plots need matplotlib: pip install -e '.[serve]'") from None
        from rag.report import plots

        runs = self.load(names)
        with _PLOT_LOCK:
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            fig = getattr(plots, PLOTS[kind])(runs)
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=90)
            plt.close(fig)
        return buf.getvalue()

    # ---------------------------------------------------------------- artifacts
    def artifacts(self) -> list[dict[str, Any]]:
        """Each compiled artifact: per role the scores before/after with their paired tests (``artifact_table``),
        and per predictor the instructions and demos the optimizer chose (``artifact_prompts``)."""
        from rag.agent.artifacts import list_artifacts
        from rag.report import compare

        root = compare.artifacts_dir(self.artifacts_dir)
        table = records(compare.artifact_table(root))
        out = []
        for art in list_artifacts(root):
            prompts = records(compare.artifact_prompts(art))
            out.append({"name": art.name, "optimizer": art.manifest.get("optimizer"),
                        "created": art.manifest.get("created"), "models": art.manifest.get("models") or {},
                        "roles": [r for r in table if r["artifact"] == art.name], "prompts": prompts})
        return out
