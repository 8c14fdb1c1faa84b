"""Assemble the agent for a configuration: index + retriever, LMs per role, and the compiled artifact.

``rag ask``, ``rag eval`` and the notebooks all build the program here, so they run the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import dspy

from rag import artifacts
from rag.agent import Sieve
from rag.config import Settings


@dataclass
class Program:
    agent: Sieve
    artifact: artifacts.Artifact | None
    models: dict[str, str]
    lms: dict[str, dspy.BaseLM]
    messages: list[str] = field(default_factory=list)  # diagnostics for stderr

    @property
    def description(self) -> str:
        if self.artifact is None:
            return "uncompiled signatures (no fitting artifact in artifacts/)"
        return f"compiled artifact {self.artifact.name} ({self.artifact.manifest.get('optimizer', '?')})"


def build_program(settings: Settings, *, use_artifact: bool = True, retriever=None) -> Program:
    """The agent for ``settings``: uncompiled, or with the artifact that fits (``settings.artifact`` names one)."""
    from rag.lm.roles import lms_for_roles, resolve_specs
    from rag.retrieve import Retriever

    retriever = retriever or Retriever.from_settings(settings)
    lms = lms_for_roles(settings)
    models = resolve_specs(settings)
    agent = Sieve(retriever, max_rewrites=settings.max_rewrites, use_reflection=settings.reflection,
                  top_k=settings.top_k, lms=lms)
    artifact, messages = None, []
    if use_artifact:
        artifact, messages = artifacts.select(Path(settings.artifacts_dir), models, name=settings.artifact,
                                              fingerprint=retriever.index.fingerprint)
        if artifact is not None:
            artifacts.apply(agent, artifact)
    return Program(agent=agent, artifact=artifact, models=models, lms=lms, messages=messages)
