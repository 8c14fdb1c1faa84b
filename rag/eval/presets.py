"""Named evaluation configurations, gates, and one agent evaluation assembled and run.

Named configurations live in ``rag/configs/eval.toml`` (``rag eval --config list``); a gate file holds floors and
ceilings per metric (``rag/configs/gate_ci.json``). ``rag eval`` and :func:`rag.run_eval` both go through
:func:`plan_eval`.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag.config import Settings, load_settings, parse_assignments
from rag.errors import ConfigError, InputError
from rag.eval.golden import interleave_types

CONFIGS_FILE = Path(__file__).resolve().parents[1] / "configs" / "eval.toml"  # rag/configs/
META_KEYS = ("description", "requires")
# settings that do not change results; everything else must match for a run to resume
NEUTRAL = ("cache", "cache_dir", "artifacts_dir")


def load_eval_configs(path: str | Path = CONFIGS_FILE) -> dict[str, dict[str, Any]]:
    """``{name: {setting: value, "description": ..., "requires": ...}}``, each setting checked against Settings."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    fields = set(Settings.__dataclass_fields__)
    for name, table in data.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: {name!r} must be a [table] of settings")
        for key in table:
            if key not in fields and key not in META_KEYS:
                raise ConfigError(f"{path}: [{name}] unknown setting {key!r}; allowed: {', '.join(sorted(fields))}")
    return data


def resolve_config(name: str, set_pairs: list[str] | None = None, index_dir: Path | None = None,
                   path: str | Path = CONFIGS_FILE) -> tuple[Settings | None, str | None]:
    """(settings, None) for a runnable configuration, or (None, why it is skipped)."""
    configs = load_eval_configs(path)
    if name not in configs:
        raise ConfigError(f"unknown eval config {name!r}; defined in {path}: {', '.join(configs)}")
    table = {k: v for k, v in configs[name].items() if k not in META_KEYS}
    cli = {**parse_assignments(set_pairs), **({"index_dir": index_dir} if index_dir else {})}
    requires = configs[name].get("requires")
    if requires:
        base = load_settings(cli)
        if getattr(base, requires, None) in (None, "", False):
            return None, (f"config {name!r} needs {requires} to be set and it is not; "
                          f"set one with --set {requires}=" + ("lm (the LM reranker) or a cross-encoder NAME_OR_PATH"
                          if requires == "reranker" else "NAME_OR_PATH") + f" (or SIEVE_{requires.upper()})")
    return load_settings({**table, **cli}), None


def fingerprint(settings: Settings, lms: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings that shape results, plus the resolved model of each role (what a resumed run must share)."""
    out = {k: v for k, v in settings.to_dict().items() if k not in NEUTRAL}
    if lms:
        out["models"] = {role: str(getattr(lm, "model", lm)) for role, lm in sorted(lms.items())}
    return out


def load_gate(thresholds_path: str | Path, known: Iterable[str]) -> dict[str, dict[str, float]]:
    """The thresholds file, checked against the ``known`` metric names (call it before a run spends anything)."""
    path = Path(thresholds_path)
    known = sorted(known)
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"gate file {path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"gate file {path} cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    if not isinstance(spec, dict):
        raise InputError(f'{path}: expected an object like {{"e2e_accuracy": {{"min": 0.5}}}}')
    for name, bound in spec.items():
        if name not in known:
            raise InputError(f"{path}: unknown metric {name!r}; known: {', '.join(known)}")
        if not isinstance(bound, dict) or not bound or set(bound) - {"min", "max"} or \
                not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in bound.values()):
            raise InputError(f'{path}: {name!r} must be {{"min": number}} and/or {{"max": number}}, got {bound!r}')
    return spec


def agent_metric_names() -> list[str]:
    """The metrics a gate may bound on an agent run (what rag.eval.agent_metrics.summarize computes)."""
    from rag.eval.agent_metrics import summarize

    return list(summarize([])["metrics"])


def check_gate(metrics: Mapping[str, float | None], why: Mapping[str, str], thresholds_path: str | Path) -> list[str]:
    """Messages for every metric outside its bound; ``{"metric": {"min": x} | {"max": y}}``. Empty = passed."""
    spec = load_gate(thresholds_path, metrics)
    failures = []
    for name, bound in spec.items():
        value = metrics[name]
        if value is None:
            failures.append(f"{name} was not computed ({why.get(name, 'unknown reason')}); bound {bound}")
            continue
        if "min" in bound and value < bound["min"]:
            failures.append(f"{name} = {value:.4g} is below its floor {bound['min']}")
        if "max" in bound and value > bound["max"]:
            failures.append(f"{name} = {value:.4g} is above its ceiling {bound['max']}")
    return failures


LOCAL_PREFIXES = ("embedded/", "gguf/")  # in-process llama.cpp models (rag.lm.configure): one call at a time
REMOTE_THREADS = 4


def default_threads(lms: Mapping[str, Any]) -> int:
    """1 when any role runs in-process (the embedded engine is lock-guarded), else ``REMOTE_THREADS``."""
    models = [str(getattr(lm, "model", "")) for lm in lms.values()]
    return 1 if not models or any(m.startswith(LOCAL_PREFIXES) for m in models) else REMOTE_THREADS


def select_items(items: list[Any], split: str) -> list[Any]:
    if split == "all":
        return interleave_types(items)
    chosen = [it for it in items if it.split == split]
    if not chosen:
        splits = sorted({str(it.split) for it in items})
        raise InputError(f"no golden items in split {split!r}; the file has: {', '.join(splits)} (or use --split all)")
    return interleave_types(chosen)


@dataclass
class EvalPlan:
    """One agent evaluation, assembled and ready: the settings, the program, the golden items and where results go."""

    config: str
    settings: Settings
    program: Any  # rag.agent.program.Program
    items: list[Any]
    ghash: str
    run_config: dict[str, Any]
    out_dir: Path
    judge: bool = True
    use_artifact: bool = True
    strict_gold: bool = False  # gold chunk ids missing from the index: an error, not a warning

    def run(self, folder: Path | None = None, *, limit: int | None = None, threads: int | None = None,
            show_progress: bool = False, runner: Any = None) -> dict[str, Any]:
        """Run (or resume) the evaluation into ``folder`` (default ``out_dir``); returns the run's summary.
        ``runner`` runs the items elsewhere (``rag.distributed.eval.make_runner``: Ray workers)."""
        from rag.eval.runner import run_eval

        lms, settings = self.program.lms, self.settings
        return run_eval(self.items, self.program.agent, lms.get("judge"), folder or self.out_dir, self.config,
                        chunks=self.program.agent.retriever.index.chunks, ghash=self.ghash, runner=runner,
                        config=self.run_config, k=settings.top_k, threads=threads or default_threads(lms),
                        limit=limit, judge=self.judge, show_progress=show_progress, answer_judge=self.program.judge,
                        strict_gold=self.strict_gold,
                        latency_ledger=Path(settings.cache_dir) / "latency_ledger.jsonl" if settings.cache else None)


def plan_eval(config: str, *, split: str = "test", golden: Path | None = None, out: Path | None = None,
              set_pairs: list[str] | None = None, index_dir: Path | None = None, judge: bool = True,
              use_artifact: bool = True, no_cache: bool = False, reviewed_only: bool = False,
              reviewed_by: str | None = None, log: Callable[[str], None] = lambda _m: None) -> EvalPlan | str:
    """Resolve ``config`` and assemble its program and items; a string instead says why the configuration is
    skipped here (its ``requires`` are not met). ``log`` receives the diagnostics (artifact, judge).
    ``reviewed_only``: only the items a reviewer accepted or edited (rag.curate.review.keep_reviewed), in a run
    folder of their own; ``reviewed_by`` (human or model): only that reviewer's accepts and edits, in another."""
    from rag.agent.program import build_program
    from rag.curate.review import keep_reviewed
    from rag.eval.golden import load_golden
    from rag.eval.runs import default_run_dir, golden_hash
    from rag.lm.configure import configure_dspy
    from rag.paths import golden_path

    if out is not None:  # a damaged run.json, or a folder that is no run, in --out: before any model call
        from rag.eval.runs import check_run_folder, read_run_json

        check_run_folder(out)
        if (out / "run.json").exists():
            read_run_json(out)
    base_pairs = list(set_pairs or [])
    settings, skipped = resolve_config(config, base_pairs + (["cache=false"] if no_cache else []), index_dir)
    if skipped:
        return skipped
    golden = golden_path(golden)
    items = load_golden(golden)
    items = select_items(keep_reviewed(items, golden, by=reviewed_by) if reviewed_only or reviewed_by else items, split)
    ghash = golden_hash(golden)
    configure_dspy(settings)
    program = build_program(settings, use_artifact=use_artifact)
    for message in program.messages:
        log(message)
    log(f"Using {program.description}")
    if judge:
        log(f"Judge: {program.judge.description}")
    run_config = fingerprint(settings, program.lms)
    run_config["artifact"] = program.artifact.name if program.artifact else None
    # what the index searched, not what was asked: an index built without windows searches one vector per chunk
    run_config["dense_windows"] = program.agent.retriever.index.windows_searched
    variant = base_pairs + ([f"artifact={program.artifact.name}"] if program.artifact else []) + (
        [f"reviewed_only={reviewed_by}" if reviewed_by else "reviewed_only"] if reviewed_only or reviewed_by else [])
    if judge and program.judge.compiled_from:  # recorded in run.json, and a run of its own
        run_config["judge_artifact"] = program.judge.compiled_from
        variant.append(f"judge_artifact={program.judge.compiled_from}")
    return EvalPlan(config=config, settings=settings, program=program, items=items, ghash=ghash,
                    run_config=run_config, out_dir=out or default_run_dir(config, ghash, variant), judge=judge,
                    use_artifact=use_artifact)
