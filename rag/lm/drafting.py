"""Prompt-lookup drafting: guess the next tokens by copying what followed the same tokens earlier, and check
the guesses in one batch.

Much of what the small model writes is already in its prompt: the grader's JSON names passage ids and the
question's words, the answer quotes its passages and cites their ids. Where one decode step costs about as much
for several tokens as for one (a step spent reading the weights: many cores, a GPU), :class:`PromptLookup`
proposes up to ``num_tokens`` tokens (those that followed the latest earlier occurrence of the sequence's last 3,
else 2 tokens) and llama-cpp-python's ``generate`` evaluates them with the token just chosen in one batch. Each
position is then sampled as before (Sieve's greedy sampler and grammar check, ``rag.lm.sampling``); a guess is
kept only while it equals the token chosen at its position, and the first mismatch drops the rest from the KV
cache. A batched evaluation rounds differently from single steps, so near-ties can tip: the text is not always
the one token-by-token decoding writes.

**Off by default** (``llama_draft_tokens = 0``): on the 2-core Xeon this project is measured on, decoding is
compute-bound, a batch of n tokens costs most of n single steps (113 ms for 1 token, 163 ms for 2, 438 ms for 9
at a 1,100-token context), and the agent ran 0.89x as fast with 8 guessed tokens (1.33 tokens kept per step; 5 of
8 dev questions' runs differed somewhere): ``benchmarks/draft_decode.py``, ``benchmarks/results/draft_decode.md``.

:func:`install` sets this up on one ``llama_cpp.Llama``: the prompt is still evaluated with logits for its last
token only (llama-cpp-python would compute and copy them for every prompt token once a draft model is set),
and only the short batches of guesses get a row of logits per position, read in place by the sampler.
``llama._sieve_draft`` (the ``llama_draft_tokens`` setting, set per call by the engine) turns it on and off.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

NGRAMS = (3, 2)  # the longest tail that occurred before wins; a 1-token match guesses too often to pay


class PromptLookup:
    """A llama-cpp-python draft model: ``draft(input_ids)`` -> the tokens that followed the latest earlier
    occurrence of the last ``n`` tokens (``n`` in :data:`NGRAMS`, longest first), at most ``num_tokens``."""

    def __init__(self, num_tokens: int) -> None:
        if num_tokens < 1:
            raise ValueError("num_tokens must be at least 1")
        self.num_tokens = int(num_tokens)
        self.proposed = 0  # guesses made (tokens), for the benchmark

    def __call__(self, input_ids: np.ndarray, /, **_: Any) -> np.ndarray:
        ids = np.asarray(input_ids)
        for n in NGRAMS:
            if len(ids) <= n:
                continue
            windows = sliding_window_view(ids[:-1], n)  # every earlier window has a token after it
            hits = np.flatnonzero((windows == ids[-n:]).all(axis=1))
            if len(hits):
                start = int(hits[-1]) + n
                guess = ids[start:start + self.num_tokens].astype(np.intc)
                self.proposed += len(guess)
                return guess
        return np.empty(0, dtype=np.intc)


def install(llama: Any) -> Any:
    """Let ``llama`` draft with a :class:`PromptLookup` of ``llama._sieve_draft`` tokens when that is above 0;
    returns ``llama``. Safe to call again."""
    if getattr(llama, "_sieve_drafting", False):
        return llama
    evaluate = llama.eval
    drafts: dict[int, PromptLookup] = {}

    def eval_(tokens: Any) -> None:
        draft = llama.draft_model
        if draft is None or len(tokens) > draft.num_tokens + 1:
            return evaluate(tokens)  # a prompt: logits for its last token only
        # the token just chosen and the guesses after it: logits at every position, left in llama.cpp's buffer
        n_past = llama.n_tokens
        llama._ctx.kv_cache_seq_rm(-1, n_past, -1)
        llama._batch.set_batch(batch=list(tokens), n_past=n_past, logits_all=True)
        llama._ctx.decode(llama._batch)
        llama.input_ids[n_past:n_past + len(tokens)] = tokens
        llama.n_tokens += len(tokens)

    generate = llama.generate

    def generate_(*args: Any, **kwargs: Any) -> Any:
        wanted = int(getattr(llama, "_sieve_draft", 0) or 0)
        llama.draft_model = drafts.setdefault(wanted, PromptLookup(wanted)) if wanted > 0 else None
        return generate(*args, **kwargs)

    llama.eval = eval_
    llama.generate = generate_  # create_completion calls self.generate(...) once per completion
    llama._sieve_drafting = True
    return llama
