"""`rag index`, `rag search`, `rag eval --retrieval-only` end to end (typer runner + one real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rag.cli import app
from rag.errors import IndexNotFound, InputError, SieveError
from tests.retrieval_support import small_index

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


@pytest.fixture()
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "my docs"
    (folder / "sub dir").mkdir(parents=True)
    (folder / "leave.md").write_text("# Leave\n\n## PTO\n\nRequest 1 to 4 days of PTO with 7 days' advance notice.\n",
                                     encoding="utf-8")
    (folder / "sub dir" / "travel.md").write_text("# Travel\n\nBoston is a Tier 1 (Premium) city; hotels up to $375.\n",
                                                  encoding="utf-8")
    (folder / "broken.txt").write_bytes(b"\x00\x00binary")
    return folder


def test_index_folder_then_search_and_eval(tmp_path: Path, docs: Path):
    idx = tmp_path / "idx"
    with pytest.warns(UserWarning, match=r"broken\.txt: binary content"):
        result = run("index", str(docs), "--index-dir", str(idx), "--quiet")
    assert result.exit_code == 0, result.output
    assert "Indexed 2 chunks" in result.stdout
    manifest = json.loads((idx / "manifest.json").read_text())
    assert manifest["corpus"]["source"] == f"folder:{docs.resolve()}"

    result = run("search", "hotel rate in Boston", "--index-dir", str(idx), "--k", "1", "--json")
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)
    assert [h["chunk_id"] for h in hits] == ["sub dir/travel.md#000"]

    result = run("search", "PTO notice", "--index-dir", str(idx), "--mode", "bm25")
    assert result.exit_code == 0 and result.stdout.startswith("[1] leave.md#000")

    golden = tmp_path / "g.jsonl"
    golden.write_text("\n".join(json.dumps(r) for r in [
        {"id": "a", "type": "answerable", "question": "How much notice for 3 days of PTO?", "reference_answer": "7 days",
         "should_refuse": False, "evidence": ["7 days' advance notice"]},
        {"id": "b", "type": "unanswerable", "question": "What is the dress code?", "reference_answer": "", "should_refuse": True},
    ]) + "\n")
    result = run("eval", "--retrieval-only", "--golden", str(golden), "--index-dir", str(idx), "--k", "1", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["recall@1"] == 1.0 and report["needle_recall@1"] == 1.0
    assert (report["scored"], report["skipped_no_gold"]) == (1, 1)
    result = run("eval", "--retrieval-only", "--golden", str(golden), "--index-dir", str(idx), "--k", "1")
    assert result.exit_code == 0 and "recall@1" in result.stdout and "1.000" in result.stdout


def test_index_chunks_jsonl_keeps_ids(tmp_path: Path):
    chunks = tmp_path / "c.jsonl"
    chunks.write_text("\n".join(json.dumps(r) for r in [
        {"id": "ext/a#7", "text": "Compose merges multiple files with -f."},
        {"id": "ext/b#1", "text": "Buildx bake reads HCL files.", "title": "Bake"},
    ]) + "\n")
    result = run("index", "--chunks", str(chunks), "--index-dir", str(tmp_path / "idx"), "--quiet")
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in (tmp_path / "idx" / "chunks.jsonl").read_text().splitlines()]
    assert [x["id"] for x in lines] == ["ext/a#7", "ext/b#1"]


def test_search_shows_a_repeated_passage_once(tmp_path: Path):
    chunks = tmp_path / "c.jsonl"
    chunks.write_text("\n".join(json.dumps(r) for r in [
        {"id": "guide#3", "text": "Compose merges multiple files with -f.", "title": "Guide > Compose"},
        {"id": "compose#0", "text": "compose MERGES multiple files\n  with -f", "title": "Compose"},
        {"id": "bake#1", "text": "Buildx bake reads HCL files.", "title": "Bake"},
    ]) + "\n")
    assert run("index", "--chunks", str(chunks), "--index-dir", str(tmp_path / "idx"), "--quiet").exit_code == 0
    shown = run("search", "how does compose merge files", "--index-dir", str(tmp_path / "idx"), "--k", "3")
    assert shown.exit_code == 0, shown.output
    first, other = ("guide#3", "compose#0") if shown.output.index("guide#3") < shown.output.index("compose#0") else ("compose#0", "guide#3")
    assert f"] {first}  score=" in shown.output and f"same words as {other} (shown once)" in shown.output
    assert f"] {other}  score=" not in shown.output and "] bake#1  score=" in shown.output
    hits = json.loads(run("search", "how does compose merge files", "--index-dir", str(tmp_path / "idx"), "--json").output)
    assert [h["chunk_id"] for h in hits] == [first, "bake#1"] and hits[0]["duplicates"] == [other]
    both = runner.invoke(app, ["search", "how does compose merge files", "--index-dir", str(tmp_path / "idx")],
                         env={"SIEVE_DEDUPE": "false"})
    assert "same words as" not in both.output and "] guide#3  score=" in both.output and "] compose#0  score=" in both.output


def test_user_errors_are_domain_errors(tmp_path: Path, docs: Path):
    result = run("search", "anything", "--index-dir", str(tmp_path / "none"))
    assert isinstance(result.exception, IndexNotFound)
    result = run("index", str(tmp_path / "empty-dir-that-does-not-exist"), "--index-dir", str(tmp_path / "i"))
    assert isinstance(result.exception, InputError)
    result = run("index", str(docs), "--chunks", "x.jsonl", "--index-dir", str(tmp_path / "i"))
    assert isinstance(result.exception, InputError) and "not both" in str(result.exception)
    result = run("search", "   ", "--index-dir", str(small_index().dir))
    assert isinstance(result.exception, InputError)
    result = run("eval", "--golden", "g.jsonl", "--index-dir", str(small_index().dir))
    assert isinstance(result.exception, SieveError) and "--config NAME" in str(result.exception)
    assert not (tmp_path / "i").exists()


# ask loads its retriever in a background thread (rag.cli.common.InBackground): what that raises is the same one line
@pytest.mark.parametrize("command", [["search", "hello"], ["ask", "what does assert do?"]], ids=["search", "ask"])
def test_real_process_prints_one_clean_error_line(tmp_path: Path, command: list[str]):
    env = {**os.environ, "SIEVE_HOME": str(tmp_path / "home")}
    proc = subprocess.run([sys.executable, "-m", "rag", *command], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.strip() == f"Error: No index at {tmp_path / 'home' / 'index'}. Build one with: rag index"


@pytest.mark.slow
def test_index_full_builtin_corpus(tmp_path: Path):
    # All 79 topics through the default source; large chunks keep the embedding work (and CI time) down.
    result = run("index", "--index-dir", str(tmp_path / "full"), "--chunk-size", "4000", "--chunk-overlap", "0", "--quiet")
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "full" / "manifest.json").read_text())
    assert manifest["corpus"]["source"] == "builtin" and manifest["counts"]["chunks"] > 100
    result = run("search", "how do I catch several exceptions at once", "--index-dir", str(tmp_path / "full"), "--json")
    hits = json.loads(result.stdout)
    assert any(h["chunk_id"].startswith(("try#", "exceptions#")) for h in hits)
