"""What Sieve learns from the user's labelled questions about their tables: where answers are, and how to query.

A golden set for an index with tables labels each question with its ``route`` (docs, data or both) and, for a data
question, the ``gold_sql`` that answers it (``rag demo ops`` writes one). Two settings put such labels to use when
the agent is built, each from the items of the named splits (never the split you report on), with the index's own
query encoder, so no other model is loaded and no model is called:

- ``router = "learned"`` (``router_labels``, ``router_splits``): :class:`LearnedRouter`, a multinomial logistic
  regression over the questions' embeddings. The cue router (rag.data.schemalink) needs no labels, but misses what
  the tables never say ("hauliers", "loads") and rule questions worded as counts; this one learns them from the
  labels, for their domain only; ``router = "cues+learned"`` keeps the cues and lets this classifier overrule them
  where it is at least ``router_overrule`` sure of another route. The fit is fixed, not tuned: L2 strength 1 over
  the training set, ``STEPS`` full-batch gradient steps at ``RATE`` from zero, which is deterministic. Items to be
  refused are left out: where the answer to an unanswerable question would be is not a label. Results:
  benchmarks/results/router_learned.md and router_gated_test.md.
- ``sql_examples`` (``sql_example_splits``, ``sql_demos``): :class:`SQLExamples`, the labelled questions most like
  the one asked, shown to the SQL writer with their gold statements as demos (the schema left out: the prompt shows
  it already). A 1.5B model that does not know how this warehouse computes an on-time rate or a late claim copies
  it from the nearest example. Results: benchmarks/results/sql_examples.md.

:func:`keep_example` (``rag ask --keep-sql FILE``) writes such a label from an answer the user found right: the
question and the statement that ran, in split ``train``, so the user's own questions teach the writer their tables.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag.errors import InputError

ROUTES = ("docs", "data", "both")
KEPT_SPLIT = "train"  # the split rag ask --keep-sql writes to: sql_example_splits' default reads it
STEPS = 300  # full-batch gradient steps of the fit (on the ops labels the loss moves 0.0003 in the last 50)
RATE = 2.0  # the step size; the inputs are unit vectors
L2 = 1.0  # the weight penalty, as 1 / (L2 * n) per item


class LearnedRouter:
    """A fitted classifier: ``route(question)`` -> (route, reason)."""

    def __init__(self, weights: np.ndarray, bias: np.ndarray, encode: Callable[[list[str]], np.ndarray],
                 counts: dict[str, int], source: str = ""):
        self.weights, self.bias, self.encode = weights, bias, encode
        self.counts = counts  # labelled questions learned from, per route
        self.source = source  # where they came from: "FILE (splits a, b)"

    def probabilities(self, question: str) -> np.ndarray:
        return _softmax(np.asarray(self.encode([question]), dtype=np.float32) @ self.weights + self.bias)[0]

    def route(self, question: str) -> tuple[str, str]:
        """The route of ``question`` and why: the probability and what it was learned from."""
        return self.read(question)[:2]

    def read(self, question: str) -> tuple[str, str, float]:
        """The route of ``question``, why, and the probability the classifier gives it."""
        p = self.probabilities(question)
        route = ROUTES[int(p.argmax())]
        return route, (f"most like the labelled {route} questions (p={p.max():.2f}; learned from "
                       f"{sum(self.counts.values())} in {self.source})"), float(p.max())


def encoded(texts: Sequence[str], encode: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """``encode(texts)``, kept on disk under ``$SIEVE_HOME/label-vectors`` by the encoder's id and the texts, so an
    agent built again from the same labels (every ``rag ask``) reads the vectors instead of encoding thousands of
    questions again (~12 s for 5,000 on 2 cores); an encoder without an ``id`` is not cached."""
    encoder_id = getattr(getattr(encode, "__self__", None), "id", None)
    if not encoder_id or not texts:
        return np.asarray(encode(list(texts)), dtype=np.float32)
    from rag.paths import sieve_home

    key = hashlib.sha256("\n".join([str(encoder_id), *texts]).encode("utf-8")).hexdigest()[:32]
    path = sieve_home() / "label-vectors" / f"{key}.npy"
    try:
        vectors = np.load(path)
        if vectors.shape[0] == len(texts):
            return vectors
    except (OSError, ValueError):
        pass
    vectors = np.asarray(encode(list(texts)), dtype=np.float32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            np.save(f, vectors)
        os.replace(tmp, path)
    except OSError:  # a read-only home: encode again next time
        pass
    return vectors


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


def labelled_items(path: str | Path, splits: Sequence[str], setting: str, needs: str,
                   answerable_only: bool = True) -> list[dict[str, Any]]:
    """The answerable items of ``path`` (Sieve's golden JSONL; every item with ``answerable_only`` false) in
    ``splits`` (``all``: every split), each with an ``id`` (its line when it has none); an InputError naming the
    setting or the file's line and the fix when it cannot be read."""
    from rag.ingest.jsonl import json_lines

    items = []
    for n, where, rec in json_lines(path, missing=f"does not exist; set {setting} to a JSONL file of questions with "
                                   f"{needs}, e.g. the golden.jsonl that `rag demo ops` writes"):
        if not isinstance(rec, dict) or not isinstance(rec.get("question"), str) or not rec["question"].strip():
            raise InputError(f"{where}: expected an object with a non-empty \"question\" string")
        chosen = "all" in splits or str(rec.get("split") or "") in splits
        if chosen and not (answerable_only and rec.get("should_refuse")):
            items.append({**rec, "id": str(rec.get("id") or f"line {n}")})
    return items


def learn_router(path: str | Path, splits: Sequence[str], encode: Callable[[list[str]], np.ndarray]) -> LearnedRouter:
    """The router fitted from ``path``'s labelled items of ``splits``; an InputError naming the file and the fix
    when it has too few to learn from."""
    file = Path(path).expanduser()
    items = labelled_items(file, splits, "router_labels", 'a "route" label (docs, data or both)')
    bad = [i for i in items if i.get("route") not in ROUTES]
    if bad:
        raise InputError(f"{file}: item {bad[0]['id']!r} has route {bad[0].get('route')!r}; every item of the splits "
                         f"{', '.join(splits)} needs \"route\": one of {', '.join(ROUTES)}")
    counts = Counter(i["route"] for i in items)
    missing = [r for r in ROUTES if not counts[r]]
    if missing:
        raise InputError(f"{file}: no labelled {' or '.join(missing)} question in the splits {', '.join(splits)} "
                         f"({len(items)} items there); add some, or name other splits with router_splits")
    weights, bias = fit(encoded([i["question"] for i in items], encode), [i["route"] for i in items])
    return LearnedRouter(weights, bias, encode, {r: counts[r] for r in ROUTES},
                         f"{file.name} (splits {', '.join(splits)})")


def labelled_sql(path: str | Path, splits: Sequence[str]) -> list[dict[str, Any]]:
    """The items of ``path`` in ``splits`` with a "gold_sql" statement; an InputError when there are none."""
    file = Path(path).expanduser()
    items = [i for i in labelled_items(file, splits, "sql_examples", 'a "gold_sql" statement')
             if isinstance(i.get("gold_sql"), str) and i["gold_sql"].strip()]
    if not items:
        raise InputError(f"{file}: no item of the splits {', '.join(splits)} has a \"gold_sql\" statement; add "
                         "some, or name other splits with sql_example_splits")
    return items


class SQLExamples:
    """Labelled questions with their gold SQL; ``similar(question)``: the ``k`` most like it, as SQLWriter demos."""

    def __init__(self, items: Sequence[Any], vectors: np.ndarray, encode: Callable[[list[str]], np.ndarray], k: int,
                 linked: Callable[[str], list[dict[str, Any]]] | None = None):
        self.items, self.vectors, self.encode, self.k = list(items), np.asarray(vectors, dtype=np.float32), encode, k
        self.linked = linked  # question -> examples written for it (rag.data.drills.Drills.linked), ranked with these

    @classmethod
    def from_file(cls, path: str | Path, splits: Sequence[str], encode: Callable[[list[str]], np.ndarray],
                  k: int = 3) -> SQLExamples:
        return cls.from_items(labelled_sql(path, splits), encode, k)

    @classmethod
    def from_items(cls, items: Sequence[dict[str, Any]], encode: Callable[[list[str]], np.ndarray], k: int = 3,
                   linked: Callable[[str], list[dict[str, Any]]] | None = None) -> SQLExamples:
        """Examples from ``items`` (each with an "id", a "question" and its "gold_sql"), e.g. labelled ones and
        rag.data.drills' together, plus those ``linked`` writes for each question."""
        vectors = encode([i["question"] for i in items]) if items else np.zeros((0, 0), dtype=np.float32)
        return cls(items, vectors, encode, k, linked)

    def similar(self, question: str) -> tuple[list[str], list[Any]]:
        """The ids and the demos of the ``k`` nearest examples (cosine of the encoder's unit vectors), the nearest
        last. An example whose question is the one asked is shown too: keep the split you report on out of
        ``sql_example_splits``."""
        import dspy

        extra = self.linked(question) if self.linked is not None else []
        found = np.asarray(self.encode([question] + [i["question"] for i in extra]), dtype=np.float32)
        q, pool = found[0], self.items + extra
        vectors = np.vstack([v for v in (self.vectors, found[1:]) if v.size]) if pool else found[:0]
        nearest = [pool[j] for j in np.argsort(-(vectors @ q), kind="stable")[:self.k]][::-1]
        return [i["id"] for i in nearest], [dspy.Example(question=i["question"], documents="", previous="",
                                                         sql=i["gold_sql"]).with_inputs("question", "documents", "previous")
                                            for i in nearest]


def keep_example(path: str | Path, question: str, sql: str, rows: list[list[Any]] | None, route: str | None,
                 answer: str = "", via: str = "rag ask --keep-sql") -> str:
    """Append ``question`` and its ``sql`` to ``path`` (created when missing) as a labelled example in split
    ``KEPT_SPLIT``, with ``rows`` as its gold result when they are all of it (None: truncated), and ``kept``: the
    day and ``via`` (a sentence, not a bare date, which datasets would read back as a timestamp); its id. An
    InputError when ``path`` already holds the question, in any split (edit or delete that line instead), or is not
    a golden JSONL."""
    import datetime as dt

    from rag.ingest.jsonl import append_json_line

    file = Path(path).expanduser()
    if file.exists():  # any split: a question of the split you report on must not become an example
        from rag.ingest.jsonl import json_lines

        asked = " ".join(question.split()).lower()
        for _, where, rec in json_lines(file, missing="does not exist"):
            if not isinstance(rec, dict):
                raise InputError(f"{where}: expected an object with a \"question\"; keep examples in a file of "
                                 "their own")
            if " ".join(str(rec.get("question") or "").split()).lower() == asked:
                raise InputError(f"{where}: already holds this question (split {rec.get('split')!r}); edit or "
                                 "delete that line to change its statement")
    file.parent.mkdir(parents=True, exist_ok=True)
    item_id = "kept-" + hashlib.sha1(question.encode("utf-8")).hexdigest()[:10]
    record = {"id": item_id, "type": "answerable", "split": KEPT_SPLIT, "question": question,
              "reference_answer": answer, "should_refuse": False, "evidence": [], "route": route or "data",
              "key_facts": [], "gold_sql": sql, "kept": f"{dt.date.today().isoformat()} with {via}"}
    if rows is not None:
        record["gold_result"] = rows
    append_json_line(file, record)
    return item_id


def kept_statement(written: str | None, ran: str) -> str:
    """The statement to keep: the one that ran (after the guard and any schema repair), without the LIMIT the guard
    added when the writer wrote none (an example would teach it to every query)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(ran, read="duckdb")
        had_limit = written is not None and sqlglot.parse_one(written, read="duckdb").args.get("limit") is not None
    except (sqlglot.errors.SqlglotError, ValueError):
        return ran
    if isinstance(tree, exp.Query) and not had_limit:
        tree.set("limit", None)
    return tree.sql(dialect="duckdb")


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)
