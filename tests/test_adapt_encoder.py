"""rag.index.adapt: inverse-cloze pairs from a corpus, and an index built with the encoder adapted to it.

The build test trains the real shipped MiniLM for a few steps (a small recipe, so it takes seconds, not the
minutes of the default one) and checks what users rely on: the manifest names the adapted encoder and its base,
the index loads under the base model's name, queries are embedded by the adapted encoder, a rebuild of the same
corpus trains nothing, and a lost encoder is a one-line error with the rebuild command.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from rag.config import load_settings
from rag.errors import IndexMismatch
from rag.index import adapt
from rag.index.adapt import AdaptConfig, sentences, training_pairs

PASSAGE = ("The nonlocal statement causes the listed identifiers to refer to previously bound variables. "
           "It applies to the nearest enclosing scope excluding globals. "
           "Names listed in a nonlocal statement must not collide with pre-existing bindings in the local scope.\n\n"
           "    x = 1; y = {'a': {'b': 2}}\n")


def test_sentences_are_prose_of_the_allowed_length():
    found = sentences(PASSAGE, 5, 40)
    assert found[0].startswith("The nonlocal statement causes")
    assert all("{" not in s for s in found)  # the code line is not a query
    assert sentences("Too short. Also short.", 5, 40) == []


def test_training_pairs_are_inverse_cloze_deterministic_and_bounded():
    config = AdaptConfig(pairs_per_chunk=2, keep_sentence=0.0, max_pairs=3, seed=1)
    texts = [PASSAGE, PASSAGE.replace("nonlocal", "global"), "One sentence only, long enough to be a query here."]
    pairs = training_pairs(texts, config)
    assert pairs == training_pairs(texts, config)  # same seed, same pairs
    assert len(pairs) == 3  # max_pairs; the one-sentence passage gives none
    for query, passage in pairs:
        assert query not in passage  # the query sentence is left out of its passage
        assert "enclosing scope" in passage or "previously bound" in passage or "collide" in passage
    kept = training_pairs(texts, AdaptConfig(keep_sentence=1.0))
    assert all(query in " ".join(passage.split()) for query, passage in kept)


@pytest.fixture
def small_recipe(monkeypatch):
    monkeypatch.setattr(adapt, "DEFAULT_CONFIG", AdaptConfig(batch_size=8, max_pairs=16, max_seq_length=64,
                                                             learning_rate=1e-4))


def test_index_with_an_adapted_encoder(tmp_path, small_recipe, capsys):
    from rag.index.build import build_index
    from rag.index.export import encoders_dir
    from rag.index.store import Index
    from rag.ingest.chunking import chunk_documents
    from rag.ingest.corpus import load_builtin_topics
    from rag.retrieval.retriever import Retriever

    chunks = chunk_documents(load_builtin_topics(["nonlocal", "global", "with", "lambda", "yield", "import"]), 1200, 150)
    index_dir = tmp_path / "idx"
    settings = load_settings({"index_dir": index_dir, "adapt_encoder": True})
    index = build_index(chunks, index_dir, settings, show_progress=True)
    adapted = index.manifest["embedding"]["adapted"]
    folder = encoders_dir() / adapted["folder"].rsplit("/", 1)[-1]
    assert adapted["base"] == "default" and adapted["pairs"] == 16 and adapted["steps"] == 2
    meta = json.loads((folder / "adapted.json").read_text())
    assert meta["version"] == adapt.ADAPT_VERSION and meta["config"]["max_pairs"] == 16
    assert index.manifest["embedding"]["model"] == str(folder)

    # the index opens under the base model's name (the user's settings never name the adapted folder)
    loaded = Index.load(index_dir, load_settings({"index_dir": index_dir}))
    hits = Retriever(loaded, mode="dense", top_k=3).retrieve("reassign a variable of the enclosing function").hits
    assert hits
    # the vectors are the adapted model's, not the shipped one's
    plain = build_index(chunks, tmp_path / "plain", load_settings({"index_dir": tmp_path / "plain"}), show_progress=False)
    cos = np.sum(np.load(loaded.dir / "embeddings.npy") * np.load(plain.dir / "embeddings.npy"), axis=1)
    assert cos.min() < 0.999

    from rag.index.info import describe

    assert "all-MiniLM-L6-v2 adapted to this corpus (16 inverse-cloze pairs, 2 steps" in describe(loaded)["embedding"]

    # a rebuild of the same corpus reuses the adapted encoder and every embedding
    capsys.readouterr()
    again = build_index(chunks, index_dir, settings, show_progress=True)
    assert "reusing the encoder adapted to this corpus" in capsys.readouterr().err
    assert again.manifest["counts"]["embeddings_reused"] == len(chunks)

    # both the adapted model and its ONNX export gone: a one-line error naming the rebuild
    shutil.rmtree(folder)
    shutil.rmtree(encoders_dir() / again.manifest["embedding"]["encoder"]["id"])
    lost = Index.load(index_dir, load_settings({"index_dir": index_dir}))
    with pytest.raises(IndexMismatch, match="adapted to its corpus.*--adapt-encoder"):
        lost.query_encoder()
