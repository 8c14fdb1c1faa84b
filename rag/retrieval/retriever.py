"""Retrieval over an :class:`~rag.index.store.Index`: ``bm25``, ``dense`` or ``hybrid`` (RRF), optional rerank.

Hybrid retrieval takes the top ``candidates`` of each ranked list and fuses them with weighted
Reciprocal Rank Fusion, ``score(d) = sum_i w_i / (rrf_k + rank_i(d))``. An optional reranker then reorders
the top ``rerank_depth`` fused candidates: a cross-encoder by its scores, or the LM (``reranker="lm"``,
:mod:`rag.retrieval.rerank`) by one listwise call whose order is fused with the first stage's.

Choices, tuned on the polygraph dev half only (25 items with gold chunk ids; Recall@4 / MRR@4;
one item moves Recall@4 by up to 0.04, so only changes that held across settings were kept):

* baseline, plain MiniLM + bm25s (no stopwords) + RRF k=60 over 20 candidates, text only: 0.737 / 0.820;
* the indexed text of a chunk is ``title + section + text`` (rag.index.store.index_text): dense alone
  0.680 -> 0.740, bm25 alone 0.637 -> 0.717, hybrid 0.737 -> 0.787 (MRR 0.82 -> 0.80);
* bm25s with English stopwords and no stemming (stemming cost 0.03-0.07 MRR, see rag.index.store);
* (later, chosen on the built-in golden set's train+dev) the dense list ranks a chunk by its best window of 64
  word pieces, where the index has windows (rag.index.windows; Index.dense_search);
* (before windows) RRF k=60 with equal weights over 50 candidates per list: rrf_k in {5..100}, weights from 0.5 to
  1.5 and depths 20/50/100 all landed within 0.77-0.83 / 0.79-0.84 with no consistent winner, so the
  standard k=60 stays; min-max score fusion (0.77-0.81), a title-only bm25 list (worse), and dense
  pseudo-relevance feedback (Rocchio, no gain) were tried and dropped;
* (later, with windows, chosen on the built-in train+dev splits) the dense list weighs 2 and rrf_k is 10
  (``dense_weight``, ``rrf_k``; benchmarks/fusion_weights.py): windows made the dense list the stronger one, and
  equal weights let bm25 pull its good hits down;
* result, hybrid 0.787 / 0.797 (bm25 0.717 / 0.753, dense 0.740 / 0.760). The rest of the gap to the
  original 0.867 / 0.870 is its stronger embedding model (bge-small) and cross-encoder, neither of
  which ships offline; ``reranker`` accepts a local CrossEncoder when one is available.

Every :class:`Hit` records its rank and score in each stage (``bm25``, ``dense``, ``rrf``,
``rerank``), ``None`` where the chunk was not in that stage's candidate list, for traces and notebooks.

Distinct passages (``dedupe``, on by default): a chunk with the same words as a higher-ranked hit (case,
punctuation and whitespace aside) is left out, and the next distinct chunk takes its place; the kept hit lists the
left-out ids in ``duplicates``. Corpora repeat passages: 112 of the 576 chunks of the built-in Python reference
repeat another chunk's words (a section is both its own topic and part of its chapter's, underlined with "="
in one and "*" in the other), and without this 74 of its 157 golden questions got a passage twice in their top 4,
so a small model read it twice for nothing. Only duplicates within the fused candidate list (``candidates`` per
ranked list) are found, so no index-wide pass is needed.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rag.config import MODES, Settings, where_pairs
from rag.errors import ConfigError, InputError
from rag.index.store import Index
from rag.retrieval import filters

if TYPE_CHECKING:  # the query stages import DSPy; a search without them (rag search) never does
    from rag.retrieval.categories import Routing
    from rag.retrieval.expansion import Expansion
    from rag.retrieval.rerank import Reranking

STAGES = ("bm25", "dense", "rrf", "expand", "rerank")
MAX_QUERY_CHARS = 2000  # longer queries are cut (at a word boundary) before retrieval, with a warning
DEFAULT_WEIGHTS = {"bm25": 1.0, "dense": Settings.dense_weight}  # bm25 weighs 1; dense as the setting's default
RERANK_DEPTH = 10  # fused candidates a cross-encoder re-scores (an LM reranker reads its own ``depth``)
_WORD = re.compile(r"\w+")


@dataclass
class Hit:
    """One retrieved chunk. ``rank`` is 1-based; ``score`` is the final stage's score."""

    chunk_id: str
    text: str
    title: str
    source: str
    rank: int
    score: float
    stages: dict[str, dict[str, Any]]
    url: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    duplicates: list[str] = field(default_factory=list)  # ids of lower-ranked chunks with the same words, left out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Retrieval:
    """The hits of one search and what its stages said (a filter's reach, a stage that was skipped)."""

    hits: list[Hit] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    expansion: Expansion | None = None  # the rephrasings and hypothetical passage searched with the query
    reranking: Reranking | None = None  # the LM reranker's order and its call (rag.retrieval.rerank)
    routing: Routing | None = None  # the categories the category pre-filter chose (rag.retrieval.categories)


def _rows(ranked: list[tuple[int, float]]) -> list[int]:
    return [row for row, _ in ranked]


def _empty_stages() -> dict[str, dict[str, Any]]:
    return {name: {"rank": None, "score": None} for name in STAGES}


def rrf_fuse(rankings: dict[str, list[int]], k: int = 60, weights: dict[str, float] | None = None) -> list[tuple[int, float]]:
    """Weighted Reciprocal Rank Fusion of ranked row lists -> [(row, score)] best first (ties: first seen)."""
    weights = weights or {}
    scores: dict[int, float] = {}
    for name, rows in rankings.items():
        w = weights.get(name, 1.0)
        for rank, row in enumerate(rows, 1):
            scores[row] = scores.get(row, 0.0) + w / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])


class Retriever:
    """Ranked chunks for a query from one index.

    >>> r = Retriever.from_settings(load_settings())        # doctest: +SKIP
    >>> [h.chunk_id for h in r.search("what does assert do", k=2)]  # doctest: +SKIP
    """

    def __init__(self, index: Index, mode: str = "hybrid", top_k: int = 4, candidates: int = 50, rrf_k: int = Settings.rrf_k,
                 reranker: Any = None, weights: dict[str, float] | None = None, rerank_depth: int = RERANK_DEPTH,
                 max_query_chars: int = MAX_QUERY_CHARS, dedupe: bool = True, expansion_weight: float = 1.0,
                 latest_only: bool = False, where: dict[str, list[str]] | None = None, expander: Any = None,
                 router: Any = None) -> None:
        self.index = index
        self.mode = _check_mode(mode)
        for name, value in (("top_k", top_k), ("candidates", candidates), ("rrf_k", rrf_k), ("rerank_depth", rerank_depth),
                            ("max_query_chars", max_query_chars)):
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        self.top_k = top_k
        self.candidates = candidates
        self.rrf_k = rrf_k
        self.weights = {**DEFAULT_WEIGHTS, **(weights or {})}
        self.rerank_depth = rerank_depth
        self.max_query_chars = max_query_chars
        self.dedupe = dedupe
        self.expansion_weight = float(expansion_weight)  # RRF weight of each expansion list (the query's own weigh 1)
        self.expander = expander  # a QueryExpander run on each search that brings no expansion of its own
        self.where = dict(where or {})  # filters every search applies unless it names its own (--where)
        self.router = router  # a CategoryRouter choosing categories for a search without filters of its own
        self._categories: list[str] | None = None
        self.latest_only = latest_only  # drop chunks of superseded document versions (rag.retrieval.filters)
        self._newest_versions: dict[str, tuple] | None = None
        self._words: dict[int, str | None] = {}  # row -> its words (dedupe), computed once per chunk
        self._reranker_spec = reranker
        self._reranker: Any = None if isinstance(reranker, str) or reranker is None else reranker

    @classmethod
    def from_settings(cls, settings: Settings | None = None, **overrides: Any) -> "Retriever":
        """Load ``settings.index_dir`` and configure mode/top_k/candidates/rrf_k/reranker from ``settings``."""
        settings = settings or Settings()
        index = Index.load(settings.index_dir, settings)
        kwargs = dict(mode=settings.mode, top_k=settings.top_k, candidates=settings.candidates, rrf_k=settings.rrf_k,
                      weights={"dense": settings.dense_weight}, reranker=settings.reranker, dedupe=settings.dedupe,
                      expansion_weight=settings.expansion_weight,
                      latest_only=settings.latest_only, rerank_depth=settings.rerank_depth,
                      where=filters.parse_where(where_pairs(settings.where)))
        if str(settings.reranker or "").lower() == "lm":  # the LM reranker, on the configured dspy LM unless given one
            from rag.retrieval.rerank import LMReranker

            kwargs["reranker"] = LMReranker(settings.rerank_depth, settings.rerank_chars, settings.rerank_weight)
        kwargs.update(overrides)
        return cls(index, **kwargs)

    def warm_up(self) -> "Retriever":
        """Read the index parts and load the models this retriever's mode searches with (the bm25s index, the FAISS
        index and query encoder, the reranker), which the first :meth:`search` would otherwise do; returns self."""
        if self.mode in ("bm25", "hybrid"):
            self.index.bm25  # noqa: B018 - loads it
        if self.mode in ("dense", "hybrid"):
            self.index.faiss  # noqa: B018 - loads it
            self.index.query_encoder  # noqa: B018 - loads it
        self.reranker  # noqa: B018 - loads it
        return self

    @property
    def reranker(self) -> Any:
        """The cross-encoder (loaded on first use) or LM reranker, or None when reranking is off."""
        spec = self._reranker_spec
        if self._reranker is None and isinstance(spec, str) and spec.lower() == "lm":
            from rag.retrieval.rerank import LMReranker

            self._reranker = LMReranker(self.rerank_depth)  # on the configured dspy LM unless given one
        elif self._reranker is None and isinstance(spec, str) and spec.lower() not in ("", "none", "off"):
            from rag.index.embeddings import load_cross_encoder

            self._reranker = load_cross_encoder(self._reranker_spec)
        return self._reranker

    @reranker.setter
    def reranker(self, value: Any) -> None:
        """A cross-encoder, an :class:`~rag.retrieval.rerank.LMReranker`, a name or path to load, or None (off)."""
        self._reranker_spec = value
        self._reranker = None if isinstance(value, str) or value is None else value

    def prepare_query(self, query: str) -> str:
        """Validate and normalise a query: empty -> InputError; over-long -> cut with a warning."""
        if not isinstance(query, str):
            raise InputError(f"query must be a string, got {type(query).__name__}")
        try:
            query.encode("utf-8")
        except UnicodeEncodeError as exc:  # argv bytes that were not UTF-8 arrive as lone surrogates U+DC80-U+DCFF;
            bad = query[exc.start]  # any other lone surrogate (a JSON "\ud800" escape) stands for no byte
            what = (f"bad byte at character {exc.start + 1}: {bad.encode('utf-8', 'surrogateescape')!r}"
                    if "\udc80" <= bad <= "\udcff" else f"lone surrogate U+{ord(bad):04X} at character {exc.start + 1}")
            raise InputError(f"the query is not valid UTF-8 text ({what}); set your "
                             "terminal or script to UTF-8, or retype the query") from None
        text = " ".join(query.split())
        if not text:
            raise InputError('empty query: give a question, e.g. rag search "how does the with statement work?"')
        if len(text) > self.max_query_chars:
            cut = text.rfind(" ", 0, self.max_query_chars)
            cut = cut if cut > self.max_query_chars // 2 else self.max_query_chars
            warnings.warn(f"query is {len(text):,} characters; only the first {cut:,} are used for retrieval",
                          UserWarning, stacklevel=3)
            text = text[:cut]
        return text

    def search(self, query: str, k: int | None = None, mode: str | None = None, **stages: Any) -> list[Hit]:
        """The top ``k`` (default ``top_k``) chunks for ``query`` in ``mode`` (default ``self.mode``); ``stages`` as
        for :meth:`retrieve`."""
        return self.retrieve(query, k, mode, **stages).hits

    def retrieve(self, query: str, k: int | None = None, mode: str | None = None, *,
                 expansion: Expansion | None = None, where: dict[str, list[str]] | None = None) -> Retrieval:
        """The top ``k`` chunks for ``query``, with what each stage did.

        Args:
            query: the search text.
            k: how many hits (default ``top_k``).
            mode: ``bm25``, ``dense`` or ``hybrid`` (default ``self.mode``).
            expansion: rephrasings and a hypothetical passage (:class:`~rag.retrieval.expansion.QueryExpander`);
                each rephrasing is searched like the query, the passage by embedding, and every list is fused
                with the query's by RRF (each expansion list weighs ``expansion_weight``).
            where: metadata filters, field -> accepted values (:mod:`rag.retrieval.filters`); only matching
                chunks are searched.
        """
        mode = _check_mode(mode or self.mode)
        k = self.top_k if k is None else k
        if not isinstance(k, int) or k < 1:
            raise ConfigError(f"k must be an integer >= 1, got {k!r}")
        text = self.prepare_query(query)
        depth = max(self.candidates, k)
        out = Retrieval()
        if expansion is None and self.expander is not None and self.expander.active:
            expansion = self.expander(text)
            out.notes.extend(expansion.notes)
        out.expansion = expansion
        where = self.where if where is None else where
        allowed = filters.allowed_rows(self.index, where) if where else None
        if allowed is not None:
            out.notes.append(f"filter {filters.describe(where)}: {len(allowed)} of {len(self.index)} passages searched")
        elif self.router is not None:
            allowed = self._route(text, k, out)
        stages: dict[int, dict[str, dict[str, Any]]] = {}

        def note(stage: str, ranked: list[tuple[int, float]]) -> list[int]:
            for rank, (row, score) in enumerate(ranked, 1):
                stages.setdefault(row, _empty_stages())[stage] = {"rank": rank, "score": round(float(score), 6)}
            return [row for row, _ in ranked]

        texts = {"": text}
        if expansion is not None:
            texts.update({f":q{i}": q for i, q in enumerate(expansion.queries, 1)})
        lists: dict[str, list[tuple[int, float]]] = {}
        if mode in ("bm25", "hybrid"):
            for tag, q in texts.items():
                lists["bm25" + tag] = self._lexical(q, depth, allowed)
        if mode in ("dense", "hybrid"):
            dense_texts = dict(texts)
            if expansion is not None and expansion.passage:
                dense_texts[":hyde"] = expansion.passage
            vectors = self._embed(list(dense_texts.values()))
            for (tag, _), vector in zip(dense_texts.items(), vectors):
                lists["dense" + tag] = self._dense(vector, depth, allowed)
        elif expansion is not None and expansion.passage:
            out.notes.append("hyde: the hypothetical passage is searched by embedding; bm25 mode has none")
        own = {name: lists[name] for name in ("bm25", "dense") if name in lists}
        for name, ranked in own.items():
            note(name, ranked)
        if mode == "hybrid":
            final, final_stage = note("rrf", rrf_fuse({n: _rows(r) for n, r in own.items()}, self.rrf_k, self.weights)[:depth]), "rrf"
        else:
            final, final_stage = _rows(lists[mode]), mode
        extra = {name: ranked for name, ranked in lists.items() if name not in own}
        if extra:
            weights = {**self.weights, **{name: self.expansion_weight for name in extra}}
            fused = rrf_fuse({n: _rows(r) for n, r in lists.items()}, self.rrf_k, weights)[:depth]
            final, final_stage = note("expand", fused), "expand"
            found: dict[int, list[str]] = {}
            for name, ranked in lists.items():
                for row in _rows(ranked):
                    found.setdefault(row, []).append(name)
            for row in final:
                stages[row]["expand"]["found_by"] = found.get(row, [])
        if self.latest_only and final:
            final, dropped = filters.latest_versions(final, self.index, self._newest())
            out.notes.extend(dropped)
        if getattr(self.reranker, "listwise", False) and final:
            fused, listed = self._lm_rerank(text, final, out)
            final, final_stage = note("rerank", fused), "rerank"
            for rank, row in enumerate(listed, 1):
                stages[row]["rerank"]["lm_rank"] = rank  # where the LM put it (absent: read, not listed)
        elif self.reranker is not None and final:
            pool = final[: max(self.rerank_depth, k)]
            scores = np.asarray(self.reranker.predict([(text, self.index.chunks[row].text) for row in pool]), dtype=np.float64)
            order = np.argsort(-scores, kind="stable")
            final = note("rerank", [(pool[i], float(scores[i])) for i in order])
            final_stage = "rerank"
        out.hits = self._distinct(final, stages, final_stage, k)
        return out

    def _lm_rerank(self, text: str, final: list[int], out: Retrieval) -> tuple[list[tuple[int, float]], list[int]]:
        """``final`` reordered by RRF of itself and the LM's list over its first distinct candidates, and that list."""
        pool, keys = [], set()
        for row in final:
            key = self._key(row) if self.dedupe else None
            if key is None or key not in keys:
                pool.append(row)
                keys.add(key)
            if len(pool) == self.reranker.depth:
                break
        reranking = self.reranker(text, [self.index.chunks[row] for row in pool])
        out.reranking = reranking
        out.notes.extend(reranking.notes)
        listed = [pool[i] for i in reranking.order]
        return rrf_fuse({"fused": final, "lm": listed}, self.rrf_k, {"fused": 1.0, "lm": self.reranker.weight}), listed

    def _route(self, text: str, k: int, out: Retrieval) -> set[int] | None:
        """The rows of the categories the router chose, or None (the whole index) when it chose none or they hold
        fewer than ``k`` passages."""
        from rag.retrieval.categories import index_categories

        if self._categories is None:
            self._categories = index_categories(self.index)
        routing = out.routing = self.router(text, self._categories)
        out.notes.extend(routing.notes)
        if not routing.chosen:
            return None
        where = {"category": routing.chosen}
        rows = filters.allowed_rows(self.index, where)
        if len(rows) < k:
            out.notes.append(f"route: {filters.describe(where)} holds {len(rows)} passages, fewer than {k}; "
                             "the whole index is searched")
            return None
        out.notes.append(f"route: {filters.describe(where)}: {len(rows)} of {len(self.index)} passages searched")
        return rows

    def _newest(self) -> dict[str, tuple]:
        if self._newest_versions is None:
            self._newest_versions = filters.newest_versions(self.index)
        return self._newest_versions

    def _lexical(self, text: str, depth: int, allowed: set[int] | None) -> list[tuple[int, float]]:
        ranked = self.index.bm25_search(self.index.bm25_query(text), len(self.index) if allowed is not None else depth)
        return ranked if allowed is None else [(r, s) for r, s in ranked if r in allowed][:depth]

    def _dense(self, vector: np.ndarray, depth: int, allowed: set[int] | None) -> list[tuple[int, float]]:
        ranked = self.index.dense_search(vector, len(self.index) if allowed is not None else depth)
        return ranked if allowed is None else [(r, s) for r, s in ranked if r in allowed][:depth]

    def _embed(self, texts: list[str]) -> list[np.ndarray]:
        if len(texts) == 1:
            return [self.index.embed_query(texts[0])]
        return list(np.asarray(self.index.query_encoder.encode(texts), dtype=np.float32))

    def _distinct(self, final: list[int], stages: dict[int, dict[str, dict[str, Any]]], final_stage: str, k: int) -> list[Hit]:
        """The first ``k`` hits of ``final``, a passage with the same words as a kept one folded into it (``dedupe``)."""
        hits: list[Hit] = []
        kept: dict[str, Hit] = {}  # a text's words -> the hit that brings them
        for row in final:
            chunk = self.index.chunks[row]
            key = self._key(row) if self.dedupe else None
            if key is not None and key in kept:
                kept[key].duplicates.append(chunk.id)
                continue
            if len(hits) == k:
                if not self.dedupe:
                    break
                continue  # still looking for duplicates of the kept hits further down the list
            st = stages[row]
            hit = Hit(chunk_id=chunk.id, text=chunk.text, title=chunk.title, source=chunk.source, rank=len(hits) + 1,
                      score=st[final_stage]["score"], stages=st, url=chunk.url, meta=dict(chunk.meta))
            hits.append(hit)
            if key is not None:
                kept[key] = hit
        return hits

    def _key(self, row: int) -> str | None:
        if row not in self._words:
            self._words[row] = _words(self.index.chunks[row].text)
        return self._words[row]


def _words(text: str) -> str | None:
    """What makes two passages the same: their words, lower-cased (None for a text without any: never a repeat)."""
    return " ".join(_WORD.findall(text.lower())) or None


def _check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ConfigError(f"unknown retrieval mode {mode!r}; allowed: {', '.join(MODES)}")
    return mode
