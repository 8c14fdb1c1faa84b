"""Adapt the embedding model to one corpus, from the corpus alone: no questions, no labels, no other model.

The shipped all-MiniLM-L6-v2 was trained on general web pairs; a user's documents have their own vocabulary
(Docker's ``buildx bake``, a policy's "Tier 1 city"). This module fine-tunes a copy of it on pairs made from the
indexed chunks themselves, the inverse cloze task (Lee et al., 2019): a sentence of a passage is the query and
the passage it came from, that sentence left out, is its match; the other passages of the batch are the
non-matches (in-batch negatives, the multiple-negatives ranking loss sentence-transformers uses). The result is
a sentence-transformers folder like the shipped one, plus ``adapted.json`` that says what it was made from, so
``rag index PATH --set embedding_model=FOLDER`` uses it like any other model (and its ONNX export is made and
checked as usual).

Nothing here reads a question, so every golden set stays unseen; whether the adapted encoder helps is measured
by ``benchmarks/adapt_encoder.py`` on question sets that were not used to choose the recipe.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

ADAPT_VERSION = 1  # the recipe; recorded in adapted.json
META_FILE = "adapted.json"
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(])|\n\s*\n")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class AdaptConfig:
    """The recipe's knobs; each is recorded in ``adapted.json``."""

    pairs_per_chunk: int = 4  # inverse-cloze queries drawn from each chunk (fewer when it has fewer sentences)
    max_pairs: int = 4000  # bound on the training pairs (a random sample of them when more are made)
    keep_sentence: float = 0.1  # share of pairs whose passage keeps the query sentence (as in the paper)
    min_words: int = 5  # a query sentence has between min_words and max_words words
    max_words: int = 40
    epochs: int = 1
    batch_size: int = 32
    learning_rate: float = 2e-5
    warmup: float = 0.1  # share of the steps with a linearly rising learning rate
    scale: float = 20.0  # similarity scale of the ranking loss (sentence-transformers' default)
    max_seq_length: int = 256
    seed: int = 0


DEFAULT_CONFIG = AdaptConfig()  # the recipe rag index --adapt-encoder uses (benchmarks/adapt_encoder.py measured it)


def sentences(text: str, min_words: int, max_words: int) -> list[str]:
    """The prose sentences of ``text`` fit to be a query: code lines, tables and headings are not."""
    out = []
    for part in _SENTENCE.split(text):
        part = " ".join(part.split())
        words = _WORD.findall(part)
        if not min_words <= len(words) <= max_words:
            continue
        if part.startswith(("|", "+", "#", "```", "$", ">>>", "...")) or part.count("=") > 2 or part.count("{") > 1:
            continue
        letters = sum(ch.isalpha() for ch in part)
        if letters < 0.6 * len(part):
            continue
        out.append(part)
    return out


def training_pairs(texts: Sequence[str], config: AdaptConfig = AdaptConfig()) -> list[tuple[str, str]]:
    """(query, passage) pairs by inverse cloze: each passage gives up to ``pairs_per_chunk`` sentences as
    queries; the passage loses that sentence except in a ``keep_sentence`` share of the pairs. Deterministic
    for one seed; at most ``max_pairs`` (a seeded sample)."""
    rng = random.Random(config.seed)
    pairs = []
    for text in texts:
        candidates = sentences(text, config.min_words, config.max_words)
        if len(candidates) < 2:  # a passage of one sentence has nothing left to match
            continue
        for sentence in rng.sample(candidates, min(config.pairs_per_chunk, len(candidates))):
            passage = text if rng.random() < config.keep_sentence else _without(text, sentence)
            pairs.append((sentence, passage))
    rng.shuffle(pairs)
    return pairs[:config.max_pairs]


def _without(text: str, sentence: str) -> str:
    """``text`` with ``sentence`` (whitespace-normalised) left out."""
    flat = " ".join(text.split())
    return flat.replace(sentence, " ").strip()


def adapt(texts: Sequence[str], base: str, out: str | Path, config: AdaptConfig = AdaptConfig(),
          corpus: str = "", show_progress: bool = True, log: Callable[[str], None] | None = None) -> Path:
    """Fine-tune ``base`` (a local sentence-transformers folder or "default") on ``texts``'s inverse-cloze pairs
    and save it to ``out`` with ``adapted.json``. Torch and sentence-transformers are needed for this step only."""
    import torch
    from sentence_transformers import SentenceTransformer

    from rag.errors import ConfigError
    from rag.index.embeddings import resolve_model_path

    pairs = training_pairs(texts, config)
    if len(pairs) < config.batch_size:
        raise ConfigError(f"only {len(pairs)} training pairs could be made from {len(texts)} passages "
                          f"(need at least batch_size={config.batch_size}): the corpus has too little prose to adapt to")
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    base_path = resolve_model_path(base)
    model = SentenceTransformer(base_path, device="cpu")
    model.max_seq_length = config.max_seq_length
    batches = [pairs[i:i + config.batch_size] for i in range(0, len(pairs), config.batch_size)]
    batches = [b for b in batches if len(b) > 1]
    steps = len(batches) * config.epochs
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    warm = max(1, int(steps * config.warmup))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm))))
    model.train()
    started, step, losses = time.perf_counter(), 0, []
    progress = _progress(steps, show_progress)
    for _epoch in range(config.epochs):
        for batch in batches:
            loss = _ranking_loss(model, batch, config.scale)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            losses.append(float(loss.detach()))
            step += 1
            progress(step, losses[-1])
    model.eval()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save(str(out))
    meta = {"version": ADAPT_VERSION, "method": "inverse cloze, in-batch negatives (multiple-negatives ranking loss)",
            "base": str(base), "base_path": str(base_path), "corpus": corpus, "passages": len(texts),
            "pairs": len(pairs), "pairs_sha256": hashlib.sha256(json.dumps(pairs).encode()).hexdigest(),
            "steps": steps, "seconds": round(time.perf_counter() - started, 1),
            "loss_first": round(sum(losses[:10]) / max(1, len(losses[:10])), 4),
            "loss_last": round(sum(losses[-10:]) / max(1, len(losses[-10:])), 4), "config": asdict(config)}
    (out / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    if log:
        log(f"adapted {base} on {len(pairs)} pairs in {meta['seconds']} s (loss {meta['loss_first']} -> "
            f"{meta['loss_last']}): {out}")
    return out


def adapted_encoder(texts: Sequence[str], base: str, config: AdaptConfig | None = None, corpus: str = "",
                    show_progress: bool = True, log: Callable[[str], None] | None = None) -> tuple[Path, dict[str, Any]]:
    """The encoder adapted to ``texts`` from ``base``: made once per (base model files, texts, recipe) in
    ``$SIEVE_HOME/encoders/adapted-<key>/`` and reused from then on (a rebuild of the same corpus trains nothing).
    Written to a temporary folder and renamed when complete, so an interrupted run leaves no half model."""
    from rag.index.embeddings import resolve_model_path
    from rag.index.export import encoders_dir, model_sha256

    config = config or DEFAULT_CONFIG
    base_path = resolve_model_path(base)
    key = hashlib.sha256(json.dumps({
        "version": ADAPT_VERSION, "base": model_sha256(base_path) or base_path, "config": asdict(config),
        "texts": hashlib.sha256("\x00".join(texts).encode("utf-8", "surrogatepass")).hexdigest()},
        sort_keys=True).encode()).hexdigest()[:16]
    folder = encoders_dir() / f"adapted-{key}"
    if not (folder / META_FILE).is_file():
        tmp = folder.with_name(f".{folder.name}.{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            adapt(texts, base, tmp, config, corpus=corpus, show_progress=show_progress, log=log)
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    elif log:
        log(f"reusing the encoder adapted to this corpus: {folder}")
    return folder, json.loads((folder / META_FILE).read_text(encoding="utf-8"))


def _ranking_loss(model: Any, batch: list[tuple[str, str]], scale: float) -> Any:
    import torch

    prepare = getattr(model, "preprocess", None) or model.tokenize  # tokenize: sentence-transformers < 6
    queries = model(prepare([q for q, _ in batch]))["sentence_embedding"]
    passages = model(prepare([p for _, p in batch]))["sentence_embedding"]
    queries = torch.nn.functional.normalize(queries, dim=-1)
    passages = torch.nn.functional.normalize(passages, dim=-1)
    scores = queries @ passages.T * scale
    return torch.nn.functional.cross_entropy(scores, torch.arange(len(batch)))


def _progress(total: int, show: bool) -> Callable[[int, float], None]:
    if not show:
        return lambda step, loss: None
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc="adapting encoder", unit="step")

    def update(step: int, loss: float) -> None:
        bar.update(1)
        bar.set_postfix(loss=f"{loss:.3f}")
        if step >= total:
            bar.close()

    return update
