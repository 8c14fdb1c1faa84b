"""A router learned from labelled questions: where an answer is (docs, data or both), by the questions it is like.

The cue router (rag.data.schemalink) reads a question's words against the tables' own words; it needs no labels,
but it misses what the tables never say ("hauliers", "loads") and rule questions worded as counts. A user who has
labelled questions with their ``route`` (a Sieve golden set, as ``rag demo ops`` writes one) can instead route by
them: ``router = "learned"`` fits a multinomial logistic regression over the questions' embeddings (the index's own
query encoder, so no other model is loaded) from the items of ``router_labels`` whose split is in
``router_splits``, when the agent is built; routing a question is then one embedding and a product, no model call.

The fit is fixed, not tuned: L2 strength 1 over the training set, ``STEPS`` full-batch gradient steps at ``RATE``
from zero, which is deterministic. Items to be refused (``should_refuse``) are left out: where the answer to an
unanswerable question would be is not a label. Results on questions nobody chose on:
benchmarks/results/router_learned.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from rag.errors import InputError

ROUTES = ("docs", "data", "both")
STEPS = 300  # full-batch gradient steps of the fit (on the ops labels the loss moves 0.0003 in the last 50)
RATE = 2.0  # the step size; the inputs are unit vectors
L2 = 1.0  # the weight penalty, as 1 / (L2 * n) per item


class LearnedRouter:
    """A fitted classifier: ``route(question)`` -> (route, probability)."""

    def __init__(self, weights: np.ndarray, bias: np.ndarray, encode: Callable[[list[str]], np.ndarray],
                 counts: dict[str, int], source: str = ""):
        self.weights, self.bias, self.encode = weights, bias, encode
        self.counts = counts  # labelled questions learned from, per route
        self.source = source  # where they came from: "FILE (splits a, b)"

    def probabilities(self, question: str) -> np.ndarray:
        return _softmax(np.asarray(self.encode([question]), dtype=np.float32) @ self.weights + self.bias)[0]

    def route(self, question: str) -> tuple[str, float]:
        p = self.probabilities(question)
        return ROUTES[int(p.argmax())], float(p.max())

    def reason(self, question: str) -> str:
        route, p = self.route(question)
        return (f"most like the labelled {route} questions (p={p:.2f}; learned from "
                f"{sum(self.counts.values())} in {self.source})")


def fit(vectors: np.ndarray, routes: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Weights (dim x 3) and bias (3) of the logistic regression of ``routes`` on ``vectors`` (module docstring)."""
    x = np.asarray(vectors, dtype=np.float64)
    y = np.eye(len(ROUTES))[[ROUTES.index(r) for r in routes]]
    w, b, n = np.zeros((x.shape[1], len(ROUTES))), np.zeros(len(ROUTES)), len(x)
    for _ in range(STEPS):
        err = _softmax(x @ w + b) - y
        w -= RATE * (x.T @ err / n + w / (L2 * n))
        b -= RATE * err.mean(axis=0)
    return w.astype(np.float32), b.astype(np.float32)


def learn_router(path: str | Path, splits: Sequence[str], encode: Callable[[list[str]], np.ndarray]) -> LearnedRouter:
    """The router fitted from ``path``'s labelled items of ``splits``; an InputError naming the file and the fix
    when it has too few to learn from."""
    from rag.eval.golden import load_golden

    file = Path(path).expanduser()
    if not file.is_file():
        raise InputError(f"router_labels: {file} does not exist; name a JSONL file of questions with a \"route\" "
                         "label (docs, data or both), e.g. the golden.jsonl that `rag demo ops` writes")
    items = [i for i in load_golden(file) if (i.split or "") in splits and not i.should_refuse]
    bad = [i for i in items if i.meta.get("route") not in ROUTES]
    if bad:
        raise InputError(f"{file}: item {bad[0].id!r} has route {bad[0].meta.get('route')!r}; every item of the splits "
                         f"{', '.join(splits)} needs \"route\": one of {', '.join(ROUTES)}")
    counts = Counter(i.meta["route"] for i in items)
    missing = [r for r in ROUTES if not counts[r]]
    if missing:
        raise InputError(f"{file}: no labelled {' or '.join(missing)} question in the splits {', '.join(splits)} "
                         f"({len(items)} items there); add some, or name other splits with router_splits")
    weights, bias = fit(encode([i.question for i in items]), [i.meta["route"] for i in items])
    return LearnedRouter(weights, bias, encode, {r: counts[r] for r in ROUTES},
                         f"{file.name} (splits {', '.join(splits)})")


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)
