"""What a draft makes, before any model call: the type mix, the seed passages and the items' ids, types and splits.

Seeds (:func:`sample_seeds`) are passages that state something (:func:`draftable`: not empty, not a contents page,
rag.curate.seedcheck), taken round-robin over documents (``chunk.source``) and, within a document, round-robin over
its sections (``chunk.title``), every order drawn from ``random.Random(seed)``. The mix (``--types``, weights)
becomes counts by largest remainder (:func:`type_counts`), dealt evenly (:func:`spread`) along the seeds taken
document by document; splits are dealt per type, sorted by document, train/test/dev/train/test (40/20/40).
:func:`plan_draft` puts it together for rag.curate.draft.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rag.curate.seedcheck import lists_headings
from rag.errors import InputError
from rag.eval.golden import TYPES
from rag.ingest.chunking import Chunk

DEFAULT_TYPES = "answerable=0.6,vague=0.15,unanswerable=0.25"
SPLIT_CYCLE = ("train", "test", "dev", "train", "test")  # 40/20/40 train/dev/test


def parse_types(spec: str | None) -> dict[str, float]:
    """``answerable=0.6,vague=0.15,unanswerable=0.25`` -> shares per type summing to 1 (weights are normalised; a
    type left out gets none). InputError naming ``--types`` for an unknown type or a value that is no number."""
    example = f"e.g. --types {DEFAULT_TYPES}"
    weights: dict[str, float] = {}
    for part in (spec if spec is not None else DEFAULT_TYPES).split(","):
        if not part.strip():
            continue
        name, _, value = (s.strip() for s in part.partition("="))
        if name not in TYPES:
            raise InputError(f"--types: unknown type {name!r}; the types are {', '.join(TYPES)}, {example}")
        try:
            weight = float(value)
        except ValueError:
            raise InputError(f"--types: {part.strip()!r} gives no number; write type=fraction, {example}") from None
        if not math.isfinite(weight) or weight < 0:
            raise InputError(f"--types: {part.strip()!r} must be a number >= 0, {example}")
        weights[name] = weight
    total = sum(weights.values())
    if total <= 0:
        raise InputError(f"--types gives no type a share above 0; {example}")
    return {t: weights.get(t, 0.0) / total for t in TYPES}


def type_counts(n: int, mix: Mapping[str, float]) -> dict[str, int]:
    """Counts per type summing to ``n``, by largest remainder (ties in the order of TYPES)."""
    raw = {t: n * mix.get(t, 0.0) for t in TYPES}
    counts = {t: int(v) for t, v in raw.items()}
    for t in sorted(TYPES, key=lambda t: (counts[t] - raw[t], TYPES.index(t)))[:n - sum(counts.values())]:
        counts[t] += 1
    return counts


def spread(counts: Mapping[str, int]) -> list[str]:
    """The types dealt evenly along ``sum(counts)`` positions: each next position goes to the type furthest behind
    its share (never past its count, since the shortfalls sum to 1 at every step)."""
    n, given = sum(counts.values()), dict.fromkeys(counts, 0)
    out = []
    for i in range(1, n + 1):
        t = max(counts, key=lambda t: (counts[t] * i / n - given[t], -TYPES.index(t)))
        given[t] += 1
        out.append(t)
    return out


def _round_robin(queues: Sequence[Sequence[Any]]) -> list[Any]:
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


def sample_seeds(chunks: Sequence[Chunk], n: int, seed: int = 0) -> list[Chunk]:
    """``n`` passages with text, stratified by document and then section (module docstring); the same chunks and
    seed give the same seeds."""
    rng = random.Random(seed)
    docs: dict[str, dict[str, list[Chunk]]] = {}
    for c in filter(draftable, chunks):
        docs.setdefault(c.source, {}).setdefault(c.title, []).append(c)
    per_doc = []
    for source in rng.sample(sorted(docs), len(docs)):
        sections = [rng.sample(cs, len(cs)) for _, cs in sorted(docs[source].items())]
        rng.shuffle(sections)
        per_doc.append(_round_robin(sections))
    return _round_robin(per_doc)[:n]


@dataclass
class Planned:
    """One item to draft: its id, type, seed passage and split."""

    id: str
    type: str
    seed: Chunk
    split: str


def plan_draft(chunks: Sequence[Chunk], n: int, mix: Mapping[str, float], seed: int = 0) -> list[Planned]:
    """The items a draft makes, in drafting order; InputError for an empty index or an ``n`` it cannot hold."""
    usable = sum(map(draftable, chunks))
    if not usable:
        raise InputError("the index holds no passages to draft questions from; index your documents first "
                         "(rag index DOCS --index-dir DIR) and pass that --index-dir")
    if n > usable:
        raise InputError(f"--n {n} is more than this index allows: each item needs a seed passage of its own and the "
                         f"index holds {usable} that state something (not empty, not a contents page); give --n "
                         f"{usable} or fewer, or index more documents")
    seeds, dealt = sample_seeds(chunks, n, seed), spread(type_counts(n, mix))
    by_doc = sorted(range(n), key=lambda i: (seeds[i].source, i))  # each document's seeds in a run of their own
    types = [""] * n
    for j, i in enumerate(by_doc):  # dealt along the documents in turn: every document gets its share of each type
        types[i] = dealt[j]
    split_of: dict[int, str] = {}
    for t in TYPES:  # per type, sorted by document: dealt train/test/dev/train/test
        mine = sorted((i for i in range(n) if types[i] == t), key=lambda i: (seeds[i].source, i))
        split_of.update({i: SPLIT_CYCLE[j % len(SPLIT_CYCLE)] for j, i in enumerate(mine)})
    numbers: Counter[str] = Counter()
    plan = []
    for i in range(n):
        numbers[types[i]] += 1
        plan.append(Planned(f"draft-{types[i][0]}-{numbers[types[i]]:03d}", types[i], seeds[i], split_of[i]))
    return plan


def draftable(chunk: Chunk) -> bool:
    """Whether ``chunk`` can seed a draft: it has text, and more than a list of headings (rag.curate.seedcheck)."""
    return bool(chunk.text.strip()) and not lists_headings(chunk.text)
