"""Where the analysis finds runs (rag.report.runset): a run dir, a folder of runs, $SIEVE_RUNS, $SIEVE_HOME/runs."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from rag.errors import InputError
from rag.report import compare
from rag.report.runset import load_runs

FIXTURE_RUNS = Path(__file__).parent / "fixtures" / "runs"


def _dirs() -> dict[str, Path]:
    return {json.loads((d / "summary.json").read_text())["config_name"]: d
            for d in sorted(FIXTURE_RUNS.iterdir()) if (d / "summary.json").is_file()}


def _copy(src: Path, dst: Path, *, updated: str | None = None, artifact: str | None = None) -> Path:
    shutil.copytree(src, dst)
    if updated:
        s = json.loads((dst / "summary.json").read_text())
        (dst / "summary.json").write_text(json.dumps({**s, "updated": updated}))
    if artifact:
        m = json.loads((dst / "run.json").read_text())
        (dst / "run.json").write_text(json.dumps({**m, "config": {**m["config"], "artifact": artifact}}))
    return dst


def test_folder_of_runs_and_single_run():
    runs = load_runs(FIXTURE_RUNS)
    assert runs.names == sorted(_dirs())  # one run per config, in folder order
    one = load_runs(_dirs()["full"])
    assert one.names == ["full"] and one["full"].dir == _dirs()["full"]
    assert len(one["full"].records) == one["full"].summary["n_done"]


def test_env_and_default_home(tmp_path, monkeypatch):
    d = _dirs()
    monkeypatch.setenv("SIEVE_RUNS", os.pathsep.join(str(d[k]) for k in ("full", "baseline")))
    assert load_runs().names == ["full", "baseline"]  # env order kept
    monkeypatch.delenv("SIEVE_RUNS")
    monkeypatch.setenv("SIEVE_HOME", str(tmp_path))
    _copy(d["baseline"], tmp_path / "runs" / d["baseline"].name)
    assert load_runs().names == ["baseline"]


def test_latest_run_per_config_and_compiled_runs_apart(tmp_path):
    full = _dirs()["full"]
    _copy(full, tmp_path / "full-old", updated="2020-01-01T00:00:00+00:00")
    _copy(full, tmp_path / "full-new", updated="2030-01-01T00:00:00+00:00")
    _copy(full, tmp_path / "full-compiled", artifact="smollm2-bootstrap")
    runs = load_runs(tmp_path)
    assert sorted(r.dir.name for r in runs) == ["full-compiled", "full-new"]
    assert set(runs.names) == {"full", "full+smollm2-bootstrap"}
    before, after, why = compare.pick_pair(runs)
    assert (before.name, after.name) == ("full", "full+smollm2-bootstrap") and "compiled" in why
    assert compare.flips(before, after).empty  # the same records: nothing flipped


def test_same_config_twice_is_told_apart(tmp_path):
    full = _dirs()["full"]
    a, b = _copy(full, tmp_path / "a"), _copy(full, tmp_path / "b")
    assert load_runs([a, b]).names == ["full", "full (b)"]


def test_nothing_found_says_what_to_do(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_runs(tmp_path / "missing")
    with pytest.raises(InputError, match="no eval runs in .*rag eval"):
        load_runs(tmp_path)
    with pytest.raises(KeyError, match="no run named"):
        load_runs(FIXTURE_RUNS)["nope"]
