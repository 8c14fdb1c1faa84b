"""Passage windows: the dense search scores a chunk by its best-matching window, not by one vector of the whole.

all-MiniLM-L6-v2 reads at most 256 word pieces of a text (it was trained on 128), so one vector per chunk never
sees the end of a long chunk and blurs the rest: 44% of the built-in corpus's chunks and 23% of Polygraph's are
longer than 256 pieces. A sentence near the end of a chunk ("the nonlocal statement causes the listed
identifiers to refer to previously bound variables in the nearest enclosing scope") then cannot be found by
meaning at all. So an index also holds one vector per window of ``tokens`` word pieces of each longer chunk's text
(``stride`` = half a window apart, so a sentence across a boundary is whole in one window), each window prefixed
with the chunk's title line as the chunk itself is (rag.index.store.index_text). A chunk no longer than one
window is its own single window, with the vector it already has. The dense list ranks chunks by their best
window's cosine (:func:`best_by_owner`); bm25 still indexes whole chunks, and what is returned is the chunk.

The window size was chosen on the built-in golden set's train and dev splits only (n=74; dense Recall@4 0.761 with
one vector, 32 pieces 0.905, 64 0.926, 96 0.894, 128 0.849, 200 0.869: benchmarks/results/windows_sizes.md) and
then measured on sets it was not chosen on (benchmarks/results/windows_unseen.md, ``python
benchmarks/passage_windows.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

WINDOW_TOKENS = 64  # the setting's default (dense_windows); 0 = one vector per chunk only
SEARCH_DEPTH = 4  # windows read per wanted chunk before the search widens (a chunk has several windows)


def tokenizer_for(model_path: str | Path) -> Any:
    """The model's fast tokenizer (``tokenizer.json``) without truncation, or None when the model has none."""
    path = Path(model_path) / "tokenizer.json"
    if not path.is_file():
        return None
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def split(texts: Sequence[tuple[str, str]], tokenizer: Any, tokens: int) -> list[tuple[int, str]]:
    """``(owner, window text)`` for each window of each ``(title line, body)`` whose body is longer than
    ``tokens`` word pieces, in order; windows start ``tokens // 2`` pieces apart and the last one ends the body, each
    widened to whole words. Bodies no longer than that give none (the chunk's own vector is their window)."""
    stride = max(1, tokens // 2)
    out: list[tuple[int, str]] = []
    encodings = tokenizer.encode_batch([body for _, body in texts], add_special_tokens=False)
    for owner, ((prefix, body), enc) in enumerate(zip(texts, encodings)):
        pieces = [(span, word) for span, word in zip(enc.offsets, enc.word_ids) if span[1] > span[0]]
        if len(pieces) <= tokens:
            continue
        start = 0
        while True:  # bounded: start grows by stride >= 1 until a window ends the body
            end = min(start + tokens, len(pieces))
            first, last = start, end - 1
            while first > 0 and pieces[first - 1][1] == pieces[first][1]:  # never cut a word in two
                first -= 1
            while last + 1 < len(pieces) and pieces[last + 1][1] == pieces[last][1]:
                last += 1
            out.append((owner, prefix + body[pieces[first][0][0]:pieces[last][0][1]]))
            if end == len(pieces):
                break
            start += stride
    return out


def best_by_owner(search: Any, owners: np.ndarray, vector: np.ndarray, n: int, total: int) -> list[tuple[int, float]]:
    """Top ``n`` chunks as ``(row, best window cosine)``: ``search(vector, m)`` returns the top ``m`` windows as
    (window, score); it is asked for ``SEARCH_DEPTH * n`` windows, then twice as many, until ``n`` distinct chunks
    are among them or every one of the ``total`` windows was read."""
    m = min(total, max(n, 1) * SEARCH_DEPTH)
    while True:
        best: dict[int, float] = {}
        for window, score in search(vector, m):
            row = int(owners[window])
            if row not in best:  # windows come best first: the first one of a chunk is its best
                best[row] = score
        if len(best) >= n or m >= total:
            return sorted(best.items(), key=lambda rs: -rs[1])[:n]
        m = min(total, 2 * m)


def window_vectors(texts: Sequence[tuple[str, str]], vectors: np.ndarray, tokenizer: Any, tokens: int,
                   encode: Any, previous: dict[str, np.ndarray], key: Any,
                   say: Any = None) -> tuple[np.ndarray, np.ndarray, dict]:
    """The window vectors of an index, their owners (chunk rows, ascending) and the manifest's record.

    ``texts``: each chunk's (title line, body); ``vectors``: the chunks' own vectors (a chunk no longer than one
    window keeps its own); ``encode(texts)`` embeds the windows not in ``previous`` (window text key -> vector,
    from the index being rebuilt, as ``key(text)`` names them); ``say(windows, long chunks, to embed)`` first."""
    windows = split(texts, tokenizer, tokens)
    todo = [i for i, (_, text) in enumerate(windows) if key(text) not in previous]
    if say is not None:
        say(len(windows), len({owner for owner, _ in windows}), len(todo))
    fresh = encode([windows[i][1] for i in todo]) if todo else np.zeros((0, vectors.shape[1]), dtype=np.float32)
    made = dict(zip(todo, fresh))
    by_owner: dict[int, list[np.ndarray]] = {}
    for i, (owner, text) in enumerate(windows):
        by_owner.setdefault(owner, []).append(made[i] if i in made else previous[key(text)])
    out, owners = [], []
    for row in range(len(texts)):
        mine = by_owner.get(row) or [vectors[row]]
        out.extend(mine)
        owners.extend([row] * len(mine))
    record = {"tokens": tokens, "stride": max(1, tokens // 2), "count": len(out), "long_chunks": len(by_owner),
              "reused": len(windows) - len(todo)}
    return np.asarray(out, dtype=np.float32).reshape(len(out), vectors.shape[1]), np.asarray(owners, dtype=np.int32), record


def previous_windows(texts: Sequence[tuple[str, str]], vectors: np.ndarray, owners: np.ndarray, tokenizer: Any,
                     tokens: int, key: Any) -> dict[str, np.ndarray]:
    """Window text key -> vector of an earlier build made with the same window size (its chunks' ``texts``, its
    window ``vectors`` and ``owners``); {} when they do not line up."""
    windows = split(texts, tokenizer, tokens)
    long_rows = {owner for owner, _ in windows}
    mine = [i for i, row in enumerate(owners) if int(row) in long_rows]
    if len(mine) != len(windows):
        return {}
    return {key(text): vectors[i] for (_, text), i in zip(windows, mine)}
