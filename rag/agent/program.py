"""Assemble the agent for a configuration: index + retriever, LMs per role, and the compiled artifact.

``rag ask``, ``rag eval`` and the notebooks all build the program here, so they run the same thing. The judge
(``rag eval``) is built here too: compiled when an artifact holds a judge whose dev gain clears noise, or when
the artifact named with ``--artifact`` holds one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy

from rag.agent import artifacts
from rag.agent.conversation import Condenser
from rag.agent.judging import AnswerJudge
from rag.agent.module import Sieve
from rag.config import Settings


@dataclass
class Program:
    agent: Sieve
    artifact: artifacts.Artifact | None
    models: dict[str, str]
    lms: dict[str, dspy.BaseLM]
    messages: list[str] = field(default_factory=list)  # diagnostics for stderr
    judge: AnswerJudge | None = None
    artifacts_looked: bool = True  # False: --no-artifact, so none was looked for

    @property
    def description(self) -> str:
        if self.artifact is None:
            why = "no artifact in artifacts/ fits with a dev gain beyond noise" if self.artifacts_looked else "--no-artifact"
            return f"uncompiled signatures ({why})"
        return f"compiled artifact {self.artifact.name} ({self.artifact.manifest.get('optimizer', '?')})"


def with_query_stages(retriever: Any, settings: Settings) -> Any:
    """``retriever`` with the LM query stages ``settings`` turn on (expansion, HyDE, the LM reranker) running on the
    rewriter's model, for a search without the agent (``rag search``, ``rag eval --retrieval-only``); configures DSPy
    only when a stage needs a model."""
    from rag.retrieval.expansion import QueryExpander

    listwise = getattr(retriever.reranker, "listwise", False)
    if not (settings.lm_stages or listwise):
        return retriever
    from rag.lm.configure import configure_dspy, lms_for_roles

    configure_dspy(settings)
    lm = lms_for_roles(settings)["rewriter"]
    if settings.expand_queries or settings.hyde:
        retriever.expander = QueryExpander(settings.expand_queries, settings.hyde, lm=lm)
    if listwise:
        retriever.reranker.lm = lm
    if settings.route_categories:
        from rag.retrieval.categories import CategoryRouter

        retriever.router = CategoryRouter(lm=lm)
    return retriever


def data_stages(index: Any, settings: Settings) -> tuple[Any, Any]:
    """The data route over ``index``'s tables (None without tables or with ``data_route=off``) and the grounding
    critic (``critic``: auto = when the index has tables)."""
    from rag.agent.critique import Critic
    from rag.agent.dataroute import DataRoute

    record, path = getattr(index, "tables_record", None), getattr(index, "tables_path", None)
    data = coverage = None
    if record and path is not None and settings.data_route != "off":
        from rag.data import Warehouse, schema_summary
        from rag.data.coverage import Coverage
        from rag.data.schemalink import Vocabulary
        from rag.data.sqlrepair import columns_of
        from rag.data.valuelinks import ValueLinks

        warehouse = Warehouse(path)
        vocab = Vocabulary.for_index(index, warehouse, short_names=settings.short_names)
        cues = vocab if settings.router in ("cues", "cues+learned") else None
        learned = examples = None
        if settings.router in ("learned", "cues+learned"):
            from rag.data.labelled import learn_router

            learned = learn_router(settings.router_labels, _splits(settings.router_splits), index.query_encoder.encode)
        if (settings.sql_examples.strip() or settings.sql_drills) and settings.sql_demos:
            from rag.data.drills import Drills
            from rag.data.labelled import SQLExamples, labelled_sql

            shown = labelled_sql(settings.sql_examples, _splits(settings.sql_example_splits)) \
                if settings.sql_examples.strip() else []
            drills = Drills(record, warehouse) if settings.sql_drills else None
            examples = SQLExamples.from_items(shown + (drills.items if drills else []), index.query_encoder.encode,
                                              settings.sql_demos, linked=drills.linked if drills else None)
        data = DataRoute(warehouse, schema_summary(record), cues=cues, learned=learned, examples=examples,
                         columns=columns_of(record), rows=settings.sql_rows, timeout_s=settings.sql_timeout_s,
                         corrections=settings.sql_corrections, text_sql=settings.sql_output == "text",
                         reads_overruled=settings.sql_reads_overruled, samples=settings.sql_samples,
                         temperature=settings.sql_sample_temperature, overrule=settings.router_overrule,
                         links=ValueLinks.from_record(record, warehouse, vocab.column_values,
                                                      names_only=settings.sql_links == "names", short=vocab.short,
                                                      paths=settings.sql_join_paths)
                         if settings.sql_links != "off" else None)
        coverage = Coverage.for_index(index, warehouse, vocab)
    on = settings.critic == "on" or (settings.critic == "auto" and data is not None)
    return data, (Critic(settings.critic_retries, settings.critic_checks, coverage) if on else None)


def lookalikes(index: Any, settings: Settings) -> Any:
    """rag.agent.lookalike.Lookalikes from ``unanswerable_labels`` with the index's encoder; None when unset."""
    if not settings.unanswerable_labels.strip():
        return None
    from rag.agent.lookalike import Lookalikes

    return Lookalikes.from_files(_splits(settings.unanswerable_labels), _splits(settings.unanswerable_splits),
                                 index.query_encoder.encode, settings.unanswerable_margin)


def _splits(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def build_program(settings: Settings, *, use_artifact: bool = True, retriever=None) -> Program:
    """The agent for ``settings``: uncompiled, or with the artifact that fits (``settings.artifact`` names one)."""
    from rag.lm.configure import lms_for_roles, resolve_specs
    from rag.retrieval.expansion import QueryExpander
    from rag.retrieval.retriever import Retriever

    retriever = retriever or Retriever.from_settings(settings)
    lms = lms_for_roles(settings)
    models = resolve_specs(settings)
    reranker = retriever.reranker if getattr(retriever.reranker, "listwise", False) else None
    if reranker is not None:
        reranker.lm = lms.get("rewriter")
    if settings.route_categories:
        from rag.retrieval.categories import CategoryRouter

        retriever.router = CategoryRouter(lm=lms.get("rewriter"))
    data, critic = data_stages(retriever.index, settings)
    agent = Sieve(retriever, max_rewrites=settings.max_rewrites, use_reflection=settings.reflection,
                  top_k=settings.top_k, lms=lms, grade_passage_chars=settings.grade_passage_chars,
                  answer_context=settings.answer_context, id_choices=settings.id_choices,
                  subject_shortcut=settings.subject_shortcut,
                  expander=QueryExpander(settings.expand_queries, settings.hyde, lm=lms.get("rewriter")),
                  context_tokens=settings.context_tokens, reranker=reranker, router=retriever.router, data=data,
                  critic=critic, condenser=Condenser(settings.history_turns, settings.history_chars),
                  lookalikes=lookalikes(retriever.index, settings))
    judge = AnswerJudge(lms.get("judge"))
    artifact, messages = None, []
    if use_artifact:
        root, fingerprint = Path(settings.artifacts_dir), retriever.index.fingerprint
        artifact, messages = artifacts.select(root, models, name=settings.artifact, fingerprint=fingerprint)
        if artifact is not None:
            artifacts.apply(agent, artifact)
        if settings.artifact:  # a named artifact brings its judge, if it has one
            judged = artifact if artifact is not None and artifact.judge_path else None
        else:
            judged, more = artifacts.select(root, models, fingerprint=fingerprint, roles=artifacts.JUDGE_ROLES)
            messages += [m for m in more if m not in messages]
        if judged is not None:
            judge.load_compiled(judged)
    return Program(agent=agent, artifact=artifact, models=models, lms=lms, messages=messages, judge=judge,
                   artifacts_looked=use_artifact)


OnPhase = Callable[[str, "str | None"], None]  # (phase, what it works on, e.g. the model's name)
_CHECKED: set[tuple[str, bool]] = set()  # (model file, repack kernels) checked on this CPU by this process


def _quiet(phase: str, detail: str | None = None) -> None:
    pass


def load_models(program: Program, on_phase: OnPhase = _quiet) -> None:
    """Load now what the program's engines would load inside their first call: for an embedded (llama.cpp) engine
    the one-time check that llama.cpp runs the file on this CPU (phase ``check``), then, for every engine that has a
    ``load()``, the model (phase ``model``). Engines without one (hosted models, scripted ones) need nothing."""
    seen: set[int] = set()
    for role, lm in program.lms.items():
        if role == "judge":  # not called to answer a question (rag eval loads it when it judges)
            continue
        engine = getattr(lm, "engine", None)
        load = getattr(engine, "load", None)
        if not callable(load) or id(engine) in seen:
            continue
        seen.add(id(engine))
        name = getattr(lm, "model", None)
        _check_cpu(engine, name, on_phase)
        on_phase("model", name)
        load()


def _check_cpu(engine: Any, name: str | None, on_phase: OnPhase) -> None:
    import importlib.util

    from rag.lm import local

    if not isinstance(engine, local.LlamaCppEngine):
        return
    path = Path(engine.model_path).expanduser().resolve()
    if not path.is_file() or importlib.util.find_spec("llama_cpp") is None:
        return  # load() says what is wrong, as rag ask does
    key = (str(path), bool(local.use_extra_bufts(engine.extra_bufts)))
    if key in _CHECKED:
        return
    from rag.lm import probe

    on_phase("check", name)
    probe.ensure_engine_runs(path, extra_bufts=key[1])  # what load() runs first, recorded once per build and CPU
    _CHECKED.add(key)
