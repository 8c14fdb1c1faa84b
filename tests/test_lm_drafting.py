"""Prompt-lookup drafting (rag.lm.drafting): the guesses, and on the real models the same text as decoding one
token per step, in fewer steps."""

from __future__ import annotations

import numpy as np
import pytest

from rag.config import Settings
from rag.errors import ConfigError
from rag.lm import drafting
from rag.lm.grammar import bound_schema, json_grammar, open_last_string
from rag.lm.local import LlamaCppEngine, find_smollm2_gguf, load_llama


def ids(*tokens: int) -> np.ndarray:
    return np.array(tokens, dtype=np.intc)


def test_guesses_what_followed_the_latest_earlier_occurrence_of_the_last_tokens():
    draft = drafting.PromptLookup(3)
    # "5 6" occurs twice before the tail; the latest (followed by 9 9 4) wins over the first (followed by 7 8)
    assert draft(ids(5, 6, 7, 8, 1, 5, 6, 9, 9, 4, 2, 5, 6)).tolist() == [9, 9, 4]
    # a 3-token tail that occurred before wins over a later 2-token one
    assert draft(ids(1, 2, 3, 10, 11, 2, 3, 20, 1, 2, 3)).tolist() == [10, 11, 2]
    # the guess stops at the end of what is known, and a token seen only alone is no match
    assert draft(ids(4, 5, 6, 4, 5)).tolist() == [6, 4, 5]
    assert draft(ids(1, 2, 3, 4, 2)).tolist() == []
    assert draft(ids(7)).tolist() == [] and draft.proposed == 9


def test_setting_bounds_and_engine_state():
    assert Settings().llama_draft_tokens == 0  # off: slower on 2 cores (benchmarks/results/draft_decode.md)
    assert Settings().replace(llama_draft_tokens="8").llama_draft_tokens == 8
    with pytest.raises(ConfigError, match="llama_draft_tokens must be between 0 .off. and 32"):
        Settings().replace(llama_draft_tokens=33).validate()
    engine = LlamaCppEngine(find_smollm2_gguf(), draft_tokens=5)
    assert LlamaCppEngine.load_state(engine.dump_state()).draft_tokens == 5
    with pytest.raises(ValueError):
        drafting.PromptLookup(0)


SCHEMA = {"type": "object", "required": ["ids", "answer"],
          "properties": {"ids": {"type": "array", "items": {"type": "string"}}, "answer": {"type": "string"}}}
PROMPT = ('Repeat this sentence word for word: "The nonlocal statement causes the listed identifiers to refer to '
          'previously bound variables in the nearest enclosing scope excluding globals." '
          'Reply as JSON {"ids": ["compound#050"], "answer": <the sentence>}.')


def _decode(llm, draft: int, grammar, max_tokens: int) -> tuple[str, int]:
    llm.reset()
    llm._sieve_draft = draft
    steps = []
    inner = llm.eval
    llm.eval = lambda tokens: (steps.append(len(tokens)) if len(tokens) < 34 else None, inner(tokens))[1]
    try:
        out = llm.create_chat_completion(messages=[{"role": "user", "content": PROMPT}], max_tokens=max_tokens,
                                         temperature=0.0, grammar=grammar)
    finally:
        llm.eval = inner  # drafting's own wrapper
        llm._sieve_draft = 0
    return out["choices"][0]["message"]["content"], len(steps)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["smollm2", "default"])
def test_drafting_writes_the_same_text_in_fewer_steps(model: str):
    from rag.lm.models import DEFAULT_MODEL, model_path

    llm, _ = load_llama(find_smollm2_gguf() if model == "smollm2" else model_path(DEFAULT_MODEL), 2048)
    max_tokens = 64
    for schema in (SCHEMA, None):
        grammar = json_grammar(open_last_string(bound_schema(schema, max_tokens))[0]) if schema else None
        plain, plain_steps = _decode(llm, 0, grammar, max_tokens)
        drafted, drafted_steps = _decode(llm, 8, grammar, max_tokens)
        assert drafted == plain, schema
        assert plain_steps >= 10 and drafted_steps < plain_steps, (plain_steps, drafted_steps)
