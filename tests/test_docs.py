"""The docs that are generated or checked from the code: the references in docs/reference/, the README's size,
its results block, and its Python example, which runs here on a real index and the real embedded model."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from rag.cli import docgen

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(docgen.REFERENCES))
def test_generated_references_match_the_code(name):
    committed = (docgen.REFERENCE_DIR / name).read_text(encoding="utf-8")
    assert committed == docgen.REFERENCES[name](), f"docs/reference/{name} is stale: run python -m rag.cli.docgen"


def test_the_configuration_reference_covers_every_setting_with_a_meaning():
    import dataclasses

    from rag.config import Settings

    documented = {name: words for _section, name, words in docgen.setting_docs()}
    assert set(documented) == {f.name for f in dataclasses.fields(Settings)}
    assert [name for name, words in documented.items() if not words] == []


def test_docgen_check_fails_on_a_stale_reference(tmp_path, monkeypatch):
    monkeypatch.setattr(docgen, "REFERENCE_DIR", tmp_path)
    (tmp_path / "cli.md").write_text("old\n")
    assert docgen.main(["--check"]) == 1
    assert (tmp_path / "cli.md").read_text() == "old\n"  # --check writes nothing
    assert docgen.main([]) == 0 and docgen.main(["--check"]) == 0


def test_the_readme_is_for_users():
    assert len(README.splitlines()) <= 300


def test_every_relative_link_in_the_readme_and_docs_resolves():
    missing = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                missing.append(f"{page.relative_to(ROOT)} -> {target}")
    assert missing == []


def _python_example() -> str:
    section = README.split("## Python API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.slow
def test_the_readme_python_example_runs(tmp_path):
    """The README's example, verbatim, in a fresh interpreter: the embedded model (SmolLM2, the mechanical-test
    model) over a real index of the built-in corpus's topics, configured through SIEVE_* as a user would."""
    from tests.retrieval_support import small_index

    index = small_index()
    env = {"PATH": "/usr/bin:/bin", "SIEVE_HOME": str(tmp_path / "home"), "SIEVE_INDEX_DIR": str(index.dir),
           "SIEVE_EMBEDDED_MODEL": "smollm2-135m", "SIEVE_MAX_REWRITES": "1", "SIEVE_CACHE": "false",
           "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", _python_example()], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    refused, steps = lines[-1].split()
    assert refused in ("True", "False") and int(steps) >= 2  # at least retrieve and grade


def test_the_results_block_is_generated_from_the_committed_runs():
    from rag.report import headline

    block = README.split(headline.BEGIN, 1)[1].split(headline.END, 1)[0]
    assert block.strip() == headline.table().strip(), "README results are stale: run python -m rag.report.headline"


def test_the_results_index_lists_every_kept_run_and_nothing_else():
    """benchmarks/results/README.md names each entry of benchmarks/results/ once (rerun results_index.py when not)."""
    results = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
    index = (results / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| \[([^\]]+?)/?\]\(", index, re.M)
    on_disk = sorted(p.name for p in results.iterdir() if p.name != "README.md")
    assert sorted(listed) == on_disk, "stale: run python benchmarks/results_index.py"
    for line in index.splitlines():
        if line.startswith("| ["):
            assert line.count(" | ") >= 5, f"a row without every column: {line[:80]}"
