"""Passage windows (rag.index.windows): real tokenizer, real embedded model, real bm25s/FAISS indexes."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from rag.config import Settings
from rag.errors import ConfigError, IndexMismatch
from rag.index.build import build_index
from rag.index.embeddings import resolve_model_path
from rag.index.info import describe, render
from rag.index.store import Index
from rag.index.windows import SEARCH_DEPTH, best_by_owner, split, tokenizer_for
from rag.ingest.chunking import Chunk
from tests.retrieval_support import settings

FILLER = " ".join(f"Tomatoes need deep watering in week {i} of summer, and mulch keeps the soil of the vegetable bed "
                  "moist." for i in range(30))
LIGHTHOUSE = ("The lighthouse keeper winds the brass clock every Sunday at dawn. The lighthouse lamp is lit at dusk by "
              "the keeper. The keeper of the lighthouse logs every ship that passes.")
QUESTION = "Who winds the brass clock in the lighthouse every Sunday?"


def chunks() -> list[Chunk]:
    """A long chunk whose last paragraph (past the model's 256 word pieces) answers QUESTION, and two short ones
    nearer the question's words than the long chunk's start."""
    return [Chunk(id="garden#0", title="Garden notes", text=f"{FILLER} {LIGHTHOUSE}", source="garden.md"),
            Chunk(id="watch#0", title="Clock repair", text="A watch shop replaces batteries and straps while you wait.",
                  source="watch.md"),
            Chunk(id="coast#0", title="Coastal walks", text="The coastal path passes two harbours and a ruined chapel.",
                  source="coast.md")]


@pytest.fixture(scope="module")
def tokenizer():
    return tokenizer_for(resolve_model_path("default"))


def build(folder: Path, windows: int = 64) -> Index:
    return build_index(chunks(), folder, settings(index_dir=folder, dense_windows=windows), show_progress=False)


def test_windows_cover_a_long_body_in_overlapping_pieces_each_under_the_title(tokenizer):
    body = f"{FILLER} {LIGHTHOUSE}"
    pieces = len(tokenizer.encode(body, add_special_tokens=False).ids)
    assert pieces > 256  # longer than the model reads
    windows = split([("Garden notes\n", body), ("Short\n", "A short body.")], tokenizer, 64)
    assert {owner for owner, _ in windows} == {0}  # the short body is its own window: none made for it
    texts = [text for _, text in windows]
    assert all(t.startswith("Garden notes\n") for t in texts)
    bodies = [t[len("Garden notes\n"):] for t in texts]
    assert body.startswith(bodies[0]) and body.endswith(bodies[-1])
    assert all(len(tokenizer.encode(b, add_special_tokens=False).ids) <= 64 + 8 for b in bodies)  # whole words
    assert all(body[body.index(b) - 1] == " " for b in bodies[1:])  # a window starts at a word
    assert len(windows) == 1 + -(-(pieces - 64) // 32)  # a window every 32 pieces until one ends the body
    for a, b in zip(bodies, bodies[1:]):  # neighbours share half a window
        assert a[len(a) // 2:len(a) // 2 + 20] in b or b[:20] in a
    assert sum(LIGHTHOUSE[:40] in b for b in bodies) >= 1


def test_a_fact_past_the_models_reach_is_found_by_meaning_only_with_windows(tmp_path: Path):
    windowed, whole = build(tmp_path / "windowed"), build(tmp_path / "whole", windows=0)
    assert whole.windows is None and not (whole.dir / "windows.faiss").exists()
    assert "passage windows: none, one vector per chunk" in render(describe(whole))
    assert "(the 1 chunk longer than 64 word pieces in windows" in render(describe(windowed))
    record = windowed.manifest["windows"]
    made = split([("Garden notes\n", f"{FILLER} {LIGHTHOUSE}")], tokenizer_for(resolve_model_path("default")), 64)
    assert record["long_chunks"] == 1 and record["count"] == windowed.windows[0].ntotal == len(made) + 2
    ranked = {name: [index.chunks[row].id for row, _ in index.dense_search(index.embed_query(QUESTION), 3)]
              for name, index in (("windowed", windowed), ("whole", whole))}
    assert ranked["windowed"][0] == "garden#0"
    assert ranked["whole"][-1] == "garden#0"  # one vector of the chunk's start: tomatoes, not the lighthouse
    # the score of a chunk is its best window's cosine, and chunks are never repeated
    scores = windowed.dense_search(windowed.embed_query(QUESTION), 3)
    assert len({row for row, _ in scores}) == 3 and scores == sorted(scores, key=lambda rs: -rs[1])


def test_a_rebuild_reuses_the_windows_it_already_embedded(tmp_path: Path):
    first = build(tmp_path / "index")
    again = build(tmp_path / "index")
    made = first.manifest["windows"]
    assert made["reused"] == 0 and again.manifest["windows"]["reused"] == made["count"] - 2  # the short two: their own
    assert np.allclose(again.windows[0].reconstruct_n(0, made["count"]), first.windows[0].reconstruct_n(0, made["count"]),
                       atol=1e-6)
    other = build(tmp_path / "index", windows=32)  # another window size: nothing to reuse
    assert other.manifest["windows"]["reused"] == 0 and other.manifest["windows"]["tokens"] == 32


def test_a_damaged_windows_file_is_a_clear_error_naming_the_rebuild(tmp_path: Path):
    index = build(tmp_path / "index")
    (index.dir / "windows.faiss").write_bytes(b"not faiss")
    with pytest.raises(IndexMismatch, match=r"corrupt \(windows\.faiss.*Rebuild it with: rag index"):
        Index.load(index.dir, settings(index_dir=index.dir)).dense_search(index.embed_query(QUESTION), 2)
    build(tmp_path / "index")  # a rebuild over the damaged file works
    shutil.copy(build(tmp_path / "other", windows=32).dir / "windows.npy", index.dir / "windows.npy")
    with pytest.raises(IndexMismatch, match=r"inconsistent \(windows\.faiss holds \d+ windows, windows\.npy \d+"):
        Index.load(index.dir, settings(index_dir=index.dir)).dense_search(index.embed_query(QUESTION), 2)
    (index.dir / "windows.npy").unlink()
    with pytest.raises(IndexMismatch, match=r"incomplete \(missing windows\.npy\)"):
        Index.load(index.dir, settings(index_dir=index.dir))


def test_best_by_owner_widens_its_search_until_it_has_enough_chunks():
    owners = np.array([0] * 20 + [1, 2])  # chunk 0 has 20 windows, all nearer than the other two chunks'
    scores = np.concatenate([np.linspace(0.9, 0.8, 20), [0.5, 0.4]])
    asked = []

    def search(_vector, m):
        asked.append(m)
        order = np.argsort(-scores)[:m]
        return [(int(i), float(scores[i])) for i in order]

    assert best_by_owner(search, owners, np.zeros(1), 3, len(owners)) == [(0, 0.9), (1, 0.5), (2, 0.4)]
    assert asked[0] == 3 * SEARCH_DEPTH and asked[-1] == len(owners)
    assert best_by_owner(search, owners, np.zeros(1), 5, len(owners)) == [(0, 0.9), (1, 0.5), (2, 0.4)]


def test_the_setting_names_its_range():
    with pytest.raises(ConfigError, match=r"dense_windows must be 0 \(off\) or from 16 to 512"):
        Settings(dense_windows=8).validate()
    assert Settings(dense_windows=0).validate().dense_windows == 0


def test_dense_windows_0_searches_one_vector_per_chunk_of_an_index_that_has_windows(tmp_path: Path):
    build(tmp_path / "index")
    off = Index.load(tmp_path / "index", settings(index_dir=tmp_path / "index", dense_windows=0))
    on = Index.load(tmp_path / "index", settings(index_dir=tmp_path / "index"))
    assert (off.windows_searched, on.windows_searched) == (0, 64)
    vector = on.embed_query(QUESTION)
    assert [off.chunks[r].id for r, _ in off.dense_search(vector, 3)][-1] == "garden#0"  # as with no windows
    assert [on.chunks[r].id for r, _ in on.dense_search(vector, 3)][0] == "garden#0"
    assert build(tmp_path / "whole", windows=0).windows_searched == 0  # an index without windows, whatever is asked


def test_a_run_made_before_windows_resumes_only_on_one_vector_per_chunk(tmp_path: Path):
    import json

    from rag.errors import InputError
    from rag.eval.runs import open_run

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text(json.dumps({"config_name": "full", "golden_hash": "g",
                                                           "config": {"top_k": 4}}))
    with pytest.raises(InputError, match=r"predates dense_windows: resume it with --set dense_windows=0"):
        open_run(tmp_path / "run", {"config_name": "full", "golden_hash": "g", "config": {"top_k": 4, "dense_windows": 64}})
    open_run(tmp_path / "run", {"config_name": "full", "golden_hash": "g", "config": {"top_k": 4, "dense_windows": 0}})


def test_the_resume_hint_also_names_a_default_that_changed_with_the_new_setting(tmp_path: Path):
    """A run made before dense_weight used rrf_k 60; the hint gives both, so following it resumes."""
    import json

    from rag.errors import InputError
    from rag.eval.runs import open_run

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text(json.dumps({"config_name": "full", "golden_hash": "g",
                                                           "config": {"top_k": 4, "rrf_k": 60}}))
    now = {"config_name": "full", "golden_hash": "g", "config": {"top_k": 4, "rrf_k": 10, "dense_weight": 2.0}}
    with pytest.raises(InputError, match=r"predates dense_weight: resume it with --set dense_weight=1.0 --set rrf_k=60\)"):
        open_run(tmp_path / "run", now)
    open_run(tmp_path / "run", {**now, "config": {"top_k": 4, "rrf_k": 60, "dense_weight": 1.0}})
