"""The notebooks run top to bottom against the committed results fixture, and are committed without outputs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
FIXTURE_RUNS = ROOT / "tests" / "fixtures" / "runs"
FIXTURE_ARTIFACTS = ROOT / "tests" / "fixtures" / "artifacts"
CELL_TIMEOUT_S = 120  # per cell; the whole notebook takes seconds


def test_both_notebooks_exist():
    assert {p.stem for p in NOTEBOOKS} >= {"failure_analysis", "compile_report"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
             and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; strip them (jupyter nbconvert --clear-output --inplace)"


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory, monkeypatch_module):
    """A ``python3`` kernel spec for this interpreter, first on JUPYTER_PATH; the fixture as the results."""
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    spec_dir = tmp_path_factory.mktemp("jupyter") / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (sieve tests)", "language": "python"}))
    monkeypatch_module.setenv("JUPYTER_PATH", str(spec_dir.parents[1]))
    monkeypatch_module.setenv("PYTHONPATH", str(ROOT))
    monkeypatch_module.setenv("MPLBACKEND", "Agg")
    monkeypatch_module.setenv("SIEVE_RUNS", str(FIXTURE_RUNS))
    artifacts = FIXTURE_ARTIFACTS if FIXTURE_ARTIFACTS.is_dir() else tmp_path_factory.mktemp("no-artifacts")
    monkeypatch_module.setenv("SIEVE_ARTIFACTS_DIR", str(artifacts))
    monkeypatch_module.setenv("SIEVE_HOME", str(tmp_path_factory.mktemp("sieve-home")))


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_on_fixture(path, kernel_env):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=CELL_TIMEOUT_S,
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors
    text = "\n".join(o.get("text", "") for c in code for o in c.outputs if o.output_type == "stream")
    if path.stem == "failure_analysis":
        # the failure traces were rendered from the fixture, step by step
        assert "=====" in text and "1. retrieve" in text
    else:
        assert "== grade (grader)" in text and "comparing:" in text


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_on_a_fresh_machine_says_what_to_run(path, kernel_env, tmp_path, monkeypatch):
    """No eval runs and no artifacts yet: every cell still runs, and the notebook says which commands to run."""
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("SIEVE_RUNS", str(tmp_path / "no-runs-yet"))
    monkeypatch.setenv("SIEVE_ARTIFACTS_DIR", str(tmp_path / "no-artifacts-yet"))
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=CELL_TIMEOUT_S,
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [f"{o.get('ename')}: {o.get('evalue')}" for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors
    text = "\n".join(o.get("text", "") for c in code for o in c.outputs if o.output_type == "stream")
    assert "No eval runs to show" in text and "rag eval --config full --split test --limit 12" in text
    if path.stem == "compile_report":
        assert "== grade (grader)" in text and "nothing to compare" in text  # the uncompiled prompts, still shown


def test_rag_notebook_command():
    """`rag notebook` names the notebook and this interpreter's jupyter; an unknown name lists the real ones."""
    import importlib.util

    from typer.testing import CliRunner

    from rag.cli import app
    from rag.errors import SieveError

    runner = CliRunner()
    res = runner.invoke(app, ["notebook", "compile_report", "--print"])
    assert res.exit_code == 0
    assert res.stdout.strip() == f"{sys.executable} -m jupyter lab {ROOT / 'notebooks' / 'compile_report.ipynb'}"
    res = runner.invoke(app, ["notebook", "nope"])
    assert isinstance(res.exception, SieveError)
    assert "available: compile_report, failure_analysis" in str(res.exception)
    if importlib.util.find_spec("jupyterlab") is None:  # this venv: no JupyterLab, so the hint names the extra
        res = runner.invoke(app, ["notebook"])
        assert isinstance(res.exception, SieveError) and 'pip install -e ".[notebooks]"' in str(res.exception)
