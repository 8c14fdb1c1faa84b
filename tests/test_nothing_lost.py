"""Three ways data was lost (issue 38), each reproduced on real files through the real CLI: a document with
U+0085 / U+2028 replaced a working index with one that could not load; ``rag eval --out`` wrote into any folder;
``rag report --out`` overwrote a run's results."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.catalogue_support import check, checksums, run_cli

FIXTURE_RUN = Path(__file__).parent / "fixtures" / "runs" / "full"


def ok(res, says: str) -> None:
    """Exit 0, no traceback, and ``says`` on stdout or stderr."""
    assert res.code == 0 and "Traceback" not in res.err, res.err[-3000:]
    assert re.search(says, res.out + res.err, re.M), (res.out[-1000:], res.err[-1000:])


def test_json_lines_split_at_newlines_only():
    from rag.ingest.jsonl import split_lines

    assert split_lines('{"a": "x\u2028y\u0085z"}\r\n{"b": 1}\n') == ['{"a": "x\u2028y\u0085z"}', '{"b": 1}', ""]


def test_a_golden_line_with_a_raw_line_separator_is_valid_json(tmp_path):
    from rag.ingest.jsonl import json_lines

    path = tmp_path / "g.jsonl"
    path.write_text(json.dumps({"q": "one\u2028two\u2029three\u0085four"}, ensure_ascii=False) + "\n", encoding="utf-8")
    [(lineno, _where, rec)] = list(json_lines(path, missing="no file"))
    assert lineno == 1 and rec["q"] == "one\u2028two\u2029three\u0085four"


@pytest.mark.slow
def test_a_document_with_nel_or_line_separators_indexes_and_loads(tmp_path):
    from rag.config import load_settings
    from rag.index.store import Index

    docs, idx = tmp_path / "docs", tmp_path / "idx"
    docs.mkdir()
    (docs / "b.md").write_text("# Other\n\nPlain text about bananas.\n", encoding="utf-8")
    ok(run_cli("index", docs, "--index-dir", idx, "-q"), r"^Indexed 1 chunks")
    (docs / "c.txt").write_text("Next line\u0085with NEL.\nA line\u2028separator and a paragraph\u2029separator.\n",
                                encoding="utf-8")
    ok(run_cli("index", docs, "--index-dir", idx, "-q"), r"^Indexed 2 chunks")
    index = Index.load(idx, load_settings({"index_dir": idx}))
    assert any("\u0085with NEL" in c.text for c in index.chunks)
    ok(run_cli("search", "NEL", "--index-dir", idx), r"c\.txt")


@pytest.mark.slow
def test_a_new_index_that_cannot_be_loaded_never_replaces_the_old_one(tmp_path, monkeypatch):
    """With the old reader back (str.splitlines), the new index is unreadable: the build says so and the old
    index is left byte for byte as it was."""
    import rag.index.store as store

    docs, idx = tmp_path / "docs", tmp_path / "idx"
    docs.mkdir()
    (docs / "b.md").write_text("# Other\n\nPlain text about bananas.\n", encoding="utf-8")
    ok(run_cli("index", docs, "--index-dir", idx, "-q"), r"^Indexed 1 chunks")
    before = checksums(idx)
    (docs / "c.txt").write_text("Next line\u0085with NEL.\n", encoding="utf-8")
    monkeypatch.setattr(store, "split_lines", str.splitlines)  # the bug this guards against
    res = run_cli("index", docs, "--index-dir", idx, "-q")
    check(res, 1, r"corrupt|inconsistent")
    assert checksums(idx) == before


def test_eval_out_refuses_a_folder_that_is_not_a_run(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "summary.json").write_text('{"my": "own"}\n')
    res = run_cli("eval", "--config", "full", "--out", folder, "--limit", "1")
    check(res, 1, r"is neither empty nor a Sieve run \(it holds summary\.json\).*new or empty folder")
    assert (folder / "summary.json").read_text() == '{"my": "own"}\n' and len(list(folder.iterdir())) == 1


def test_eval_out_accepts_a_run_folder_check():
    from rag.eval.runs import check_run_folder

    check_run_folder(FIXTURE_RUN)  # a run: resumed, not refused


@pytest.mark.parametrize("name", ["results.jsonl", "summary.json", "run.json"])
def test_report_never_overwrites_a_file_of_a_run(tmp_path, name):
    run = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run)
    before = checksums(run)
    res = run_cli("report", run, "--out", run / name)
    check(res, 1, rf"--out .*{name} is a file of the eval run .*never overwrites")
    assert checksums(run) == before
    res = run_cli("report", run, "--out", run / "report.md")  # a new file beside them is fine
    ok(res, r"^wrote .*report\.md")
    assert (run / "report.md").read_text().startswith("#")


def test_report_never_overwrites_an_artifact_file(tmp_path):
    art = tmp_path / "art"
    shutil.copytree(Path(__file__).parents[1] / "artifacts" / "qwen1.5b-bootstrap", art)
    before = checksums(art)
    res = run_cli("report", FIXTURE_RUN, "--out", art / "program.json")
    check(res, 1, r"is a file of the index or artifact")
    assert checksums(art) == before
