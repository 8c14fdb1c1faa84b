"""The failure catalogue (issue 16): bad input and interruptions, as a careful new user would meet them.

Every case runs the real CLI (tests/catalogue_support.run_cli: rag.cli.main in this process) on real files, a
real bm25s + FAISS index and the real embedding model, and asserts four things:

* the exit code;
* a one-line message (``Error:``, ``Warning:``, ``Interrupted:``, ``gate failed:``) that names the file, line,
  field or flag (a regex per case); an error is the only ``Error:`` line, and the last line;
* no traceback;
* no user file changed (sha256 of every file under the case's folder before and after), except inside the
  index or run folder the command is there to write.

The table ``CASES`` holds the cases that need only files (their setups are in tests/catalogue_support.py);
tests/test_failure_interrupts.py holds those that need an interruption, a held lock, a scripted language model
or a fresh process; tests/test_catalogue_*.py (issue 38, round 3) hold one area each. The guide "What happens when
things go wrong" (docs/guides/failures.md) gives the count of all of them (test_readme_states_the_count).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rag.paths import PROJECT_ROOT
from tests.catalogue_support import (
    GOLDEN,
    Outcome,
    artifact_copy,
    both,
    check,
    checksums,
    chunks_file,
    damaged_index,
    docs_folder,
    files,
    golden,
    index_with_notes,
    indexed,
    not_embedded,
    only_foreign_manifest,
    run_cli,
    run_folder,
    says_in_stdout,
    text_file,
    web_app,
)
from tests.retrieval_support import small_index


@dataclass
class Case:
    name: str
    args: tuple[str, ...]
    code: int
    says: str  # regex one message line must match
    setup: Callable[[Path], object] | None = None
    env: dict[str, str] = field(default_factory=dict)
    writes: str | None = None  # the folder (under the case's folder) the command may write
    then: Callable[[Path, Outcome], None] | None = None


IDX = "{idx}"  # the shared small index (read-only)
G = "{u}/golden.jsonl"
DOCS = "{u}/docs"
CHUNK_A = '{"id": "a", "text": "Compose merges files with -f."}\n'

CASES = [
    # ---- data loss (issue 16, items 1 and 2)
    Case("index-dir holds a web app with its own manifest.json", ("index", DOCS, "--index-dir", "{u}/app"), 1,
         r"^Error: .*/app is not a Sieve index: it holds notes\.md; refusing to replace it", web_app, then=not_embedded),
    Case("index-dir holds only someone else's manifest.json", ("index", DOCS, "--index-dir", "{u}/app"), 1,
         r"^Error: .*/app is not a Sieve index: its manifest\.json is not a Sieve index manifest", only_foreign_manifest,
         then=not_embedded),
    Case("index-dir is a copy of a compiled artifact", ("index", DOCS, "--index-dir", "{u}/art"), 1,
         r"^Error: .*/art is not a Sieve index: it holds program\.json", artifact_copy),
    Case("index-dir is an index with the user's notes inside", ("index", DOCS, "--index-dir", "{u}/idx"), 1,
         r"^Error: .*/idx is not a Sieve index: it holds notes\.md", index_with_notes),
    Case("rag report: results.jsonl with a damaged first line", ("report", "{u}/run"), 0,
         r"^Warning: .*/run/results\.jsonl:1: damaged line skipped", run_folder("first-line"),
         then=says_in_stdout("| Items (done / selected) | 2 / 3 |")),
    Case("rag report: results.jsonl with a damaged middle line", ("report", "{u}/run"), 0,
         r"^Warning: .*/run/results\.jsonl:2: damaged line skipped", run_folder("middle-line"),
         then=says_in_stdout("| Items (done / selected) | 2 / 3 |")),
    Case("rag report: results.jsonl with a torn last line", ("report", "{u}/run"), 0,
         r"^Warning: .*/run/results\.jsonl:3: torn last line .*the next rag eval of this run repairs it",
         run_folder("torn-tail")),
    Case("rag calibrate: results.jsonl with a damaged line", ("calibrate", "--run", "{u}/run", "--no-label", "--store",
                                                              "{u}/labels.jsonl"), 0,
         r"^Warning: .*/run/results\.jsonl:1: damaged line skipped", run_folder("first-line")),
    # ---- tracebacks (items 3 to 6)
    Case("corrupt run.json", ("eval", "--config", "baseline", "--golden", G, "--index-dir", IDX, "--out", "{u}/run",
                              "--no-artifact"), 1,
         r"^Error: .*/run/run\.json is damaged \(invalid JSON.*delete run\.json and run the same command again",
         both(golden(), run_folder("run-json"))),
    Case("corrupt summary.json", ("report", "{u}/run"), 0,
         r"^Warning: .*/run/summary\.json: damaged; recomputed from results\.jsonl", run_folder("summary"),
         then=says_in_stdout("| Items (done / selected) | 3 / 3 |")),
    Case("a file name that is not UTF-8", ("index", DOCS, "--index-dir", "{u}/idx", "-q"), 0,
         r"^Warning: file name .*caf\\xe9\.md is not valid UTF-8",
         lambda u: files(**{"ok.md": "# Ok\n\nfine text\n"})(u) or (u / "docs" / os.fsdecode(b"caf\xe9.md")).write_text(
             "# Cafe\n\nCoffee with milk.\n", encoding="utf-8"), writes="idx", then=indexed(2)),
    Case("a query with bytes that are not UTF-8", ("search", os.fsdecode(b"caf\xe9 au lait"), "--index-dir", IDX), 1,
         r"^Error: the query is not valid UTF-8 text \(bad byte at character 4: b'\\xe9'\)"),
    # ---- options that were ignored (items 7 and 8)
    Case("retrieval-only with a malformed gate file", ("eval", "--retrieval-only", "--golden", G, "--index-dir", IDX,
                                                       "--gate", "{u}/gate.json"), 1,
         r"^Error: .*/gate\.json: invalid JSON at line 1", both(golden(), text_file("gate.json", "{recall: 1"))),
    Case("retrieval-only gate with an agent metric", ("eval", "--retrieval-only", "--golden", G, "--index-dir", IDX,
                                                      "--gate", "{u}/gate.json"), 1,
         r"^Error: .*/gate\.json: unknown metric 'e2e_accuracy'; known: all_needles@4, hit@4",
         both(golden(), text_file("gate.json", '{"e2e_accuracy": {"min": 0.5}}'))),
    Case("retrieval-only gate out of bounds", ("eval", "--retrieval-only", "--golden", G, "--index-dir", IDX,
                                               "--gate", "{u}/gate.json"), 1,
         r"^gate failed: hit@4 = 1 is above its ceiling 0", both(golden(), text_file("gate.json", '{"hit@4": {"max": 0}}'))),
    Case("retrieval-only honours --split and --limit", ("eval", "--retrieval-only", "--golden", G, "--index-dir", IDX,
                                                        "--split", "test", "--limit", "2", "--gate", "{u}/gate.json"), 0,
         r"^gate passed \(.*/gate\.json\)", both(golden(), text_file("gate.json", '{"recall@4": {"min": 0.5}}')),
         then=says_in_stdout("items=2")),
    Case("retrieval-only with an agent-only option", ("eval", "--retrieval-only", "--golden", G, "--index-dir", IDX,
                                                      "--out", "{u}/run", "--no-judge"), 1,
         r"^Error: --retrieval-only runs no agent, so --out, --no-judge would be ignored", golden()),
    Case("a misspelt environment variable", ("search", "assert statement", "--index-dir", IDX, "--k", "1"), 0,
         r"^Warning: environment variable SIEVE_TOPK is not a Sieve setting and is ignored; did you mean SIEVE_TOP_K\?",
         env={"SIEVE_TOPK": "1"}),
    # ---- late checks and misleading messages
    Case("agent eval with a malformed gate file", ("eval", "--config", "baseline", "--golden", G, "--index-dir", IDX,
                                                   "--out", "{u}/run", "--gate", "{u}/gate.json"), 1,
         r"^Error: .*/gate\.json: 'e2e_accuracy' must be \{\"min\": number\}",
         both(golden(), text_file("gate.json", '{"e2e_accuracy": {"floor": 0.5}}')),
         then=lambda u, res: not (u / "run").exists() or pytest.fail("the run started")),
    Case("index-dir is a file", ("index", DOCS, "--index-dir", "{u}/idx"), 1,
         r"^Error: .*/idx exists and is not a folder", both(docs_folder, text_file("idx", "a file")), then=not_embedded),
    Case("index-dir below a file", ("index", DOCS, "--index-dir", "{u}/notes.txt/idx"), 1,
         r"^Error: cannot create the index folder .*/notes\.txt/idx: .*/notes\.txt is not a folder",
         both(docs_folder, text_file("notes.txt", "a file")), then=not_embedded),
    Case("only empty files", ("index", DOCS, "--index-dir", "{u}/idx"), 1,
         r"^Error: .*/docs: none of the 2 supported file\(s\) could be indexed \(2 empty;",
         files(**{"a.md": "", "b.txt": "  \n"})),
    Case("a file over max_file_mb", ("index", DOCS, "--index-dir", "{u}/idx", "-q"), 0,
         r"^Warning: skipping .*/big\.txt: 1\.5 MB is over max_file_mb=1 \(raise it with SIEVE_MAX_FILE_MB",
         files(**{"big.txt": "word " * 300_000, "ok.md": "# Ok\n\nfine text\n"}), env={"SIEVE_MAX_FILE_MB": "1"},
         writes="idx", then=indexed(1)),
    Case("--k -1", ("search", "assert", "--index-dir", IDX, "--k", "-1"), 1, r"^Error: --k must be >= 1, got -1"),
    Case("--limit 0", ("eval", "--retrieval-only", "--golden", G, "--index-dir", IDX, "--limit", "0"), 1,
         r"^Error: --limit must be >= 1, got 0", golden()),
    Case("--artifact that does not exist", ("ask", "what is assert?", "--index-dir", IDX, "--artifact", "nope"), 1,
         r"^Error: no artifact 'nope' in .*artifacts; available: ([\w.-]+, )*smollm2-bootstrap"),
    Case("eval --artifact that does not exist", ("eval", "--config", "full", "--golden", G, "--index-dir", IDX,
                                                 "--out", "{u}/run", "--no-judge", "--artifact", "nope"), 1,
         r"^Error: no artifact 'nope' in .*artifacts; available: ([\w.-]+, )*smollm2-bootstrap", golden(),
         then=lambda u, res: not (u / "run" / "results.jsonl").exists() or pytest.fail("the run started")),
    Case("eval --artifact with --no-artifact", ("eval", "--config", "full", "--artifact", "qwen1.5b-bootstrap",
                                                "--no-artifact"), 1,
         r"^Error: --artifact NAME runs that compiled program and --no-artifact none; give one of them"),
    # ---- documents that already behaved well
    Case("only a binary file", ("index", DOCS, "--index-dir", "{u}/idx"), 1,
         r"^Error: .*/docs: none of the 1 supported file\(s\) could be indexed \(1 binary;", files(**{"x.md": b"\x00\x01bin"})),
    Case("a latin-1 file among good ones", ("index", DOCS, "--index-dir", "{u}/idx", "-q"), 0,
         r"^Warning: skipping .*/latin1\.md: not valid UTF-8 \(byte 3\)",
         files(**{"latin1.md": "caf\xe9".encode("latin-1"), "ok.md": "# Ok\n\nfine text\n"}), writes="idx", then=indexed(1)),
    Case("a symlink loop and a FIFO among the files", ("index", DOCS, "--index-dir", "{u}/idx", "-q"), 0,
         r"^(?!)", lambda u: (files(**{"ok.md": "# Ok\n\nfine text\n"})(u), os.symlink("loop.md", u / "docs" / "loop.md"),
                             os.mkfifo(u / "docs" / "pipe.md")), writes="idx"),
    Case("a folder that does not exist", ("index", "{u}/nope", "--index-dir", "{u}/idx"), 1,
         r"^Error: .*/nope: no such file or folder"),
    Case("--chunks: a line that is not JSON", ("index", "--chunks", "{u}/chunks.jsonl", "--index-dir", "{u}/idx"), 1,
         r"^Error: .*/chunks\.jsonl:2: invalid JSON", chunks_file(CHUNK_A + "{oops\n")),
    Case("--chunks: a record without text", ("index", "--chunks", "{u}/chunks.jsonl", "--index-dir", "{u}/idx"), 1,
         r"^Error: .*/chunks\.jsonl:1: missing required field 'text'", chunks_file('{"id": "a"}\n')),
    Case("--chunks: a duplicate id", ("index", "--chunks", "{u}/chunks.jsonl", "--index-dir", "{u}/idx"), 1,
         r"^Error: .*/chunks\.jsonl:2: duplicate id 'a' \(first on line 1\)", chunks_file(CHUNK_A * 2)),
    Case("--chunks: a lone surrogate", ("index", "--chunks", "{u}/chunks.jsonl", "--index-dir", "{u}/idx"), 1,
         r"^Error: .*/chunks\.jsonl:1: field 'text' holds a lone surrogate", chunks_file('{"id": "a", "text": "x \\ud800"}\n')),
    Case("--chunks: not UTF-8", ("index", "--chunks", "{u}/chunks.jsonl", "--index-dir", "{u}/idx"), 1,
         r"^Error: .*/chunks\.jsonl: not valid UTF-8", chunks_file(b'{"id": "a", "text": "caf\xe9"}\n')),
    Case("a folder and --chunks", ("index", DOCS, "--chunks", "{u}/chunks.jsonl", "--index-dir", "{u}/idx"), 1,
         r"^Error: give either a folder PATH or --chunks FILE\.jsonl, not both", both(docs_folder, chunks_file(CHUNK_A))),
    *[Case(f"damaged index: {d}", ("search", "assert", "--index-dir", "{u}/idx"), 1,
           rf"^Error: Index at .*/idx {w}.*Rebuild it with: rag index .*--index-dir .*/idx", damaged_index(d))
      for d, w in [("delete-faiss", r"is incomplete \(missing dense\.faiss\)"), ("truncate-faiss", "is corrupt"),
                   ("bad-manifest", r"is corrupt \(manifest\.json"), ("drop-chunk-line", "is inconsistent"),
                   ("delete-bm25", r"is incomplete \(missing bm25\)"), ("truncate-embeddings", "is corrupt"),
                   ("future-format", "has format 99")]],
    Case("a damaged index is rebuilt in place", ("index", DOCS, "--index-dir", "{u}/idx", "-q"), 0, r"^(?!)",
         both(docs_folder, damaged_index("bad-manifest")), writes="idx", then=indexed(2)),
    Case("no index", ("search", "assert", "--index-dir", "{u}/none"), 1,
         r"^Error: No index at .*/none\. Build one with: rag index --index-dir"),
    Case("golden: a line that is not JSON", ("eval", "--retrieval-only", "--golden", G, "--index-dir", IDX), 1,
         r"^Error: .*/golden\.jsonl:2: invalid JSON", golden(json.dumps(GOLDEN[0]) + "\n{\n")),
    Case("golden: a bad type", ("eval", "--retrieval-only", "--golden", G, "--index-dir", IDX), 1,
         r"^Error: .*/golden\.jsonl:1: field 'type' must be one of answerable, vague, unanswerable",
         golden([{**GOLDEN[0], "type": "easy"}])),
    Case("golden: no such file", ("eval", "--retrieval-only", "--golden", "{u}/nope.jsonl", "--index-dir", IDX), 1,
         r"^Error: .*/nope\.jsonl: no such golden file"),
    Case("golden: a split it does not have", ("eval", "--retrieval-only", "--golden", G, "--index-dir", IDX, "--split",
                                              "train"), 1,
         r"^Error: no golden items in split 'train'; the file has: dev, test", golden()),
    Case("config file: invalid TOML", ("search", "assert", "--index-dir", IDX), 1,
         r"^Error: .*/sieve\.toml: invalid TOML", text_file("sieve.toml", "top_k = = 3\n"),
         env={"SIEVE_CONFIG": "{u}/sieve.toml"}),
    Case("config file: unknown setting", ("search", "assert", "--index-dir", IDX), 1,
         r"^Error: .*/sieve\.toml: unknown setting 'topk'", text_file("sieve.toml", "topk = 3\n"),
         env={"SIEVE_CONFIG": "{u}/sieve.toml"}),
    Case("config file: a value of the wrong type", ("search", "assert", "--index-dir", IDX), 1,
         r"^Error: .*/sieve\.toml: setting top_k=\[3\] is not a valid int", text_file("sieve.toml", "top_k = [3]\n"),
         env={"SIEVE_CONFIG": "{u}/sieve.toml"}),
    Case("config file that does not exist", ("search", "assert", "--index-dir", IDX), 1,
         r"^Error: SIEVE_CONFIG points to .*/missing\.toml, which does not exist", env={"SIEVE_CONFIG": "{u}/missing.toml"}),
    Case("environment variable with a bad value", ("search", "assert", "--index-dir", IDX), 1,
         r"^Error: environment variable SIEVE_TOP_K: setting top_k='many' is not a valid int", env={"SIEVE_TOP_K": "many"}),
    Case("--set without a value", ("eval", "--retrieval-only", "--golden", G, "--index-dir", IDX, "--set", "top_k"), 1,
         r"^Error: --set 'top_k': expected key=value", golden()),
    Case("--mode that does not exist", ("search", "assert", "--index-dir", IDX, "--mode", "fuzzy"), 1,
         r"^Error: mode='fuzzy' is not allowed; use one of: bm25, dense, hybrid"),
    Case("a corrupt artifact", ("ask", "what is assert?", "--index-dir", IDX, "--artifact", "{u}/art"), 1,
         r"^Error: .*/art/program\.json: not valid JSON",
         lambda u: (artifact_copy(u), (u / "art" / "program.json").write_text("{", encoding="utf-8"))),
    Case("rag report on a folder that is not a run", ("report", "{u}/docs"), 1,
         r"^Error: .*/docs has no summary\.json; point rag report at a directory written by rag eval", docs_folder),
    Case("rag report --out in a missing folder", ("report", "{u}/run", "--out", "{u}/no/such/report.md"), 1,
         r"^Error: cannot write the report to .*/no/such/report\.md", run_folder()),
    Case("rag calibrate: a malformed labels file", ("calibrate", "--run", "{u}/run", "--labels", "{u}/mine.jsonl",
                                                     "--store", "{u}/store.jsonl"), 1,
         r"^Error: .*/mine\.jsonl:1: invalid JSON", both(run_folder(), text_file("mine.jsonl", "{nope\n"))),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_catalogue(case: Case, user: Path, monkeypatch: pytest.MonkeyPatch):
    if case.setup:
        case.setup(user)
    for name, value in case.env.items():
        monkeypatch.setenv(name, value.format(u=user))
    skip = (user / case.writes,) if case.writes else ()
    before = checksums(user, skip)
    res = run_cli(*(a.format(u=user, idx=small_index().dir) for a in case.args))
    if case.says == r"^(?!)":  # a case that must succeed without any message
        assert res.code == case.code and "Traceback" not in res.err, res.err[-2000:]
        assert not [line for line in res.lines if line.startswith(("Error", "Warning"))], res.err
    else:
        check(res, case.code, case.says)
    assert checksums(user, skip) == before
    if case.then:
        case.then(user, res)


CATALOGUE = ("test_failure_interrupts", "test_catalogue_ingest", "test_catalogue_index", "test_catalogue_config",
             "test_catalogue_eval", "test_catalogue_serve")  # the catalogue's other files, besides CASES here


def count_tests(module) -> int:
    """How many tests pytest runs from ``module`` (no marker filtering): each ``test*`` function once per case of
    its parametrization, the product over stacked ``parametrize`` marks."""
    count = 0
    for name, obj in vars(module).items():
        if name.startswith("test") and callable(obj) and not isinstance(obj, type):
            cases = 1
            for mark in getattr(obj, "pytestmark", []):
                if mark.name == "parametrize":
                    values = mark.args[1] if len(mark.args) > 1 else mark.kwargs["argvalues"]
                    cases *= len(values)
            count += cases
    return count


def catalogue_count() -> int:
    import importlib

    return len(CASES) + sum(count_tests(importlib.import_module(f"tests.{name}")) for name in CATALOGUE)


def test_readme_states_the_count():
    """The guide "What happens when things go wrong" (docs/guides/failures.md, linked from the README) gives the size
    of the catalogue: the cases of CASES here plus every test of the other catalogue files, as pytest runs them. It
    states one figure, and that figure is the count."""
    import re

    count = catalogue_count()
    assert count >= 40
    guide = (PROJECT_ROOT / "docs" / "guides" / "failures.md").read_text(encoding="utf-8")
    section = guide[guide.index("# What happens when things go wrong"):].split("\n## ")[0]
    assert re.findall(r"(?<![\d,.])(\d[\d,]*) cases\b", section) == [str(count)], f"the catalogue has {count} cases"


def test_count_tests_counts_as_pytest_does():
    """count_tests counts as pytest does: a parametrized test is one test per case, stacked marks multiply."""
    import types

    module = types.ModuleType("m")

    @pytest.mark.parametrize("a", [1, 2, 3])
    @pytest.mark.parametrize("b", [pytest.param(1, id="x"), 2])
    def test_grid(a, b):
        pass

    @pytest.mark.parametrize(argnames="c", argvalues=[1, 2])
    def test_keyword(c):
        pass

    def test_plain():
        pass

    def helper():
        pass

    module.test_grid, module.test_keyword, module.test_plain, module.helper = test_grid, test_keyword, test_plain, helper
    assert count_tests(module) == 6 + 2 + 1
