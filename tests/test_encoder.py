"""The torch-free query path (rag.index.encoder, rag.index.export): ONNX Runtime vectors equal
sentence-transformers', the index manifest records its encoder and the query side follows it, and the commands
that need no model never import torch.

The ONNX export is made once per test session (in the session's SIEVE_HOME) by the first test that needs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rag.errors import IndexMismatch
from tests.retrieval_support import SHARED, copy_index, small_fp32_index, small_index

ROOT = Path(__file__).resolve().parents[1]
TORCH = ("torch", "sentence_transformers", "transformers")
HEAVY = (*TORCH, "dspy", "bm25s", "scipy", "faiss", "onnxruntime")
# what each search mode may import of HEAVY: bm25s brings scipy; faiss and onnxruntime serve the dense side
SEARCH_NEEDS = {"bm25": {"bm25s", "scipy"}, "dense": {"faiss", "onnxruntime"},
                "hybrid": {"bm25s", "scipy", "faiss", "onnxruntime"}}

# Runs the rag command line in a fresh interpreter and prints, last, which heavy modules it imported.
PROBE = """
import atexit, json, sys
atexit.register(lambda: print("\\nMODULES " + json.dumps(sorted(m for m in {heavy!r} if m in sys.modules))))
sys.argv = ["rag", *{args!r}]
from rag.cli import main
main()
"""


def run_rag(args: list[str], home: Path, **env: str) -> tuple[int, str, str, list[str]]:
    environ = {**os.environ, "SIEVE_HOME": str(home), **env}
    code = PROBE.format(heavy=HEAVY, args=[str(a) for a in args])
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True,
                          timeout=600)
    out, _, tail = proc.stdout.rpartition("\nMODULES ")
    return proc.returncode, out, proc.stderr, json.loads(tail) if tail.strip().startswith("[") else ["?"]


def real_queries() -> list[str]:
    """Questions and reference answers of the golden set and of the shared benchmarks (when present)."""
    texts = []
    for line in (ROOT / "golden" / "python_ref.jsonl").read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        texts += [item["question"], item["reference_answer"]]
    polygraph = SHARED / "polygraph" / "golden_dev.jsonl"
    if polygraph.is_file():
        for line in polygraph.read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            texts += [item["question"], item.get("reference_answer") or ""]
    for name in ("ground_truth.json", "ground_truth_hard.json", "ground_truth_heldout.json"):
        path = SHARED / "aegis" / "questions" / name
        if path.is_file():
            texts += [t for rec in json.loads(path.read_text(encoding="utf-8")) for t in (rec["question"], rec["ground_truth"])]
    return list(dict.fromkeys(t for t in texts if t.strip()))


@pytest.mark.parametrize("args", [["--help"], ["models", "--no-check"], ["artifacts"], ["search", "--help"]])
def test_commands_that_need_no_model_never_import_torch(args: list[str], tmp_path: Path):
    code, out, err, heavy = run_rag(args, tmp_path)
    assert code == 0, err
    # rag artifacts hashes the DSPy signatures an artifact was compiled for, so it needs DSPy; the others need none
    allowed = {"dspy"} if args == ["artifacts"] else set()
    assert set(heavy) <= allowed, f"rag {' '.join(args)} imported {heavy}"


@pytest.mark.slow  # loads the smallest embedded model to check it
def test_rag_models_with_its_check_never_imports_torch(tmp_path: Path):
    code, out, err, heavy = run_rag(["models", "--set", "embedded_model=smollm2-135m"], tmp_path)
    assert code == 0, err
    assert not set(heavy) & set(TORCH), f"rag models imported {heavy}"


def test_onnx_query_vectors_match_sentence_transformers():
    from rag.index.embeddings import embed
    from rag.index.encoder import load_encoder
    from rag.index.export import MIN_COSINE, ensure_export

    texts = real_queries()
    assert len(texts) >= 300 or not SHARED.is_dir(), len(texts)
    encoder = load_encoder(str(ensure_export("default")))
    ours = np.stack([encoder.encode([t])[0] for t in texts])  # one at a time, as rag search does
    theirs = embed(texts)
    cosines = (ours * theirs).sum(axis=1)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= MIN_COSINE, (cosines.min(), texts[worst])
    batched = encoder.encode(texts)  # length-sorted batches give the same vectors as one at a time
    assert np.abs(batched - ours).max() < 1e-5
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_manifest_records_the_encoder_and_search_runs_without_torch():
    import rag.index.export as exp
    from rag.config import Settings

    assert Settings().embedding_precision == "auto"
    index = small_index()  # default settings: int8 on ONNX Runtime
    record = index.manifest["embedding"]["encoder"]
    assert record["runtime"] == "onnxruntime" and record["precision"] == "int8"
    assert record["id"].endswith(f"-int8-v1-q{exp.INT8_RECIPE}")
    assert small_fp32_index().manifest["embedding"]["encoder"]["precision"] == "fp32"
    assert len(record["model_sha256"]) == 64 and record["id"].startswith(record["model_sha256"][:16])
    home = Path(os.environ["SIEVE_HOME"])
    assert (home / "encoders" / record["id"] / "model.onnx").is_file()
    from rag.retrieval.retriever import Retriever

    expected = [h.chunk_id for h in Retriever(index, mode="hybrid", top_k=3).search("what does assert do")]
    for mode in ("bm25", "dense", "hybrid"):
        code, out, err, heavy = run_rag(["search", "what does assert do", "--index-dir", index.dir, "--mode", mode,
                                         "--k", "3", "--json"], home)
        assert code == 0, err
        assert set(heavy) <= SEARCH_NEEDS[mode], f"rag search --mode {mode} imported {heavy}"
        if mode == "hybrid":
            assert [h["chunk_id"] for h in json.loads(out)] == expected


def test_torch_runtime_gives_the_same_hits(tmp_path: Path):
    from rag.config import Settings
    from rag.index.store import Index
    from rag.retrieval.retriever import Retriever

    root = copy_index(tmp_path / "idx", fp32=True)
    onnx = Retriever(Index.load(root, Settings(index_dir=root)), mode="dense", top_k=4)
    st = Retriever(Index.load(root, Settings(index_dir=root, embedding_runtime="torch")), mode="dense", top_k=4)
    assert type(st.index.query_encoder).__name__ == "_TorchQuery"
    for q in ("what does assert do", "how do I leave a loop early", "import a module from a package"):
        assert [h.chunk_id for h in onnx.search(q)] == [h.chunk_id for h in st.search(q)]


def _edit_manifest(root: Path, change) -> None:
    path = root / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    change(manifest)
    path.write_text(json.dumps(manifest), encoding="utf-8")


def test_index_from_before_the_encoder_record_still_works(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                          monkeypatch: pytest.MonkeyPatch):
    import rag.index.encoder as enc
    import rag.index.export as exp
    from rag.config import Settings
    from rag.index.store import Index
    from rag.retrieval.retriever import Retriever

    root = copy_index(tmp_path / "old", fp32=True)  # indexes from before the record were all fp32
    _edit_manifest(root, lambda m: m["embedding"].pop("encoder"))
    new = Retriever(small_fp32_index(), mode="dense", top_k=4)
    expected = [h.chunk_id for h in new.search("what does pass do")]

    # the model's export is cached already: used at once, nothing said
    old = Retriever(Index.load(root, Settings(index_dir=root)), mode="dense", top_k=4)
    assert [h.chunk_id for h in old.search("what does pass do")] == expected
    assert type(old.index.query_encoder).__name__ == "OnnxEncoder"
    assert "Note:" not in capsys.readouterr().err

    # no export yet (another machine): made on the first dense query, with one note, then reused
    cached = exp.ensure_export("default")
    made = []

    def fake_export(model, dest, sha, check_texts=(), say=None):  # a copy stands in for the real export
        made.append(dest)
        shutil.copytree(cached, dest)
        return dest

    monkeypatch.setattr(exp, "encoders_dir", lambda: tmp_path / "empty-home" / "encoders")
    monkeypatch.setattr(exp, "export", fake_export)
    enc.load_encoder.cache_clear()
    old = Retriever(Index.load(root, Settings(index_dir=root)), mode="dense", top_k=4)
    assert [h.chunk_id for h in old.search("what does pass do")] == expected
    err = capsys.readouterr().err
    assert err.count("Note: this index was built before Sieve recorded its query encoder; exporting") == 1, err
    again = Retriever(Index.load(root, Settings(index_dir=root)), mode="dense", top_k=4)
    again.search("what does pass do")
    assert len(made) == 1 and "Note:" not in capsys.readouterr().err


def test_a_changed_model_is_refused_with_the_fix(tmp_path: Path):
    from rag.config import Settings
    from rag.index.store import Index
    from rag.retrieval.retriever import Retriever

    root = copy_index(tmp_path / "changed", fp32=True)

    def other_model(m):  # as if the index had been built with other model files, whose export is not cached
        m["embedding"]["encoder"].update(model_sha256="0" * 64, id="0" * 16 + "-fp32-v1")

    _edit_manifest(root, other_model)
    retriever = Retriever(Index.load(root, Settings(index_dir=root)), mode="hybrid")
    with pytest.raises(IndexMismatch, match=r"the model changed.*Rebuild it with: rag index .*--index-dir"):
        retriever.search("what does assert do")
    assert [h.rank for h in retriever.search("what does assert do", mode="bm25")]  # bm25 needs no encoder
    torch_side = Retriever(Index.load(root, Settings(index_dir=root, embedding_runtime="torch")), mode="dense")
    with pytest.raises(IndexMismatch, match="the model changed"):
        torch_side.search("what does assert do")


def test_an_int8_index_is_not_queried_with_torch(tmp_path: Path):
    from rag.config import Settings
    from rag.index.store import Index
    from rag.retrieval.retriever import Retriever

    root = copy_index(tmp_path / "int8")
    _edit_manifest(root, lambda m: m["embedding"]["encoder"].update(precision="int8"))
    retriever = Retriever(Index.load(root, Settings(index_dir=root, embedding_runtime="torch")), mode="dense")
    with pytest.raises(IndexMismatch, match=r"int8 ONNX encoder.*embedding_runtime=onnx.*SIEVE_EMBEDDING_RUNTIME=torch rag index"):
        retriever.search("what does assert do")


def test_unknown_runtime_is_a_config_error():
    from rag.config import load_settings
    from rag.errors import ConfigError

    with pytest.raises(ConfigError, match="embedding_runtime='tf' is not allowed; use one of: onnx, torch"):
        load_settings({"embedding_runtime": "tf"})
    with pytest.raises(ConfigError, match="embedding_precision='int4' is not allowed; use one of: auto, fp32, int8"):
        load_settings({"embedding_precision": "int4"})
    import rag.index.export as exp

    with pytest.raises(ConfigError, match="use one of: fp32, int8"):  # an encoder is made at a resolved precision
        exp.ensure_export("default", precision="auto")


def test_export_is_made_once_and_reused(monkeypatch: pytest.MonkeyPatch):
    import rag.index.encoder as enc
    import rag.index.export as exp

    first = exp.ensure_export("default")
    meta = json.loads((first / enc.META_FILE).read_text(encoding="utf-8"))
    assert meta["checked"]["min_cosine"] >= exp.MIN_COSINE and meta["dim"] == 384 and meta["max_seq_length"] == 256
    monkeypatch.setattr(exp, "export", lambda *a, **k: pytest.fail("exported twice"))
    assert exp.ensure_export("default") == first


def test_int8_index_is_queried_with_int8_and_never_reuses_fp32_vectors(tmp_path: Path):
    import rag.index.export as exp
    from rag.index.build import build_index
    from rag.retrieval.retriever import Retriever
    from tests.retrieval_support import settings, small_chunks

    root = copy_index(tmp_path / "i8", fp32=True)  # an fp32 index in place: its vectors must not be reused at int8
    s = settings(index_dir=root, embedding_precision="int8")
    index = build_index(list(small_chunks()), root, s, show_progress=False)
    record = index.manifest["embedding"]["encoder"]
    assert record["precision"] == "int8" and record["id"].endswith(f"-int8-v1-q{exp.INT8_RECIPE}")
    assert index.manifest["counts"]["embeddings_reused"] == 0
    assert index.query_encoder.id == record["id"]  # queries use the index's own int8 encoder
    cosines = (np.asarray(index.embeddings) * np.asarray(small_fp32_index().embeddings)).sum(axis=1)
    assert 0.8 < cosines.min() < 0.99999  # close to fp32, not equal
    hits = Retriever(index, mode="dense", top_k=3).search("what does the assert statement do")
    assert any(h.chunk_id.startswith("assert") for h in hits), [h.chunk_id for h in hits]


def test_int8_vectors_stay_close_to_fp32_on_real_text():
    """The int8 recipe keeps every vector near its fp32 twin on the golden set's and the shared benchmarks'
    questions and answers (recipe 1, per-tensor weights, fell to 0.78 on real chunks on an AVX2 CPU)."""
    import rag.index.encoder as enc
    import rag.index.export as exp

    texts = real_queries()
    fp32 = enc.load_encoder(str(exp.ensure_export("default"))).encode(texts)
    int8 = enc.load_encoder(str(exp.ensure_export("default", precision="int8"))).encode(texts)
    cosines = exp._cosines(int8, fp32)
    assert len(texts) >= 100
    assert cosines.min() >= 0.97 and cosines.mean() >= 0.99, (float(cosines.min()), float(cosines.mean()))
    meta = json.loads((exp.ensure_export("default", precision="int8") / enc.META_FILE).read_text(encoding="utf-8"))
    assert meta["quantization"]["recipe"] == exp.INT8_RECIPE and meta["quantization"]["per_channel"] is True


def test_an_index_from_another_int8_recipe_is_refused_with_the_fix(tmp_path: Path):
    """An int8 index whose encoder folder is gone, made by an older quantization recipe: exporting today's
    recipe would give other vectors than the index holds, so the query is refused with the rebuild command."""
    from rag.config import Settings
    from rag.index.store import Index
    from rag.retrieval.retriever import Retriever

    root = copy_index(tmp_path / "old-int8")

    def recipe_one(m):
        encoder = m["embedding"]["encoder"]
        encoder.update(precision="int8", id=encoder["model_sha256"][:16] + "-int8-v1")

    _edit_manifest(root, recipe_one)
    retriever = Retriever(Index.load(root, Settings(index_dir=root)), mode="dense")
    with pytest.raises(IndexMismatch, match=r"-int8-v1, which is not in .*makes \S+-int8-v1-q2 instead.*"
                                            r"Rebuild it with: rag index"):
        retriever.search("what does assert do")
    assert [h.rank for h in retriever.search("what does assert do", mode="bm25")]  # bm25 needs no encoder


def test_int8_embeds_each_text_alone_so_its_vector_does_not_depend_on_its_batch():
    """Dynamic int8 quantization scales a batch's activations together: batched, a passage's vector depended
    on the texts beside it (cosine 0.98). int8 embeds one text per batch, so a passage indexed among hundreds
    gets the vector it gets alone (its query-time encoding); fp32 stays batched."""
    import rag.index.encoder as enc
    import rag.index.export as exp

    texts = real_queries()[:60] + list(exp.SAMPLE_TEXTS)
    int8 = enc.OnnxEncoder(exp.ensure_export("default", precision="int8"), threads=2)
    assert int8.batch_size == 1 and all(len(rows) == 1 for rows in int8.batches(texts))
    together = int8.encode(texts)
    alone = np.stack([int8.encode([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    fp32 = enc.OnnxEncoder(exp.ensure_export("default"), threads=2)
    assert fp32.batch_size == enc.BATCH_SIZE and max(len(rows) for rows in fp32.batches(texts)) > 1


def test_int8_sessions_side_by_side_give_one_sessions_vectors_and_are_kept():
    """With several cores an int8 encoder runs its batches on one single-threaded session per core at once;
    the vectors, their order and the progress count are those of one session embedding them in turn, and the
    sessions are made once, then reused by the next call."""
    import rag.index.encoder as enc
    import rag.index.export as exp

    folder = exp.ensure_export("default", precision="int8")
    texts = real_queries()[:80]
    parallel, serial = enc.OnnxEncoder(folder, threads=2), enc.OnnxEncoder(folder, threads=1)
    done: list[int] = []
    vectors = parallel.encode(texts, progress=done.append)
    np.testing.assert_allclose(vectors, serial.encode(texts), atol=1e-5)
    assert sum(done) == len(texts) and len(done) == len(texts)
    made = parallel._idle.qsize()
    assert 1 <= made <= 2
    parallel.encode(texts[:10])
    assert parallel._idle.qsize() == made  # reused, not made again
    assert serial._idle.qsize() == 0  # one core: the main session only


def test_auto_precision_is_int8_on_onnx_fp32_on_torch_and_falls_back_to_fp32(monkeypatch: pytest.MonkeyPatch):
    """The default ``embedding_precision = "auto"``: int8 on ONNX Runtime, fp32 on torch; where the int8 encoder
    cannot be made or fails its check on this CPU, one note and an fp32 index instead of no index."""
    import rag.index.encoder as enc
    import rag.index.export as exp
    from rag.errors import ModelError

    notes: list[str] = []
    _, record = enc.index_encoder("default", "onnx", say=notes.append, precision="auto")
    assert record["precision"] == "int8" and record["runtime"] == "onnxruntime" and not notes
    _, record = enc.index_encoder("default", "torch", say=notes.append, precision="auto")
    assert record["precision"] == "fp32" and record["runtime"] == "sentence-transformers" and not notes

    def refused(*_args, **_kwargs):
        raise ModelError("the int8 encoder's vectors differ too much from fp32's on this CPU")

    cached = exp.ensure_export("default")
    monkeypatch.setattr(exp, "encoders_dir", lambda: Path(os.environ["SIEVE_HOME"]) / "encoders-auto")
    monkeypatch.setattr(exp, "quantize", refused)
    monkeypatch.setattr(exp, "export", lambda model, dest, *a, **k: Path(shutil.copytree(cached, dest)))
    encoder, record = enc.index_encoder("default", "onnx", say=notes.append, precision="auto")
    assert record["precision"] == "fp32" and encoder.id.endswith("-fp32-v1")
    assert notes == ["Note: indexing with the fp32 encoder; the int8 one is not usable here: the int8 encoder's "
                     "vectors differ too much from fp32's on this CPU"]
    with pytest.raises(ModelError, match="differ too much"):  # asked for by name: refused, not swapped
        enc.index_encoder("default", "onnx", precision="int8")
