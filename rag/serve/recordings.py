"""Recorded runs: a question answered before, which the page plays back - labelled as recorded, with its date, its
models and its configuration - when the server is busy (503) or the model is still loading (static/js/playback.js).

Where they come from: the runs ``rag eval`` wrote, the ones the evaluation browser lists (``RunBrowser.folders``).
A record of a run's results.jsonl holds everything a live answer's events carry: the prediction (answer, citations,
sources, closest passages) with its whole trace, every step and the totals (``rag.agent.module.prediction_to_dict``),
and when it finished; the run's run.json holds the configuration and the model of each role. So recordings are
looked up here, never written. That was chosen over saving the server's own answers as they finish because:

- the server stays stateless beyond its queue: nothing a visitor asks is stored on disk or shown to anyone else;
- recordings are made on purpose, of the golden questions the page offers as examples, by a named configuration,
  and judged (the Evaluations tab says how well that run did), not whatever happened to be asked last;
- there is no file of the server's own to bound, rotate, or repair after a crash mid-write.

The price: a question has a recording only once ``rag eval`` has answered it. The page's examples are the golden
questions with a recording first (``rag.serve.example_questions``), then the dev split's (docs/guides/web.md).

A recording matches the question exactly (spaces around it aside). Records that failed, have no trace steps, date or
model, or answered a follow-up (a ``condense`` step: the answer depends on a conversation) are never played. Of the
rest, one of the configuration asked for wins, then the latest. Files are scanned, not parsed: only the lines that
hold the question's JSON text are decoded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rag.eval.runs import RESULTS, RUN

FOLLOW_UP_NODE = "condense"  # a follow-up's first step: its answer depends on a conversation a recording lacks
# what is shown of a recording's configuration, as Programs.describe shows a live program's
SETTINGS = ("mode", "top_k", "reflection", "max_rewrites", "reranker", "artifact")


def _needles(question: str) -> tuple[bytes, ...]:
    """The question as a results.jsonl line spells it inside its JSON string (with or without ASCII escapes)."""
    return tuple({json.dumps(question, ensure_ascii=ascii)[1:-1].encode("utf-8") for ascii in (False, True)})


def _meta(folder: Path) -> dict[str, Any]:
    """The run's run.json ({} when missing or damaged: the recording then says less, from the record alone)."""
    try:
        meta = json.loads((folder / RUN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _steps(rec: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The record's trace steps when it can be played back: a finished answer to a question asked on its own."""
    pred = rec.get("prediction")
    if rec.get("status") != "ok" or not isinstance(pred, dict) or not isinstance(pred.get("answer"), str):
        return None
    steps = (pred.get("trace") or {}).get("steps") if isinstance(pred.get("trace"), dict) else None
    if not isinstance(steps, list) or not steps or not all(isinstance(s, dict) for s in steps):
        return None
    return None if any(s.get("node") == FOLLOW_UP_NODE for s in steps) else steps


def _about(meta: dict[str, Any], rec: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
    """When, by which configuration and with which models the record was answered."""
    config = meta.get("config") if isinstance(meta.get("config"), dict) else {}
    models = config.get("models") if isinstance(config.get("models"), dict) else {}
    if not models:  # an older run.json: the models the trace's steps name, by node
        models = {s["node"]: s["model"] for s in steps if s.get("model") and s.get("node")}
    return {"recorded_at": rec.get("finished_at") or meta.get("created"),
            "config": meta.get("config_name") or rec.get("config"),
            "models": {str(k): str(v) for k, v in models.items()},
            "settings": {k: config[k] for k in SETTINGS if k in config}}


def _scan(folder: Path, wanted: Mapping[str, tuple[bytes, ...]]) -> Iterable[tuple[str, dict[str, Any]]]:
    """(question, record) for each record in the run's results.jsonl that asks one of ``wanted``'s questions."""
    path = folder / RESULTS
    try:
        fh = path.open("rb")
    except OSError:
        return
    with fh:
        for raw in fh:
            hits = [q for q, needles in wanted.items() if any(n in raw for n in needles)]
            if not hits:
                continue
            try:
                rec = json.loads(raw.decode("utf-8"))
            except ValueError:  # a damaged or torn line: rag.eval.runs.read_records warns about it, here it is skipped
                continue
            if isinstance(rec, dict) and isinstance(rec.get("question"), str) and rec["question"].strip() in hits:
                yield rec["question"].strip(), rec


def find(folders: Mapping[str, Path], questions: Iterable[str], config: str | None = None,
         *, full: bool = True) -> dict[str, dict[str, Any]]:
    """The recording of each of ``questions`` that has one, among the runs ``folders`` (name -> folder): a record of
    ``config`` first, then the latest. ``full``: with its ``steps`` and ``done`` (what the page plays back);
    otherwise only what it is (``recorded_at``, ``config``, ``models``, ``settings``, ``run``, ``item``)."""
    wanted = {q.strip(): _needles(q.strip()) for q in questions if q and q.strip()}
    best: dict[str, tuple[tuple[bool, str], dict[str, Any]]] = {}
    for name, folder in folders.items():
        meta: dict[str, Any] | None = None
        for question, rec in _scan(Path(folder), wanted):
            steps = _steps(rec)
            if steps is None:
                continue
            meta = _meta(folder) if meta is None else meta
            about = _about(meta, rec, steps)
            if not about["recorded_at"] or not about["models"]:  # a recording always says when and with what
                continue
            rank = (config is not None and about["config"] == config, str(about["recorded_at"]))
            if question in best and best[question][0] >= rank:
                continue
            found = {"question": rec["question"], **about, "run": name, "item": rec.get("id")}
            if full:
                found["steps"] = [{**s, "index": i} for i, s in enumerate(steps)]
                found["done"] = {**rec["prediction"], **{k: about[k] for k in ("config", "models", "settings")}}
            best[question] = (rank, found)
    return {q: found for q, (_, found) in best.items()}


def recording(folders: Mapping[str, Path], question: str, config: str | None = None) -> dict[str, Any] | None:
    """The recording of ``question`` to play back (``find``), or None."""
    return find(folders, [question], config).get(question.strip())
