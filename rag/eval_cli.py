"""The agent path of ``rag eval``: named configurations, the run itself, output, and ``--gate``.

``run_agent_eval_cli`` is what the ``rag eval`` command calls when ``--retrieval-only`` is not given.
Named configurations live in ``rag/configs/eval.toml``; see that file for the list.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import tomllib

from rag.config import Settings, load_settings, parse_assignments
from rag.errors import ConfigError, InputError
from rag.golden import interleave_types

CONFIGS_FILE = Path(__file__).parent / "configs" / "eval.toml"
META_KEYS = ("description", "requires")
# settings that do not change results; everything else must match for a run to resume
NEUTRAL = ("cache", "cache_dir", "artifacts_dir")
DEFAULT_GOLDEN = Path("golden") / "python_ref.jsonl"


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
                          f"set one with --set {requires}=NAME_OR_PATH (or SIEVE_{requires.upper()})")
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
    """The metrics a gate may bound on an agent run (what rag.agent_metrics.summarize computes)."""
    from rag.agent_metrics import summarize

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


LOCAL_PREFIXES = ("embedded/", "gguf/")  # in-process llama.cpp models (rag.lm.roles): one call at a time
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


def run_agent_eval_cli(config: str, *, split: str = "test", limit: int | None = None, golden: Path | None = None,
                       index_dir: Path | None = None, json_out: bool = False, set_pairs: list[str] | None = None,
                       gate: Path | None = None, threads: int | None = None, out: Path | None = None,
                       judge: bool = True, show_progress: bool = True, use_artifact: bool = True,
                       repeat: int | None = None, ray: str | None = None, workers: int | None = None) -> int:
    """Everything ``rag eval --config NAME`` does; returns the exit code (1 when the gate fails).

    ``config="list"`` prints the named configurations with their descriptions instead. ``repeat`` runs the
    evaluation that many times with the LM cache off and prints the spread of each metric (rag.repeat).
    ``ray`` (an address, ``auto``, or ``local``) runs the items on ``workers`` Ray workers (rag.distributed.eval).
    """
    if config in ("list", "?"):
        for name, table in load_eval_configs().items():
            settings = ", ".join(f"{k}={v}" for k, v in table.items() if k not in META_KEYS)
            print(f"{name:<14} {table.get('description', '')}\n{'':<14} {settings}")
        return 0
    from rag.evaluate import run_eval
    from rag.golden import load_golden
    from rag.runs import default_run_dir, golden_hash

    if gate is not None:  # a malformed gate file is reported before the run spends any model calls
        load_gate(gate, agent_metric_names())
    if out is not None and (out / "run.json").exists():  # so is a damaged run.json in --out
        from rag.runs import read_run_json

        read_run_json(out)
    base_pairs = list(set_pairs or [])
    settings, skipped = resolve_config(config, base_pairs + (["cache=false"] if repeat else []), index_dir)
    if skipped:
        print(f"skipped: {skipped}", file=sys.stderr)
        if json_out:
            print(json.dumps({"config_name": config, "skipped": skipped}))
        return 0
    golden = golden or DEFAULT_GOLDEN
    items = select_items(load_golden(golden), split)
    ghash = golden_hash(golden)
    from rag.lm.roles import configure_dspy
    from rag.program import build_program

    configure_dspy(settings)
    program = build_program(settings, use_artifact=use_artifact)
    for message in program.messages:
        print(message, file=sys.stderr)
    print(f"Using {program.description}", file=sys.stderr)
    lms, agent, answer_judge = program.lms, program.agent, program.judge
    if judge:
        print(f"Judge: {answer_judge.description}", file=sys.stderr)
    chunks = agent.retriever.index.chunks
    run_config = fingerprint(settings, lms)
    run_config["artifact"] = program.artifact.name if program.artifact else None
    variant = base_pairs + ([f"artifact={program.artifact.name}"] if program.artifact else [])
    if judge and answer_judge.compiled_from:  # recorded in run.json, and a run of its own
        run_config["judge_artifact"] = answer_judge.compiled_from
        variant.append(f"judge_artifact={answer_judge.compiled_from}")
    out_dir = out or default_run_dir(config, ghash, variant)

    def run_in(folder: Path) -> dict[str, Any]:
        runner = None
        if ray is not None:
            from rag.distributed.eval import make_runner

            runner = make_runner(ray, settings, lms, workers=workers, use_artifact=use_artifact, judge=judge,
                                 show_progress=show_progress)
        return run_eval(items, agent, lms.get("judge"), folder, config, chunks=chunks, ghash=ghash, runner=runner,
                        config=run_config, k=settings.top_k, threads=threads or default_threads(lms),
                        limit=limit, judge=judge, show_progress=show_progress, answer_judge=answer_judge,
                        latency_ledger=Path(settings.cache_dir) / "latency_ledger.jsonl" if settings.cache else None)

    if repeat:
        from rag.repeat import run_repeats

        base = out or out_dir.with_name(out_dir.name + "-repeat")
        return run_repeats(repeat, run_in, base, json_out=json_out,
                           gate=(lambda s: _gate(s, gate)) if gate is not None else None)
    summary = run_in(out_dir)
    print_summary(summary, out_dir, json_out)
    return _gate(summary, gate) if gate is not None else 0


def _gate(summary: Mapping[str, Any], gate: Path) -> int:
    """Check ``summary`` against the gate file: 1 (and why, on stderr) when a metric is out of bounds, else 0."""
    failures = check_gate(summary["metrics"], summary["why"], gate)
    for line in failures:
        print(f"gate failed: {line}", file=sys.stderr)
    if failures:
        return 1
    print(f"gate passed ({gate})", file=sys.stderr)
    return 0


def print_summary(summary: Mapping[str, Any], out_dir: Path, json_out: bool) -> None:
    """JSON (``--json``) or a two-column table on stdout; the run directory on stderr."""
    if json_out:
        print(json.dumps({**summary, "run_dir": str(out_dir)}, indent=2))
    else:
        from rag.report import ROWS, fmt_ci

        width = max(len(label) for _, label, _ in ROWS)
        print(f"{'config':<{width}}  {summary['config_name']} ({summary['n_done']}/{summary['n_selected']} items)"
              "  value [95% interval] n")
        ci = summary.get("ci") or {}
        for key, label, kind in ROWS:
            label = label.replace("@k", f"@{summary.get('k')}")
            print(f"{label:<{width}}  {fmt_ci(summary['metrics'].get(key), kind, summary['why'].get(key), ci.get(key))}")
    print(f"results: {out_dir}", file=sys.stderr)
