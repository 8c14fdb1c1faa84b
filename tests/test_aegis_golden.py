"""The Aegis question converter, on the real shared benchmark files."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from rag.eval.golden import load_golden

ROOT = Path(__file__).resolve().parents[1]
AEGIS = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "aegis"
pytestmark = pytest.mark.skipif(not (AEGIS / "questions").is_dir(), reason=f"Aegis benchmark not found at {AEGIS}")


def _module():
    spec = importlib.util.spec_from_file_location("aegis_golden", ROOT / "benchmarks" / "aegis_golden.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_convert_counts_types_and_needles(tmp_path):
    mod = _module()
    out = tmp_path / "aegis.jsonl"
    assert mod.main(["--aegis", str(AEGIS), "--out", str(out)]) == 0
    items = load_golden(out)
    by_id = {it.id: it for it in items}
    assert len(items) == 27 + 12 + 4
    assert sorted(it.id for it in items if it.type == "vague") == ["P1", "P2", "P3", "P4"]
    assert sorted(it.id for it in items if it.should_refuse) == ["U1", "U2", "U3"]
    assert all(not it.evidence for it in items if it.should_refuse or it.id.startswith("S"))
    # 13 items with needles, 22 needles in all (the README's figures)
    assert sum(bool(it.evidence) for it in items) == 13 and sum(len(it.evidence) for it in items) == 22
    assert "return all corporate hardware" in by_id["H2"].evidence
    assert "three (3) business days" in by_id["H2"].meta["original_needles"]
    assert {it.split for it in items} == {"test"}
    converted = mod.convert(AEGIS)
    assert mod.missing_evidence(converted, AEGIS / "docs") == []


def test_keeps_original_needles_on_request_and_never_writes_into_the_repo(tmp_path):
    mod = _module()
    items = mod.convert(AEGIS, original_needles=True, split="dev")
    assert "three (3) business days" in next(it for it in items if it["id"] == "H2")["evidence"]
    with pytest.raises(SystemExit, match="inside the repository"):
        mod.main(["--aegis", str(AEGIS), "--out", str(ROOT / "golden" / "aegis.jsonl")])
    assert not (ROOT / "golden" / "aegis.jsonl").exists()
