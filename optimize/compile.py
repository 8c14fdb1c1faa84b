"""``rag compile``: optimize each role's prompt on ``train``, select on ``dev``, report ``test``.

The optimizer never sees ``test``. Every role is scored before and after with its metric
(optimize/roles.py), per example, so rag.agent.artifacts can tell a dev gain from noise. Finished roles are checkpointed with what they spent, so an interrupted compile
re-runs only what is left (and the DSPy cache makes repeated LM calls free). The result is saved as an
artifact. The ``agent`` role compiles the whole program end to end; its predictors are applied last.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy
from dspy.utils.usage_tracker import UsageTracker

from optimize.budget import CallCounter
from optimize.optimizers import DEMO_PASSAGE_CHARS, MAX_DEMOS, OPTIMIZERS, calls_upper_bound, run_optimizer, search
from optimize.tasks import build_tasks
from rag.agent import artifacts
from rag.config import ROLES, Settings, sieve_home
from rag.errors import ConfigError, InputError

TOKENS_PER_CALL = {"grader": 1300, "rewriter": 250, "answerer": 900, "judge": 1100,  # measured means, see benchmarks/
                   "agent": 1000, "hyde": 300,  # hyde: a short question in, a short passage out
                   "router": 1300, "sql": 1500}  # the ops demo's schema is ~1,200 tokens of each prompt
# agent: the whole program end to end; hyde: the query stage, by Recall@k; router and sql: the data route (an index
# with tables), by routing and execution accuracy
COMPILE_ROLES = (*ROLES, "agent", "hyde", "router", "sql")
# the roles that are not one of the agent's LM roles run on the LM of the role the agent calls them with
RUNS_ON = {"hyde": "rewriter", "router": "grader", "sql": "answerer"}


@dataclass
class CompilePlan:
    optimizer: str
    roles: list[str]
    sizes: dict[str, dict[str, int]]  # role -> split -> examples
    calls: dict[str, int]  # role -> upper bound of LM calls (optimizer + before/after scoring)
    tokens: dict[str, int]
    cost_usd: float

    def render(self) -> str:
        lines = [f"optimizer: {self.optimizer}",
                 f"{'role':<10}{'train':>7}{'dev':>6}{'test':>6}{'LM calls <=':>13}{'tokens ~':>11}"]
        for r in self.roles:
            s = self.sizes[r]
            lines.append(f"{r:<10}{s['train']:>7}{s['dev']:>6}{s['test']:>6}{self.calls[r]:>13}{self.tokens[r]:>11}")
        lines.append(f"total: <= {sum(self.calls.values())} LM calls, ~{sum(self.tokens.values())} tokens, "
                     f"~${self.cost_usd:.4f} at Groq list prices")
        return "\n".join(lines)


@dataclass
class CompileResult:
    artifact: artifacts.Artifact | None
    plan: CompilePlan
    scores: dict[str, dict[str, float]] = field(default_factory=dict)


def parse_roles(text: str) -> list[str]:
    roles = list(ROLES) if text.strip() == "all" else [r.strip() for r in text.split(",") if r.strip()]
    bad = [r for r in roles if r not in COMPILE_ROLES]
    if bad or not roles:
        raise ConfigError(f"--roles {text!r}: unknown role(s) {bad}; allowed: {', '.join(COMPILE_ROLES)} or all")
    return roles


def parse_max_examples(text: str | int | None) -> tuple[int, int, int] | None:
    """``N`` (every split) or ``TRAIN,DEV,TEST``: examples per split and role."""
    if text is None or text == "":
        return None
    parts = [p.strip() for p in str(text).split(",")]
    try:
        sizes = tuple(int(p) for p in parts)
    except ValueError:
        sizes = ()
    if len(sizes) == 1:
        sizes = sizes * 3
    if len(sizes) != 3 or min(sizes) < 1:
        raise ConfigError(f"--max-examples {text!r}: give N or TRAIN,DEV,TEST, each at least 1 (e.g. 4 or 4,4,10)")
    return sizes  # type: ignore[return-value]


def plan(tasks: dict[str, Any], optimizer: str, budget: int | None, effort: str = "light",
         max_examples: tuple[int, int, int] | None = None) -> CompilePlan:
    """Upper bounds per role. ``max_examples`` (train, dev, test) caps the splits first (the same caps give every
    optimizer the same examples); then, with ``budget``, splits are trimmed (largest first) until the bound fits."""
    if optimizer not in OPTIMIZERS:
        raise ConfigError(f"unknown optimizer {optimizer!r}; allowed: {', '.join(OPTIMIZERS)}")
    search(effort)  # validates it
    if max_examples is not None:
        for t in tasks.values():
            for split, cap in zip(("train", "dev", "test"), max_examples):
                del getattr(t, split)[cap:]

    def bound(t: Any) -> int:
        scoring = 2 * (len(t.dev) + len(t.test)) * t.calls_per_example  # before and after
        return calls_upper_bound(optimizer, len(t.train), len(t.dev), t.calls_per_example, effort,
                                 predictors=len(t.program.predictors())) + scoring

    if budget is not None:
        for _ in range(10_000):  # bounded: each pass removes one example
            if sum(bound(t) for t in tasks.values()) <= budget:
                break
            # trim the largest split first; test counts half, since its numbers are the ones reported
            weight = {"train": 1.0, "dev": 1.0, "test": 0.5}
            role, split = max(((r, s) for r in tasks for s in weight),
                              key=lambda rs: len(getattr(tasks[rs[0]], rs[1])) * weight[rs[1]])
            biggest = tasks[role]
            if len(getattr(biggest, split)) <= 1:
                raise ConfigError(f"--budget {budget} is too small for even one example per split; "
                                  f"the smallest plan needs {sum(bound(t) for t in tasks.values())} LM calls")
            getattr(biggest, split).pop()
    calls = {r: bound(t) for r, t in tasks.items()}
    tokens = {r: calls[r] * TOKENS_PER_CALL[r] for r in tasks}
    from rag.lm.configure import GROQ_DEFAULTS
    from rag.usage.pricing import cost_usd  # list prices per model

    # ~85% of a call's tokens are prompt, ~15% output (benchmarks/lm.py)
    cost = sum(cost_usd(GROQ_DEFAULTS.get(r, GROQ_DEFAULTS["answerer"]), int(tokens[r] * 0.85), int(tokens[r] * 0.15))
               or 0.0 for r in tokens)
    sizes = {r: {"train": len(t.train), "dev": len(t.dev), "test": len(t.test)} for r, t in tasks.items()}
    return CompilePlan(optimizer, list(tasks), sizes, calls, tokens, cost)


def score(program: dspy.Module, examples: list[dspy.Example], metric: Any, lm: dspy.BaseLM,
          show_progress: bool = True, label: str = "") -> tuple[float | None, list[float]]:
    """(mean, per-example scores in example order): the per-example scores let rag.agent.artifacts test a gain
    against noise, paired over the same examples."""
    if not examples:
        return None, []
    each = []
    with dspy.context(lm=lm):
        for i, ex in enumerate(examples, 1):
            try:
                each.append(round(float(metric(ex, program(**ex.inputs()))), 4))
            except Exception as exc:  # a failed call scores 0, and says so
                each.append(0.0)
                print(f"  {label}: example {ex.get('item_id')} failed: {exc}", file=sys.stderr)
            if show_progress:
                print(f"\r  scoring {label}: {i}/{len(examples)}", end="", file=sys.stderr, flush=True)
    if show_progress:
        print(file=sys.stderr)
    return round(sum(each) / len(examples), 4), each


def _checkpoint_dir(key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return sieve_home() / "compile" / digest


def compile_program(settings: Settings, *, golden: Path, optimizer: str = "bootstrap", roles: list[str] | None = None,
                    budget: int | None = None, dry_run: bool = False, out: str | None = None,
                    labels: Path | None = None, show_progress: bool = True, effort: str = "light",
                    max_examples: tuple[int, int, int] | None = None, fresh: bool = False,
                    max_demos: int = MAX_DEMOS, demo_passage_chars: int | None = DEMO_PASSAGE_CHARS,
                    lms: dict[str, dspy.BaseLM] | None = None) -> CompileResult:
    """Compile ``roles`` and save an artifact; ``fresh`` ignores finished work from earlier runs (the DSPy
    cache still answers repeated LM calls); ``max_demos`` caps the demos per predictor (each grader or answerer
    demo adds its passages to every call); ``demo_passage_chars`` cuts the passages of the train examples, which
    demos are made from (None: as the agent shows them); ``lms`` overrides the configured LMs per role (tests)."""
    from rag.agent.module import Sieve
    from rag.eval.golden import load_golden
    from rag.lm.configure import build_lm, lms_for_roles, resolve_specs
    from rag.retrieval.retriever import Retriever

    if max_demos < 0:
        raise ConfigError(f"--max-demos must be 0 or more, got {max_demos}")
    if demo_passage_chars is not None and demo_passage_chars < 1:
        raise ConfigError(f"--demo-passage-chars must be 1 or more (0 on the command line: uncut), got {demo_passage_chars}")
    roles = roles or ["grader", "rewriter", "answerer"]
    items = load_golden(golden)
    if not items:
        raise InputError(f"{golden}: the golden set is empty")
    retriever = Retriever.from_settings(settings)
    if lms is None:
        lms = {} if dry_run else lms_for_roles(settings)  # a dry run loads no model and spends nothing
        if settings.proposer_model and not dry_run:
            lms["proposer"] = build_lm(settings.proposer_model, settings)
    tasks = build_tasks(roles, items, retriever, settings, lms=lms, labels_path=labels, demo_chars=demo_passage_chars)
    the_plan = plan(tasks, optimizer, budget, effort, max_examples)
    if dry_run:
        return CompileResult(artifact=None, plan=the_plan)
    if show_progress:
        print(the_plan.render(), file=sys.stderr)

    models = resolve_specs(settings)
    golden_hash = hashlib.sha256(Path(golden).read_bytes()).hexdigest()[:16]
    run_settings = {k: settings.to_dict()[k]
                    for k in ("mode", "top_k", "candidates", "max_rewrites", "grade_passage_chars")}
    # finished work is reused only for the same examples, retrieval settings (they shape each prompt), models
    proposer = settings.proposer_model or models.get("answerer")
    ckpt = _checkpoint_dir({"golden": golden_hash, "optimizer": optimizer, "effort": effort, "models": models,
                            "max_demos": max_demos, "demo_passage_chars": demo_passage_chars,
                            "proposer": proposer,
                            "examples": _example_ids(tasks), "settings": run_settings,
                            "index": retriever.index.fingerprint, "signatures": artifacts.signature_fingerprint()})
    ckpt.mkdir(parents=True, exist_ok=True)
    scores: dict[str, dict[str, float | None]] = {}
    compiled: dict[str, dspy.Module] = {}
    spend: dict[str, dict[str, Any]] = {}
    for role, task in tasks.items():
        # the agent role runs each step on its own role's LM; the query stages run on the rewriter's
        lm = lms.get(RUNS_ON.get(role, role)) or lms["answerer"]
        program, before, after, spend[role] = _compile_role(
            task, lm, ckpt / f"{role}.json", optimizer=optimizer, effort=effort, fresh=fresh, max_demos=max_demos,
            proposer_lm=lms.get("proposer") or lms.get("answerer"), show_progress=show_progress)
        compiled[role] = program
        scores[role] = {"dev_before": before["dev"], "dev_after": after["dev"],
                        "test_before": before["test"], "test_after": after["test"],
                        "per_example": {s: {"ids": [ex.get("item_id") for ex in getattr(task, s)],
                                            "before": before.get(f"{s}_items"), "after": after.get(f"{s}_items")}
                                        for s in ("dev", "test")}}

    from rag.retrieval.expansion import QueryExpander

    expander = QueryExpander(settings.expand_queries, hyde=True) if "hyde" in compiled else None
    agent = Sieve(retriever, max_rewrites=settings.max_rewrites, top_k=settings.top_k, expander=expander)
    if expander is not None:  # saved as expander.hyde; applies to an agent run with hyde=true
        expander.hyde.load_state(compiled["hyde"].predict.dump_state())
    for role, attr in (("grader", "grade"), ("rewriter", "rewrite"), ("answerer", "respond")):
        if role in compiled:
            getattr(agent, attr).load_state(compiled[role].predict.dump_state())
    if "router" in compiled or "sql" in compiled:  # saved as data.choose and data.write; applies to an index with tables
        from rag.agent.dataroute import DataRoute

        agent.data = DataRoute(None, "")
        for role, attr in (("router", "choose"), ("sql", "write")):
            if role in compiled:
                getattr(agent.data, attr).load_state(compiled[role].predict.dump_state())
    if "agent" in compiled:  # end-to-end demos and instructions win over the per-role ones
        agent.load_state(compiled["agent"].dump_state())
    judge = compiled["judge"].predict if "judge" in compiled else None
    name = out or f"{optimizer}-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}"
    manifest = {
        "name": name, "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "sieve_version": _sieve_version(), "models": models, "optimizer": optimizer,
        "optimizer_settings": {"max_demos": max_demos, "demo_passage_chars": demo_passage_chars, "budget": budget,
                               "effort": effort, "max_examples": max_examples, "roles": list(tasks),
                               "proposer": proposer},
        "golden": {"path": str(golden), "hash": golden_hash, "sizes": the_plan.sizes},
        "index_fingerprint": retriever.index.fingerprint, "scores": scores,
        "spend": _total_spend(spend, planned=sum(the_plan.calls.values())),
        "settings": run_settings,
    }
    art = artifacts.save(agent, Path(settings.artifacts_dir) / name, manifest, judge=judge)
    return CompileResult(artifact=art, plan=the_plan, scores=scores)


def _compile_role(task: Any, lm: dspy.BaseLM, done: Path, *, optimizer: str, effort: str, fresh: bool,
                  max_demos: int, proposer_lm: dspy.BaseLM | None, show_progress: bool
                  ) -> tuple[dspy.Module, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Score before, optimize, score after, checkpoint to ``done``; or reuse ``done`` if it holds finished work."""
    state = json.loads(done.read_text()) if done.is_file() and not fresh else {}
    if "before" in state:  # a finished role: program, scores and what it spent come from the checkpoint
        program = task.program.deepcopy()
        program.load_state(state["program"])
        print(f"{task.role}: reusing finished work from {done}", file=sys.stderr)
        return program, state["before"], state["after"], {**state.get("spend", {}), "reused": True}
    counter, usage, started = CallCounter(), UsageTracker(), time.time()
    with dspy.context(callbacks=[*dspy.settings.callbacks, counter], usage_tracker=usage):
        before = _scores(task.program, task, lm, show_progress, "before")
        print(f"{task.role}: compiling with {optimizer} ({effort}) on {len(task.train)} train examples", file=sys.stderr)
        # DSPy's optimizers print their progress to stdout; stdout is for results, so it goes to stderr (or nowhere)
        with contextlib.ExitStack() as stack:
            chatter = sys.stderr if show_progress else stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115
            stack.enter_context(contextlib.redirect_stdout(chatter))
            stack.enter_context(dspy.context(lm=lm))
            program = run_optimizer(optimizer, task.role, task.program.deepcopy(), task.metric, task.train, task.dev,
                                    lm, proposer_lm=proposer_lm, effort=effort, max_demos=max_demos)
        for predictor in program.predictors():  # scored, saved and shipped without the inputs every prompt has
            predictor.demos = [_without(demo, task.demo_drops) for demo in predictor.demos]
        after = _scores(program, task, lm, show_progress, "after")
    spend = {"lm_calls": counter.calls, "tokens": usage.get_total_tokens(), "wall_s": round(time.time() - started, 1),
             "model_calls": sum(len(calls) for calls in usage.usage_data.values())}  # the rest came from the cache
    tmp = done.with_suffix(".tmp")
    tmp.write_text(json.dumps({"program": program.dump_state(), "before": before, "after": after, "spend": spend}))
    tmp.replace(done)  # atomic: a checkpoint is whole or absent
    return program, before, after, {**spend, "reused": False}


def _without(demo: Any, names: tuple[str, ...]) -> Any:
    if not names:
        return demo
    kept = {k: v for k, v in (demo.toDict() if hasattr(demo, "toDict") else dict(demo)).items() if k not in names}
    inputs = [k for k in (getattr(demo, "_input_keys", None) or ()) if k in kept]
    return dspy.Example(**kept).with_inputs(*inputs) if inputs else dspy.Example(**kept)


def _scores(program: dspy.Module, task: Any, lm: dspy.BaseLM, show_progress: bool, when: str) -> dict[str, Any]:
    """``{"dev": mean, "dev_items": [...], "test": mean, "test_items": [...]}`` for ``program`` on ``task``."""
    out: dict[str, Any] = {}
    for split in ("dev", "test"):
        out[split], out[f"{split}_items"] = score(program, getattr(task, split), task.metric, lm, show_progress,
                                                  f"{task.role} {split} {when}")
    return out


def _example_ids(tasks: dict[str, Any]) -> dict[str, dict[str, list[Any]]]:
    """Which examples each role's splits hold: finished work is reused only for exactly these."""
    return {role: {split: [ex.get("item_id") for ex in getattr(t, split)] for split in ("train", "dev", "test")}
            for role, t in tasks.items()}


def _total_spend(per_role: dict[str, dict[str, Any]], planned: int) -> dict[str, Any]:
    """What the artifact cost, summed over roles, including roles finished by an earlier, interrupted run."""
    tokens: dict[str, dict[str, int]] = {}
    for s in per_role.values():
        for model, usage in (s.get("tokens") or {}).items():
            mine = tokens.setdefault(model, {})
            for key, value in usage.items():
                if isinstance(value, (int, float)):
                    mine[key] = mine.get(key, 0) + value
    known = [s["model_calls"] for s in per_role.values() if "model_calls" in s]
    return {"lm_calls": sum(s.get("lm_calls", 0) for s in per_role.values()), "tokens": tokens,
            "model_calls": sum(known) if len(known) == len(per_role) else None,
            "planned_calls_upper_bound": planned, "wall_s": round(sum(s.get("wall_s", 0.0) for s in per_role.values()), 1),
            "per_role": per_role}


def _sieve_version() -> str:
    from rag.version import __version__

    return __version__
