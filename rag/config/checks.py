"""Which settings are valid: a choice among its field's allowed values, a count in its range, and the settings that
need another with them (``router = learned`` needs ``router_labels``); each refusal a ConfigError naming the field,
the value and what to write instead."""

from __future__ import annotations

import math

from rag.config.settings import (
    ANSWER_CONTEXTS,
    CRITIC_CHECKS,
    CRITIC_MODES,
    DATA_ROUTES,
    DEMO_POSITIONS,
    DENSE_INDEXES,
    EMBEDDING_PRECISIONS,
    EMBEDDING_RUNTIMES,
    EXTRA_BUFTS,
    MODES,
    ROUTERS,
    SQL_LINKS,
    SQL_OUTPUTS,
    Settings,
    where_pairs,
)
from rag.errors import ConfigError

CHOICES = {  # a field that takes one of a few values: those values
    "mode": MODES,
    "data_route": DATA_ROUTES,
    "sql_links": SQL_LINKS,
    "sql_output": SQL_OUTPUTS,
    "router": ROUTERS,
    "critic": CRITIC_MODES,
    "llama_extra_bufts": EXTRA_BUFTS,
    "embedding_runtime": EMBEDDING_RUNTIMES,
    "dense_index": DENSE_INDEXES,
    "embedding_precision": EMBEDDING_PRECISIONS,
    "answer_context": ANSWER_CONTEXTS,
    "demo_position": DEMO_POSITIONS,
}


def validate(settings: Settings) -> Settings:
    """``settings`` when every value is allowed and they fit together, else the first ConfigError."""
    for name, allowed in CHOICES.items():
        if getattr(settings, name) not in allowed:
            raise ConfigError(f"{name}={getattr(settings, name)!r} is not allowed; use one of: {', '.join(allowed)}")
    for name in ("top_k", "candidates", "rrf_k", "chunk_size", "n_ctx", "embedded_max_tokens", "lm_timeout",
                 "max_file_mb", "rerank_depth", "rerank_chars", "history_chars"):
        if getattr(settings, name) < 1:
            raise ConfigError(f"{name} must be >= 1, got {getattr(settings, name)}")
    for pair in where_pairs(settings.where):  # the syntax only; the fields are checked against the index
        name, sep, values = pair.partition("=")
        if not sep or not name.strip() or not values.strip():
            raise ConfigError(f"where {pair!r}: expected field=value, e.g. where = \"category=travel\"")
    checks = settings.critic_checks.split("+")
    if not settings.critic_checks or any(c not in CRITIC_CHECKS for c in checks) or len(set(checks)) < len(checks):
        raise ConfigError(f"critic_checks={settings.critic_checks!r} is not allowed; join one or more of "
                          f"{', '.join(CRITIC_CHECKS)} with '+', e.g. critic_checks = \"numbers+citations+columns+filters+period+records+fill\"")
    labelled = settings.router_labels.strip() and settings.router_splits.strip()
    if settings.router in ("learned", "cues+learned") and not labelled:
        raise ConfigError(f"router = {settings.router} needs router_labels = FILE (questions labelled with \"route\") "
                          "and router_splits (e.g. train,dev); or use router = cues, which needs no labels")
    if not 0.0 <= settings.unanswerable_margin < 1.0:
        raise ConfigError(f"unanswerable_margin={settings.unanswerable_margin!r} is not allowed; use a cosine margin "
                          "from 0 up to (not including) 1")
    if settings.unanswerable_labels.strip() and not settings.unanswerable_splits.strip():
        raise ConfigError("unanswerable_labels needs unanswerable_splits, the splits to learn from (e.g. train,dev "
                          "or all)")
    if not 0.5 <= settings.router_overrule <= 1.0:
        raise ConfigError(f"router_overrule={settings.router_overrule!r} is not allowed; use a probability from 0.5 to "
                          "1.0 (1.0: the cues are never overruled)")
    if settings.sql_examples.strip() and not settings.sql_example_splits.strip():
        raise ConfigError("sql_examples needs sql_example_splits, the splits to show (e.g. train,dev)")
    if not 1 <= settings.sql_samples <= 8:
        raise ConfigError(f"sql_samples must be between 1 (the greedy statement alone) and 8, got {settings.sql_samples}")
    if not 0 < settings.sql_sample_temperature <= 2:
        raise ConfigError(f"sql_sample_temperature must be above 0 and at most 2, got {settings.sql_sample_temperature}")
    for name, top in (("sql_corrections", 3), ("critic_retries", 3), ("sql_demos", 8)):
        if not 0 <= getattr(settings, name) <= top:
            raise ConfigError(f"{name} must be between 0 and {top}, got {getattr(settings, name)}")
    if settings.sql_rows < 1 or settings.sql_timeout_s <= 0:
        raise ConfigError(f"sql_rows must be >= 1 and sql_timeout_s > 0, got {settings.sql_rows} and {settings.sql_timeout_s}")
    for name in ("dense_weight", "expansion_weight", "rerank_weight"):
        if not math.isfinite(getattr(settings, name)) or getattr(settings, name) <= 0:
            raise ConfigError(f"{name} must be a number > 0 (an RRF list weight), got {getattr(settings, name)}")
    if settings.context_tokens < 0:
        raise ConfigError(f"context_tokens must be >= 0 (0 = no budget), got {settings.context_tokens}")
    if not 0 <= settings.expand_queries <= 8:
        raise ConfigError(f"expand_queries must be between 0 (off) and 8, got {settings.expand_queries}")
    if not 0 <= settings.llama_draft_tokens <= 32:
        raise ConfigError(f"llama_draft_tokens must be between 0 (off) and 32, got {settings.llama_draft_tokens}")
    if settings.n_threads is not None and settings.n_threads < 1:
        raise ConfigError(f"n_threads must be >= 1 (or unset for every core), got {settings.n_threads}")
    if settings.dense_windows != 0 and not 16 <= settings.dense_windows <= 512:
        raise ConfigError(f"dense_windows must be 0 (off) or from 16 to 512 word pieces, got {settings.dense_windows}")
    if settings.embedding_precision == "int8" and settings.embedding_runtime != "onnx":
        raise ConfigError(f"embedding_precision={settings.embedding_precision} needs embedding_runtime=onnx "
                          "(sentence-transformers embeds in fp32)")
    if settings.lm_max_retries < 0:
        raise ConfigError(f"lm_max_retries must be >= 0, got {settings.lm_max_retries}")
    if settings.grade_passage_chars is not None and settings.grade_passage_chars < 1:
        raise ConfigError(f"grade_passage_chars must be >= 1 (or unset for whole passages), got {settings.grade_passage_chars}")
    if settings.max_rewrites < 0:
        raise ConfigError(f"max_rewrites must be >= 0, got {settings.max_rewrites}")
    if settings.history_turns < 0:
        raise ConfigError(f"history_turns must be >= 0 (0 = follow-ups are not condensed), got {settings.history_turns}")
    if not 0 <= settings.chunk_overlap < settings.chunk_size:
        raise ConfigError(f"chunk_overlap must be in [0, chunk_size), got {settings.chunk_overlap}")
    return settings
