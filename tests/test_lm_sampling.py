"""The lazy grammar check (rag.lm.sampling) writes exactly the tokens llama-cpp-python's sampler chain writes,
on the real models: greedy, under JSON-schema grammars and without one."""

from __future__ import annotations

import pytest

from rag.config import Settings
from rag.errors import ConfigError
from rag.lm import sampling
from rag.lm.grammar import bound_schema, json_grammar, open_last_string
from rag.lm.local import LlamaCppEngine, find_smollm2_gguf, load_llama

pytestmark = pytest.mark.slow

SCHEMAS = [
    {"type": "object", "required": ["subject", "relevant", "reason"],
     "properties": {"subject": {"type": "string", "maxLength": 60}, "relevant": {"type": "boolean"},
                    "reason": {"type": "string", "maxLength": 120}}},
    {"type": "object", "required": ["answer", "citations"],
     "properties": {"answer": {"type": "string"}, "citations": {"type": "array", "items": {"type": "string"}}}},
    {"type": "object", "required": ["topic"],
     "properties": {"topic": {"type": "string", "enum": ["sports", "science", "politics", "other"]}}},
    None,  # any JSON object
]
PROMPTS = [
    "Is this passage relevant to 'What does nonlocal do?'? Passage: The nonlocal statement causes the listed "
    "identifiers to refer to previously bound variables in the nearest enclosing scope excluding globals.",
    "Write a short answer with citations [a#1] to: what is a lambda? Passage [a#1]: Lambda expressions are used "
    "to create anonymous functions.",
    "Classify: 'The team won the final 3-1 after extra time.' Reply in ```json fences with a comment first.",
]


def _run(llm, prompt: str, grammar, lazy: bool, max_tokens: int = 48) -> tuple[str, object]:
    llm.reset()
    llm._sieve_lazy_grammar_on = lazy
    out = llm.create_chat_completion(messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens,
                                     temperature=0.0, grammar=grammar)
    return out["choices"][0]["message"]["content"], llm._sampler


def _same_tokens_both_ways(llm, schemas, prompts, max_tokens=48) -> tuple[int, int]:
    checks = full = 0
    for schema in schemas:
        grammar = json_grammar(open_last_string(bound_schema(schema, max_tokens))[0] if schema else None)
        for prompt in prompts:
            chain_text, chain_sampler = _run(llm, prompt, grammar, lazy=False, max_tokens=max_tokens)
            lazy_text, lazy_sampler = _run(llm, prompt, grammar, lazy=True, max_tokens=max_tokens)
            assert not isinstance(chain_sampler, sampling.LazyGrammarSampler)
            assert isinstance(lazy_sampler, sampling.LazyGrammarSampler)
            assert lazy_text == chain_text, (schema, prompt)
            checks, full = checks + lazy_sampler.checks, full + lazy_sampler.full_passes
    return checks, full


def test_lazy_check_writes_the_chains_tokens_on_smollm2():
    llm, _ = load_llama(find_smollm2_gguf(), 2048)
    checks, full = _same_tokens_both_ways(llm, SCHEMAS, PROMPTS)
    assert full > 0, "no step needed the whole-vocabulary pass: the fallback was not exercised"
    assert checks > 2 * full, f"the top token broke the grammar on {full} of {checks} steps"  # 145 of 401 seen


def test_lazy_check_writes_the_chains_tokens_on_the_default_model():
    """Qwen's 151,936-token vocabulary, where the chain's whole-vocabulary pass costs the most."""
    from rag.lm.models import DEFAULT_MODEL, model_path

    llm, _ = load_llama(model_path(DEFAULT_MODEL), 2048)
    checks, full = _same_tokens_both_ways(llm, SCHEMAS[:2], PROMPTS[:2], max_tokens=32)
    assert checks > full > 0


def test_free_text_greedy_is_the_chains_argmax():
    llm, _ = load_llama(find_smollm2_gguf(), 2048)
    for prompt in PROMPTS:
        chain_text, _ = _run(llm, prompt, None, lazy=False)
        lazy_text, sampler = _run(llm, prompt, None, lazy=True)
        assert isinstance(sampler, sampling.LazyGrammarSampler) and sampler.checks == 0
        assert lazy_text == chain_text


def test_other_sampling_keeps_the_stock_chain():
    llm, _ = load_llama(find_smollm2_gguf(), 2048)
    llm._sieve_lazy_grammar_on = True
    grammar = json_grammar(SCHEMAS[0])
    greedy = dict(top_k=40, top_p=0.95, min_p=0.05, typical_p=1.0, temp=0.0, repeat_penalty=1.0,
                  frequency_penalty=0.0, presence_penalty=0.0, logits_processor=None, grammar=grammar)
    assert isinstance(llm._init_sampler(**greedy), sampling.LazyGrammarSampler)
    for change in ({"temp": 0.7}, {"repeat_penalty": 1.1}, {"frequency_penalty": 0.5}, {"presence_penalty": 0.5},
                   {"logits_processor": [lambda ids, logits: logits]}):
        assert not isinstance(llm._init_sampler(**{**greedy, **change}), sampling.LazyGrammarSampler), change
    llm._sieve_lazy_grammar_on = False
    assert not isinstance(llm._init_sampler(**greedy), sampling.LazyGrammarSampler)
    assert sampling.install(llm) is llm  # installing twice wraps once


def test_setting_reaches_the_engine_and_its_state():
    settings = Settings().replace(llama_lazy_grammar="false")
    assert settings.llama_lazy_grammar is False
    engine = LlamaCppEngine(find_smollm2_gguf(), lazy_grammar=settings.llama_lazy_grammar)
    assert LlamaCppEngine.load_state(engine.dump_state()).lazy_grammar is False
    assert LlamaCppEngine(find_smollm2_gguf()).lazy_grammar is True
    with pytest.raises(ConfigError, match="llama_lazy_grammar"):
        Settings().replace(llama_lazy_grammar="sometimes")
