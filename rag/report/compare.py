"""Uncompiled vs compiled: the artifacts' before/after scores, the prompts the optimizer chose, the paired
comparison of two runs of the same golden items and the items that flipped (``notebooks/compile_report.ipynb``).
Every difference says whether it is more than noise (rag.stats.intervals, rag.stats.paired). With fewer than two runs, the
run comparisons are empty and ``pick_pair`` says what to run.

Artifacts are the folders ``rag compile`` writes (rag.agent.artifacts): ``manifest.json`` holds per-role scores
(dev/test, before/after); ``program.json`` (and ``judge.json``) the DSPy state: per predictor the
instructions and the demos. With no artifact, ``artifact_prompts(None)`` shows the uncompiled signatures.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from rag.eval.diagnose import diagnose
from rag.report.analysis import Run, RunSet, is_right, metric_values, outcome, render_trace
from rag.report.markdown import ROWS

# predictor name in the saved program state -> the role it plays (rag.agent.module.Sieve, optimize.roles)
ROLE_OF = {"grade": "grader", "rewrite": "rewriter", "respond": "answerer", "judge": "judge"}
SPLITS = ("dev", "test")


def artifacts_dir(path: str | Path | None = None) -> Path:
    """``path``, or the configured artifacts folder (``SIEVE_ARTIFACTS_DIR``, sieve.toml, else ``artifacts/``)."""
    if path:
        return Path(path).expanduser()
    from rag.config import load_settings

    return Path(load_settings({}).artifacts_dir)


def artifact_table(artifacts_dir_: str | Path | None = None) -> pd.DataFrame:
    """One row per artifact and role: optimizer, created, models, dev/test scores before and after, deltas, and
    per split the paired test over its examples (``*_n``, ``*_p``, ``*_verdict``; empty for an artifact compiled
    before per-example scores were kept). Empty (with the columns) when the folder holds no artifact."""
    from rag.agent.artifacts import list_artifacts

    cols = ["artifact", "optimizer", "created", "role", "model"]
    for split in SPLITS:
        cols += [f"{split}_before", f"{split}_after", f"{split}_delta", f"{split}_n", f"{split}_p", f"{split}_verdict"]
    cols += ["selectable", "why"]
    rows = []
    for art in list_artifacts(artifacts_dir(artifacts_dir_)):
        m = art.manifest
        for role, sc in sorted((m.get("scores") or {}).items()):
            row = {"artifact": art.name, "optimizer": m.get("optimizer"), "created": m.get("created"), "role": role,
                   "model": (m.get("models") or {}).get(role)}
            for split in SPLITS:
                before, after = sc.get(f"{split}_before"), sc.get(f"{split}_after")
                c = art.comparison(role, split)
                row.update({f"{split}_before": before, f"{split}_after": after,
                            f"{split}_delta": None if before is None or after is None else after - before,
                            f"{split}_n": c.n if c else None, f"{split}_p": c.p if c else None,
                            f"{split}_verdict": c.verdict if c else "no per-example scores"})
            row["selectable"], row["why"] = art.dev_verdict(("judge",) if role == "judge" else
                                                            tuple(r for r in art.roles() if r != "judge"))
            rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def uncompiled_state() -> dict[str, Any]:
    """The program state of the uncompiled agent and judge (signature docstrings, no demos)."""
    import dspy

    from rag.agent.module import Sieve
    from signatures import Judge

    state = Sieve(None).dump_state()
    state["judge"] = dspy.Predict(Judge).dump_state()
    return state


def _predictors(state: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {k: v for k, v in state.items() if isinstance(v, Mapping) and "signature" in v}


def _load_state(artifact: Any) -> dict[str, Any]:
    from rag.agent import artifacts

    art = artifact if isinstance(artifact, artifacts.Artifact) else artifacts.load(Path(artifact))
    state = json.loads(art.program_path.read_text(encoding="utf-8"))
    if art.judge_path:
        judge = json.loads(art.judge_path.read_text(encoding="utf-8"))
        state["judge"] = judge.get("judge", judge) if "signature" not in judge else judge
    return state


def artifact_prompts(artifact: Any = None) -> pd.DataFrame:
    """Per predictor: role, instructions, whether the optimizer changed them, the demos it chose.

    ``artifact``: an rag.agent.artifacts.Artifact, its folder, or None for the uncompiled program."""
    base = _predictors(uncompiled_state())
    state = base if artifact is None else _predictors(_load_state(artifact))
    rows = []
    for name, pred in state.items():
        instructions = pred["signature"].get("instructions", "")
        original = (base.get(name) or {}).get("signature", {}).get("instructions")
        demos = list(pred.get("demos") or [])
        rows.append({"predictor": name, "role": ROLE_OF.get(name, name), "instructions": instructions,
                     "changed": original is not None and instructions != original, "n_demos": len(demos),
                     "demos": demos})
    return pd.DataFrame(rows, columns=["predictor", "role", "instructions", "changed", "n_demos", "demos"])


def render_prompts(prompts: pd.DataFrame, *, max_demo_chars: int = 400) -> str:
    """``artifact_prompts`` as readable text: each predictor's instructions, then its demos field by field."""
    out = []
    for row in prompts.itertuples():
        flag = "changed by the optimizer" if row.changed else "as written in signatures/"
        out += [f"== {row.predictor} ({row.role}): instructions {flag}", row.instructions, f"-- {row.n_demos} demo(s)"]
        for i, demo in enumerate(row.demos, 1):
            for key, value in demo.items():
                if key.startswith("augmented"):
                    continue
                text = " ".join(str(value).split())
                out.append(f"  {i}. {key}: {text[:max_demo_chars] + ('…' if len(text) > max_demo_chars else '')}")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def flips(run_a: Run | None, run_b: Run | None) -> pd.DataFrame:
    """Items in both runs whose rightness (rag.report.analysis.is_right) changed: ``wrong->right`` or ``right->wrong``."""
    a, b = ({r["id"]: r for r in run.records} if run is not None else {} for run in (run_a, run_b))
    rows = []
    for item_id in sorted(a.keys() & b.keys()):
        before, after = a[item_id], b[item_id]
        ra, rb = is_right(before), is_right(after)
        if ra is None or rb is None or ra == rb:
            continue
        rows.append({"id": item_id, "type": before["type"], "flip": "wrong->right" if rb else "right->wrong",
                     "outcome_before": outcome(before), "outcome_after": outcome(after),
                     "diagnosis_before": (diagnose(before) or {}).get("kind"),
                     "diagnosis_after": (diagnose(after) or {}).get("kind"), "question": before["question"]})
    return pd.DataFrame(rows, columns=["id", "type", "flip", "outcome_before", "outcome_after", "diagnosis_before",
                                       "diagnosis_after", "question"])


def paired(run_a: Run | None, run_b: Run | None) -> pd.DataFrame:
    """``run_b`` vs ``run_a`` item by item (rag.stats.paired): n, means, difference with its 95% interval, test, p and a
    plain verdict per metric. Empty when either run is missing."""
    from rag.stats.paired import compare_records

    cols = ["metric", "label", "n", "mean_a", "mean_b", "diff", "lo", "hi", "p", "test", "verdict", "only_a", "only_b"]
    if run_a is None or run_b is None:
        return pd.DataFrame(columns=cols)
    return pd.DataFrame(compare_records(run_a.records, run_b.records, run_a.name, run_b.name), columns=cols)


def metric_deltas(run_a: Run | None, run_b: Run | None) -> pd.DataFrame:
    """Each metric in both runs (``before`` = run_a, ``after`` = run_b) and ``delta`` = after - before (NaN
    where either run could not compute it). Whether a delta is more than noise: ``paired``."""
    if run_a is None or run_b is None:
        return pd.DataFrame(columns=["label", "before", "after", "delta"])
    values = metric_values([run_a, run_b])
    values.columns = ["before", "after"]
    values["delta"] = values.after - values.before
    values.insert(0, "label", [label for _, label, _ in ROWS])
    return values


def artifact_for(run: Run | None, artifacts_dir_: str | Path | None = None) -> Any:
    """The artifact a compiled run used if it is in the folder, else the newest artifact there, else None."""
    from rag.agent.artifacts import list_artifacts

    found = list_artifacts(artifacts_dir(artifacts_dir_))
    named = [a for a in found if run is not None and a.name == run.artifact]
    if named:
        return named[0]
    return max(found, key=lambda a: a.manifest.get("created", ""), default=None)


def pick_pair(runs: RunSet, before: str | None = None,
              after: str | None = None) -> tuple[Run | None, Run | None, str]:
    """(before, after, why): the named runs, else an uncompiled and a compiled run of the same config, else the
    first two runs loaded (e.g. baseline vs full) when no compiled run exists; (None, None, what to run) when
    fewer than two runs were loaded."""
    if before and after:
        return runs[before], runs[after], f"{before} vs {after}, as chosen"
    for b in runs:
        for a in runs:
            if b.artifact is None and a.artifact and a.config == b.config:
                return b, a, f"uncompiled {b.name} vs compiled {a.name} (artifact {a.artifact})"
    if len(runs) < 2:
        return None, None, (f"nothing to compare: comparing needs two runs of the same items, loaded "
                            f"{', '.join(runs.names) or 'none'}; run e.g. rag eval --config baseline --split test "
                            "--limit 12 and rag eval --config full --split test --limit 12 (or the same config "
                            "with --no-artifact and after rag compile)")
    return runs[0], runs[1], (f"no compiled run found: comparing {runs[0].name} vs {runs[1].name} instead; "
                              "run `rag eval` again after `rag compile` to compare a compiled program")


def render_flips(run_a: Run | None, run_b: Run | None, limit: int = 3) -> str:
    """The traces (in ``run_b``) of at most ``limit`` flipped items of each direction."""
    if run_a is None or run_b is None:
        return "no two runs to compare\n"
    f = flips(run_a, run_b)
    if f.empty:
        return f"no item flipped between {run_a.name} and {run_b.name}\n"
    out = []
    for kind, group in f.groupby("flip", sort=True):
        out.append(f"===== {kind}: {len(group)} item(s)")
        for row in group.head(limit).itertuples():
            out += ["", "--- before", render_trace({**run_a.record(row.id), "config": run_a.name}),
                    "--- after", render_trace({**run_b.record(row.id), "config": run_b.name}), ""]
    return "\n".join(out).rstrip() + "\n"
