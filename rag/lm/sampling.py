"""Greedy decoding under a JSON grammar, checking the grammar on one token instead of on the whole vocabulary.

llama-cpp-python samples with a chain (penalties -> grammar -> greedy) that runs llama.cpp's grammar over all
151,936 candidate tokens of a Qwen vocabulary at every step: about 30 ms a token on 2 cores, a quarter of a
1.5B model's decode time (`benchmarks/grammar_decode.py`). Under greedy decoding the grammar only matters when
the model's own top token breaks it, so :class:`LazyGrammarSampler` does what llama.cpp's own ``common_sampler``
does: take the top token, ask the grammar about that one token, and run the grammar over the whole vocabulary only
when it is rejected. The chosen token is the same either way (the top token, when the grammar allows it, is also
the top allowed token; ties break to the lowest id in both), so outputs are identical, not approximately so:
``tests/test_lm_sampling.py`` compares them on the real model.

:func:`install` puts it under one ``llama_cpp.Llama``: a call with a grammar, temperature 0 and neutral penalties
(or without a grammar) gets the lazy sampler, unless ``llama._sieve_lazy_grammar_on`` is false (the ``llama_lazy_grammar`` setting); any
other call gets llama-cpp-python's own chain.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np


class LazyGrammarSampler:
    """Greedy sampling, constrained by a grammar when one is given; the grammar's state advances with every
    accepted token. Without a grammar it is a plain argmax over the logits, which also skips the chain's copy of
    the whole vocabulary into a candidate list at every step."""

    def __init__(self, llama: Any, grammar: Any | None) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._n_vocab = int(llama.n_vocab())
        self._grammar = None
        if grammar is not None:
            self._grammar = llama_cpp.llama_sampler_init_grammar(
                llama._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
            if not self._grammar:
                raise ValueError("llama.cpp could not compile the grammar")
        self._one = llama_cpp.llama_token_data()
        self._one_array = llama_cpp.llama_token_data_array(ctypes.pointer(self._one), 1, -1, False)
        self._all: np.ndarray | None = None  # the whole vocabulary, for the rare rejected step
        self.checks = self.full_passes = 0

    def sample(self, ctx: Any, idx: int = -1) -> int:
        lib = self._lib
        pointer = lib.llama_get_logits_ith(ctx.ctx, idx)
        if not pointer:
            raise RuntimeError(f"llama.cpp has no logits for position {idx}")
        logits = np.ctypeslib.as_array(pointer, shape=(self._n_vocab,))
        token = int(np.argmax(logits))
        if self._grammar is None:
            return token
        self.checks += 1
        self._one.id, self._one.logit, self._one.p = token, float(logits[token]), 0.0
        self._one_array.data, self._one_array.size, self._one_array.selected = ctypes.pointer(self._one), 1, -1
        lib.llama_sampler_apply(self._grammar, ctypes.byref(self._one_array))
        if math.isinf(self._one.logit):  # the model's top token breaks the grammar: filter the whole vocabulary
            token = self._best_allowed(logits)
        lib.llama_sampler_accept(self._grammar, token)
        return token

    def _best_allowed(self, logits: np.ndarray) -> int:
        lib = self._lib
        self.full_passes += 1
        if self._all is None:
            self._all = np.zeros(self._n_vocab, dtype=np.dtype([("id", np.int32), ("logit", np.float32),
                                                                ("p", np.float32)], align=True))
        data = self._all
        data["id"] = np.arange(self._n_vocab, dtype=np.int32)
        data["logit"] = logits
        data["p"] = 0.0
        array = lib.llama_token_data_array(data.ctypes.data_as(lib.llama_token_data_p), self._n_vocab, -1, False)
        lib.llama_sampler_apply(self._grammar, ctypes.byref(array))
        if array.size != self._n_vocab:
            raise RuntimeError("llama.cpp's grammar changed the candidate list's size")
        return int(np.argmax(data["logit"]))  # the first of equal maxima, as llama.cpp's greedy sampler picks

    def close(self) -> None:
        if self._grammar:
            self._lib.llama_sampler_free(self._grammar)
            self._grammar = None

    def __del__(self) -> None:
        self.close()


def install(llama: Any) -> Any:
    """Make ``llama`` decode greedy grammar-constrained calls with :class:`LazyGrammarSampler`; returns it."""
    if getattr(llama, "_sieve_lazy_grammar", False):
        return llama
    original = llama._init_sampler

    def init_sampler(**options: Any) -> Any:
        grammar = options.get("grammar")
        neutral = (options.get("repeat_penalty", 1.0) == 1.0 and not options.get("frequency_penalty")
                   and not options.get("presence_penalty") and options.get("logits_processor") is None)
        lazy = getattr(llama, "_sieve_lazy_grammar_on", True)
        if lazy and options.get("temp") == 0.0 and neutral:
            return LazyGrammarSampler(llama, grammar)
        return original(**options)

    llama._init_sampler = init_sampler  # generate() calls self._init_sampler(**keywords) once per completion
    llama._sieve_lazy_grammar = True
    return llama
