"""Failure catalogue, settings and CLI messages (issue 38, round 3): config values of the wrong type, a config
file with keys outside its [sieve] table, SIEVE_CONFIG naming a folder, ``rag eval --out`` refused before any
model loads, an unreadable input path of any command (an error naming its flag, not typer's usage box), an
output path not checked for reading, warnings glued to a progress line, an id with a newline in
``rag search``, and NaN in ``rag search --json``.

Each case runs the real CLI (tests/catalogue_support.run_cli) on real files and asserts the exit code, a one-line
message naming the file, key, variable or flag, no traceback, and unchanged user files, as
tests/test_failure_catalogue.py does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rag.paths import PROJECT_ROOT
from tests.catalogue_support import (
    GOLDEN,
    Outcome,
    check,
    checksums,
    docs_folder,
    run_cli,
    run_folder,
    text_file,
    write_jsonl,
)


@dataclass
class Case:
    name: str
    toml: str | None  # sieve.toml's text (SIEVE_CONFIG points to it), or None for no config file
    says: str
    env: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ("search", "assert", "--index-dir", "{u}/none")
    code: int = 1


TOML = r"^Error: .*/sieve\.toml: "
CASES = [
    # item 6: each of these was a traceback in rag.config, the retriever, the encoder or the CLI
    Case("index_dir = 5", "index_dir = 5\n",
         TOML + r"setting index_dir=5 is not a valid Path; write a path in quotes, e\.g\. index_dir = \"\.\.\.\"$"),
    Case("cache_dir = true", "cache_dir = true\n", TOML + r"setting cache_dir=True is not a valid Path"),
    Case("sieve = \"x\"", 'sieve = "x"\n', TOML + r"'sieve' must be the \[sieve\] table of settings, got sieve = 'x'"),
    Case("reranker = 5", "reranker = 5\n", TOML + r"setting reranker=5 is not a valid str \| None; write it in quotes"),
    Case("embedding_model = 1", "embedding_model = 1\n", TOML + r"setting embedding_model=1 is not a valid str;"),
    Case("answerer_model = 3", "answerer_model = 3\n", TOML + r"setting answerer_model=3 is not a valid str \| None"),
    Case("mode = 3", "mode = 3\n", TOML + r"setting mode=3 is not a valid str"),
    Case("top_k = true (a bool is no int)", "[sieve]\ntop_k = true\n", TOML + r"setting top_k=True is not a valid int; "
         r"use a whole number"),
    Case("a float setting given text", 'expansion_weight = "heavy"\n',
         TOML + r"setting expansion_weight='heavy' is not a valid float; use a number"),
    Case("a value out of range names the file", '[sieve]\nmode = "fuzzy"\n',
         TOML + r"mode='fuzzy' is not allowed; use one of: bm25, dense, hybrid"),
    Case("a float environment variable", None,
         r"^Error: environment variable SIEVE_EXPANSION_WEIGHT: setting expansion_weight='x' is not a valid float",
         env={"SIEVE_EXPANSION_WEIGHT": "x"}),
    Case("an environment value out of range names the variable", None,
         r"^Error: environment variable SIEVE_TOP_K: top_k must be >= 1, got 0", env={"SIEVE_TOP_K": "0"}),
    Case("--set of the wrong type names the flag", None,
         r"^Error: --set 'top_k=many': setting top_k='many' is not a valid int; use a whole number",
         args=("eval", "--retrieval-only", "--golden", "{u}/none.jsonl", "--index-dir", "{u}/none", "--set", "top_k=many")),
    Case("--set of an unknown setting names the flag", None, r"^Error: --set 'topk=3': unknown setting 'topk'",
         args=("eval", "--retrieval-only", "--golden", "{u}/none.jsonl", "--index-dir", "{u}/none", "--set", "topk=3")),
    # item 14: keys above [sieve] were dropped silently
    Case("keys above the [sieve] table", 'top_k = 8\nmode = "bm25"\n[sieve]\nreflection = false\n',
         TOML + r"top_k, mode are above the \[sieve\] table, outside it; move every setting below the \[sieve\] line"),
    # M1
    Case("SIEVE_CONFIG names a folder", None,
         r"^Error: SIEVE_CONFIG points to .*/u, which is a folder; it must name a TOML file \(e\.g\. .*/u/sieve\.toml\)",
         env={"SIEVE_CONFIG": "{u}"}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_settings_catalogue(case: Case, user: Path, monkeypatch: pytest.MonkeyPatch):
    if case.toml is not None:
        text_file("sieve.toml", case.toml)(user)
        monkeypatch.setenv("SIEVE_CONFIG", str(user / "sieve.toml"))
    for name, value in case.env.items():
        monkeypatch.setenv(name, value.format(u=user))
    before = checksums(user)
    res = run_cli(*(a.format(u=user) for a in case.args))
    check(res, case.code, case.says)
    assert checksums(user) == before


def test_top_level_keys_alone_and_a_sieve_table_alone_both_load(user: Path, monkeypatch: pytest.MonkeyPatch):
    """The two layouts item 14's error leaves: every key at the top level, or every key in [sieve]."""
    from rag.config import load_settings

    monkeypatch.setenv("SIEVE_CONFIG", str(user / "sieve.toml"))
    for text in ('top_k = 8\nindex_dir = "~/idx"\nexpansion_weight = 2\n',
                 '[sieve]\ntop_k = 8\nindex_dir = "~/idx"\nexpansion_weight = 2\n'):
        (user / "sieve.toml").write_text(text, encoding="utf-8")
        s = load_settings()
        assert (s.top_k, s.index_dir, s.expansion_weight) == (8, Path("~/idx").expanduser(), 2.0)
        assert type(s.expansion_weight) is float


def test_every_field_is_type_checked_from_its_annotation():
    """A value of the wrong type for any field (one added later too) is a ConfigError naming it, and the field's own
    default, as TOML would write it, is accepted."""
    import dataclasses

    from rag.config import Settings
    from rag.config.sources import _coerce, _kind
    from rag.errors import ConfigError

    wrong = {bool: 3, int: [1], float: True, str: 7, Path: 7}
    for f in dataclasses.fields(Settings):
        base, _optional = _kind(f.name)
        assert base in wrong, f"{f.name}: {f.type} is a type rag.config.sources._coerce does not check"
        with pytest.raises(ConfigError, match=rf"^setting {f.name}=.* is not a valid "):
            _coerce(f.name, wrong[base])
        default = getattr(Settings(), f.name)
        assert _coerce(f.name, str(default) if isinstance(default, Path) else default) == default


# ---------------------------------------------------------------- M2: rag eval --out, before any model
def test_eval_out_below_a_file_is_refused_before_any_model_loads(user: Path):
    write_jsonl(user / "golden.jsonl", GOLDEN)
    text_file("notes.txt", "a file")(user)
    before = checksums(user)
    res = run_cli("eval", "--config", "baseline", "--golden", user / "golden.jsonl", "--index-dir", user / "none",
                  "--out", user / "notes.txt" / "run", "--no-artifact", "--no-judge")
    check(res, 1, r"^Error: cannot create the run folder .*/notes\.txt/run: .*/notes\.txt is not a folder; give --out")
    assert "Using" not in res.err and "assembling" not in res.err, res.err  # no program was built, no model fetched
    assert checksums(user) == before


# ---------------------------------------------------------------- M3: unreadable inputs of rag index
def run_unprivileged(*args: object) -> Outcome:
    """``python -m rag ARGS`` as a process that file permissions apply to: as root, without the capabilities that
    override them (util-linux setpriv); as any other user, as it is."""
    cmd = [sys.executable, "-m", "rag", *map(str, args)]
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("root without setpriv: permissions cannot be made to apply")
        caps = "-dac_override,-dac_read_search"
        cmd = ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=os.getcwd(),
                          env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    return Outcome(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.parametrize("what", ["folder", "chunks file", "file"])
def test_an_unreadable_input_is_an_error_naming_it(user: Path, what: str):
    docs = docs_folder(user)
    (user / "chunks.jsonl").write_text('{"id": "a", "text": "x"}\n', encoding="utf-8")
    target, args, says = {
        "folder": (docs, (docs,), r"^Error: .*/docs: cannot read this folder \(permission denied\); make it readable "
                                  r"\(chmod u\+rx\) or give PATH another folder$"),
        "chunks file": (user / "chunks.jsonl", ("--chunks", user / "chunks.jsonl"),
                        r"^Error: .*/chunks\.jsonl: cannot read this file \(permission denied\);.* give --chunks"),
        "file": (docs / "leave.md", (docs / "leave.md",), r"^Error: .*/leave\.md: cannot read this file"),
    }[what]
    mode = target.stat().st_mode
    target.chmod(0)
    try:
        res = run_unprivileged("index", *args, "--index-dir", user / "idx", "-q")
    finally:
        target.chmod(mode)
    check(res, 1, says)
    assert "Usage:" not in res.err and not (user / "idx").exists()


# ---------------------------------------------------------------- every other input path of the CLI
# (command line, what {t} is, the flag the message names): {t} is made unreadable (chmod 000), every other path is
# readable, so the one-line error (not typer's usage box, exit 2) comes from the path under test, before anything loads
UNREADABLE = [
    (("compile", "--golden", "{t}", "--dry-run"), "file", "--golden"),
    (("compile", "--labels", "{t}", "--dry-run"), "file", "--labels"),
    (("compile", "--index-dir", "{t}", "--dry-run"), "folder", "--index-dir"),
    (("artifacts", "--artifacts-dir", "{t}"), "folder", "--artifacts-dir"),
    (("eval", "--retrieval-only", "--golden", "{t}", "--index-dir", "{u}/none"), "file", "--golden"),
    (("eval", "--retrieval-only", "--golden", "{u}/golden.jsonl", "--gate", "{t}", "--index-dir", "{u}/none"), "file",
     "--gate"),
    (("eval", "--config", "baseline", "--golden", "{u}/golden.jsonl", "--index-dir", "{t}", "--no-judge",
      "--no-artifact"), "folder", "--index-dir"),
    (("eval", "--config", "baseline", "--golden", "{u}/golden.jsonl", "--index-dir", "{u}/none", "--out", "{t}",
      "--no-judge", "--no-artifact"), "folder", "--out"),  # a run folder is read too: the run resumes from it
    (("report", "{u}/run", "{t}"), "folder", "RUN_DIRS"),
    (("calibrate", "--run", "{t}", "--no-label"), "folder", "--run"),
    (("calibrate", "--run", "{u}/run", "--labels", "{t}", "--store", "{u}/store.jsonl"), "file", "--labels"),
    (("calibrate", "--run", "{u}/run", "--store", "{t}", "--no-label"), "file", "--store"),
    (("serve", "--runs", "{t}", "--port", "0"), "folder", "--runs"),
    (("serve", "--golden", "{t}", "--port", "0"), "file", "--golden"),
    (("serve", "--index-dir", "{t}", "--port", "0"), "folder", "--index-dir"),
    (("ask", "what is assert?", "--index-dir", "{t}"), "folder", "--index-dir"),
    (("search", "assert", "--index-dir", "{t}"), "folder", "--index-dir"),
]


@pytest.mark.parametrize("args, kind, flag", UNREADABLE, ids=[f"{a[0]} {f}" for a, _, f in UNREADABLE])
def test_every_unreadable_input_path_is_an_error_naming_its_flag(user: Path, args: tuple[str, ...], kind: str,
                                                                   flag: str):
    write_jsonl(user / "golden.jsonl", GOLDEN)
    run_folder()(user)
    target = user / ("target" if kind == "folder" else "target.jsonl")
    if kind == "folder":
        target.mkdir()
        (target / "inside.txt").write_text("kept\n", encoding="utf-8")
    else:
        target.write_text('{"id": "x"}\n', encoding="utf-8")
    before = checksums(user)
    target.chmod(0)
    try:
        res = run_unprivileged(*(a.format(u=user, t=target) for a in args))
    finally:
        target.chmod(0o755 if kind == "folder" else 0o644)
    check(res, 1, rf"^Error: .*/{target.name}: cannot read this {kind} \(permission denied\); make it readable "
                  rf"\(chmod u\+{'rx' if kind == 'folder' else 'r'}\) or give {flag} another {kind}$")
    assert "Usage:" not in res.err and len(res.lines) == 1, res.err  # nothing loaded, printed or bound before it
    assert checksums(user) == before


def test_an_output_path_is_not_checked_for_reading(user: Path):
    """``rag report --out`` on an existing file that may be written but not read: the report is written."""
    run_folder()(user)
    out = user / "report.md"
    out.write_text("old\n", encoding="utf-8")
    out.chmod(0o200)
    try:
        res = run_unprivileged("report", user / "run", "--out", out)
    finally:
        out.chmod(0o644)
    assert res.code == 0 and "Traceback" not in res.err, res.err[-2000:]
    assert out.read_text(encoding="utf-8").startswith("#"), out.read_text(encoding="utf-8")[:200]


# ---------------------------------------------------------------- M4 and item 19: what rag index and search print
def test_a_warning_during_the_progress_line_starts_a_line_of_its_own(user: Path):
    (user / "docs").mkdir()
    (user / "docs" / "a.md").write_text("# A\n\nfine text\n", encoding="utf-8")
    (user / "docs" / "b.md").write_bytes("caf\xe9".encode("latin-1"))
    res = run_cli("index", user / "docs", "--index-dir", user / "idx")  # no -q: the progress line is drawn
    check(res, 0, r"^Warning: skipping .*/b\.md: not valid UTF-8")
    assert not re.search(r"reading files \d+/\d+Warning", res.err), res.err
    assert "reading files 2/2" in res.err  # the progress was drawn, and went on after the warning


def test_search_escapes_an_id_with_a_newline_and_writes_strict_json(user: Path):
    """A chunk id with a newline stays on its hit's line; NaN and Infinity in a chunk's extra fields become null."""
    rows = [{"id": "leave\nline two", "text": "Request PTO days with advance notice.", "title": "Leave\x1b[2J",
             "score": float("nan"), "weights": [float("inf"), 1.5]},
            {"id": "travel", "text": "Hotels in Boston up to 375 a night.", "rating": float("-inf")}]
    (user / "chunks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert "NaN" in (user / "chunks.jsonl").read_text(encoding="utf-8")  # Python's json writes it; most parsers refuse it
    res = run_cli("index", "--chunks", user / "chunks.jsonl", "--index-dir", user / "idx", "-q")
    assert res.code == 0, res.err
    res = run_cli("search", "PTO advance notice hotels", "--index-dir", user / "idx", "--mode", "bm25", "--k", "2")
    assert res.code == 0 and "Traceback" not in res.err, res.err
    first = res.out.splitlines()[0]
    assert re.match(r"^\[1\] leave\\nline two  score=", first), res.out
    assert "Leave\\x1b[2J" in res.out and "\x1b" not in res.out
    res = run_cli("search", "PTO advance notice hotels", "--index-dir", user / "idx", "--mode", "bm25", "--k", "2", "--json")
    assert res.code == 0, res.err

    def refuse(constant: str):
        raise AssertionError(f"{constant} is not JSON")

    hits = json.loads(res.out, parse_constant=refuse)
    by_id = {h["chunk_id"]: h for h in hits}
    meta = json.dumps(by_id["leave\nline two"])
    assert '"score": null' in meta and "[null, 1.5]" in meta, meta
    assert '"rating": null' in json.dumps(by_id["travel"])


def test_dump_json_guards_every_non_finite_number():
    from rag.cli.common import dump_json
    from rag.ingest import jsonl

    assert dump_json is jsonl.dump_json  # one function: the CLI's stdout and the run files of rag.eval
    assert dump_json({"a": [float("nan"), {"b": float("-inf")}], "c": (1.0, float("inf"))}) == \
        '{"a": [null, {"b": null}], "c": [1.0, null]}'

