"""Questions like ones labelled unanswerable: their answers come back flagged ``low_confidence``.

A golden set says which of its questions the sources cannot answer (``should_refuse``) and which they can. The
grader's refusal before the answer and the critic's checks after it catch most of the first kind; what still gets
through is often a question people ask again in other words ("Kite Foods' VAT number?", "who signed for S00123?").
With ``unanswerable_labels``, each question is compared with the labelled ones through the index's own encoder (the
nearest-example test of topical guardrails): when its nearest labelled-unanswerable question is nearer, by cosine,
than its nearest labelled-answerable one by more than ``unanswerable_margin``, the answer is returned flagged, the
reason naming that question. The answerable labels are what keeps it from flagging every question of the same
domain. No model call; a question is encoded once more (milliseconds). Results:
benchmarks/results/unanswerable_like_dev.md and unanswerable_like_test.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from rag.errors import InputError


class Lookalikes:
    """``like(question)``: why the question looks like a labelled-unanswerable one, or None."""

    def __init__(self, unanswerable: Sequence[str], vectors: np.ndarray, answerable: np.ndarray,
                 encode: Callable[[list[str]], np.ndarray], margin: float, source: str = ""):
        self.unanswerable = list(unanswerable)  # the labelled-unanswerable questions, in the order of ``vectors``
        # their embeddings and the answerable ones', unit rows as the index's encoder returns them (cosine = dot)
        self.vectors, self.answerable = vectors, answerable
        self.encode, self.margin, self.source = encode, margin, source

    @classmethod
    def from_files(cls, paths: Sequence[str | Path], splits: Sequence[str], encode: Callable[[list[str]], np.ndarray],
                   margin: float) -> Lookalikes:
        """From the items of ``splits`` (``all``: every split) in the golden JSONL ``paths``; an InputError naming
        the setting and the fix when they hold no question of one kind."""
        from rag.data.labelled import labelled_items

        files = [Path(p).expanduser() for p in paths]
        items = [i for f in files for i in labelled_items(f, splits, "unanswerable_labels", '"should_refuse" (true: '
                                                          "the sources cannot answer it)", answerable_only=False)]
        no = [i["question"] for i in items if i.get("should_refuse")]
        yes = [i["question"] for i in items if not i.get("should_refuse")]
        if not no or not yes:
            kind = "unanswerable (should_refuse true)" if not no else "answerable"
            raise InputError(f"{', '.join(map(str, files))}: no {kind} question in the splits {', '.join(splits)}; "
                             "unanswerable_labels needs both kinds (set unanswerable_splits, or all)")
        return cls.from_questions(no, yes, encode, margin, f"{', '.join(f.name for f in files)} (splits "
                                  f"{', '.join(splits)})")

    @classmethod
    def from_questions(cls, unanswerable: Sequence[str], answerable: Sequence[str],
                       encode: Callable[[list[str]], np.ndarray], margin: float, source: str = "") -> Lookalikes:
        from rag.data.labelled import encoded

        return cls(unanswerable, encoded(unanswerable, encode), encoded(answerable, encode), encode, margin, source)

    def like(self, question: str) -> str | None:
        v = np.asarray(self.encode([question]), dtype=np.float32)[0]
        near, far = self.vectors @ v, self.answerable @ v
        i = int(near.argmax())
        if near[i] - far.max() <= self.margin:
            return None
        return (f"the question is like one labelled unanswerable in {self.source}: {self.unanswerable[i]!r} "
                f"(similarity {near[i]:.2f}; the nearest answerable one {far.max():.2f})")

