"""How the failure catalogue (tests/test_failure_catalogue.py) runs the CLI and checks that nothing was lost.

``run_cli`` calls :func:`rag.cli.main`, the function the ``rag`` script runs, in this process (the embedding
model stays loaded between cases), with ``sys.argv`` set, stdout and stderr captured, warnings shown the way
a real process shows them, and ``SystemExit`` turned into the exit code. An exception that escapes ``main``
is what a user would see as a traceback: it is captured into stderr, so the no-traceback check fails on it.

``check`` asserts what every case asserts; ``checksums`` hashes every file under a folder, so a case can assert
that no user file changed. The setups below write a case's user files (real corpora, indexes, runs, damaged on
purpose).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import sys
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rag.paths import PROJECT_ROOT
from tests.retrieval_support import small_index

MESSAGE = re.compile(r"^(Error: |Warning: |Interrupted: |gate failed: |gate passed )")


@dataclass
class Outcome:
    code: int | None
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def run_cli(*args: object) -> Outcome:
    from rag.cli import main

    out, err = io.StringIO(), io.StringIO()
    code: int | None = None
    old_argv, old_env = sys.argv, dict(os.environ)  # a command may set variables (rag index -q does)
    sys.argv = ["rag", *(str(a) for a in args)]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("default")
            warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: sys.stderr.write(
                warnings.formatwarning(message, category, filename, lineno, line))
            try:
                main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:  # noqa: BLE001 - escaping main() = a traceback on the user's screen
                err.write(traceback.format_exc())
    finally:
        sys.argv = old_argv
        os.environ.clear()
        os.environ.update(old_env)
    return Outcome(code, out.getvalue(), err.getvalue())


def checksums(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, str]:
    """sha256 of every file under ``root`` (symlinks and special files by their target name), minus ``skip``."""
    found = {}
    for path in sorted(Path(root).rglob("*")):
        if any(path == s or s in path.parents for s in skip):
            continue
        if path.is_symlink():
            found[str(path)] = "-> " + str(path.readlink())
        elif path.is_file():
            found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        elif not path.is_dir():
            found[str(path)] = "special"
    return found


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# A golden set over the topics of tests/retrieval_support.TOPICS (the shared small index)
GOLDEN = [
    {"id": "g-assert", "type": "answerable", "question": "What does the assert statement do?",
     "reference_answer": "It inserts debugging assertions.", "relevant_chunk_ids": ["assert#000"], "split": "test"},
    {"id": "g-while", "type": "answerable", "question": "How does a while loop repeat its suite?",
     "reference_answer": "While the expression is true.", "relevant_chunk_ids": ["while#000"], "split": "test"},
    {"id": "g-lambda", "type": "vague", "question": "how do I write a tiny anonymous function",
     "reference_answer": "With a lambda expression.", "relevant_chunk_ids": ["lambda#000"], "split": "dev"},
    {"id": "g-mars", "type": "unanswerable", "question": "What is the population of Mars City?",
     "reference_answer": "", "should_refuse": True, "split": "test"},
]


def docs_folder(root: Path) -> Path:
    """Two small Markdown files: a corpus that embeds in well under a second."""
    folder = root / "docs"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "leave.md").write_text("# Leave\n\nRequest 1 to 4 days of PTO with 7 days' advance notice.\n",
                                     encoding="utf-8")
    (folder / "travel.md").write_text("# Travel\n\nBoston is a Tier 1 city; hotels up to $375 a night.\n",
                                      encoding="utf-8")
    return folder


def check(res: Outcome, code: int, says: str) -> None:
    """Exit code, one message line matching ``says``, no traceback; an error is one line, the last one."""
    assert "Traceback" not in res.err, res.err[-3000:]
    assert res.code == code, f"exit {res.code}, stderr:\n{res.err[-2000:]}"
    messages = [line for line in res.lines if MESSAGE.match(line)]
    assert any(re.search(says, line) for line in messages), f"no message matches {says!r}; stderr:\n{res.err[-2000:]}"
    errors = [line for line in res.lines if line.startswith("Error:")]
    if errors:
        assert len(errors) == 1 and res.lines[-1] == errors[0], res.err


# ---------------------------------------------------------------- setups (each writes user files under u)
def index_copy(u: Path, name: str = "idx") -> Path:
    return Path(shutil.copytree(small_index().dir, u / name))


def damaged_index(damage: str) -> Callable[[Path], None]:
    def setup(u: Path) -> None:
        root = index_copy(u)
        if damage == "delete-faiss":
            (root / "dense.faiss").unlink()
        elif damage == "truncate-faiss":
            (root / "dense.faiss").write_bytes((root / "dense.faiss").read_bytes()[:100])
        elif damage == "bad-manifest":
            (root / "manifest.json").write_text("{not json", encoding="utf-8")
        elif damage == "drop-chunk-line":
            lines = (root / "chunks.jsonl").read_text(encoding="utf-8").splitlines()
            (root / "chunks.jsonl").write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
        elif damage == "delete-bm25":
            shutil.rmtree(root / "bm25")
        elif damage == "truncate-embeddings":
            (root / "embeddings.npy").write_bytes((root / "embeddings.npy").read_bytes()[:64])
        elif damage == "future-format":
            m = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
            (root / "manifest.json").write_text(json.dumps({**m, "format": 99}), encoding="utf-8")
    return setup


def web_app(u: Path) -> None:
    docs_folder(u)
    (u / "app").mkdir()
    (u / "app" / "manifest.json").write_text('{"name": "my app"}', encoding="utf-8")
    (u / "app" / "notes.md").write_text("keep me\n", encoding="utf-8")


def only_foreign_manifest(u: Path) -> None:
    docs_folder(u)
    (u / "app").mkdir()
    (u / "app" / "manifest.json").write_text('{"name": "my app", "version": 2}', encoding="utf-8")


def artifact_copy(u: Path) -> None:
    docs_folder(u)
    shutil.copytree(PROJECT_ROOT / "artifacts" / "smollm2-bootstrap", u / "art")


def index_with_notes(u: Path) -> None:
    docs_folder(u)
    (index_copy(u) / "notes.md").write_text("my notes, inside the index folder\n", encoding="utf-8")


def files(**named: bytes | str) -> Callable[[Path], None]:
    """Files under u/docs (``__`` in a keyword stands for ``/``); bytes are written as they are."""
    def setup(u: Path) -> None:
        (u / "docs").mkdir(exist_ok=True)
        for name, content in named.items():
            path = u / "docs" / name.replace("__", "/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return setup


def both(*setups: Callable[[Path], object]) -> Callable[[Path], None]:
    def setup(u: Path) -> None:
        for one in setups:
            one(u)
    return setup


def chunks_file(text: str | bytes) -> Callable[[Path], None]:
    def setup(u: Path) -> None:
        (u / "chunks.jsonl").write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return setup


def golden(rows: list[object] | str = GOLDEN) -> Callable[[Path], None]:
    def setup(u: Path) -> None:
        if isinstance(rows, str):
            (u / "golden.jsonl").write_text(rows, encoding="utf-8")
        else:
            write_jsonl(u / "golden.jsonl", rows)
    return setup


def text_file(name: str, text: str) -> Callable[[Path], None]:
    def setup(u: Path) -> None:
        (u / name).write_text(text, encoding="utf-8")
    return setup


def run_folder(damage: str = "") -> Callable[[Path], None]:
    """u/run: a finished eval run of three items (hand-made records), damaged as asked."""
    def setup(u: Path) -> None:
        from rag.eval.runs import append_record, open_run, write_summary
        from tests._traces import answer, item, pred, record, retrieve

        run = u / "run"
        its = [item("a1"), item("a2"), item("u1", "unanswerable")]
        open_run(run, {"config_name": "baseline", "golden_hash": "abc", "config": {"top_k": 2, "reflection": False}})
        for it in its:
            append_record(run, {**record(it, pred([retrieve("g1", "x"), answer(["g1"])], citations=["g1"]), {"g1"},
                                             judge={"correct": True, "faithful": True, "reason": "ok"}, k=2),
                                "config": "baseline"})
        write_summary(run, its, config_name="baseline", ghash="abc", k=2, max_rewrites=0)
        results = run / "results.jsonl"
        lines = results.read_text(encoding="utf-8").splitlines(keepends=True)
        if damage == "first-line":
            lines[0] = "#### not json\n"
        elif damage == "middle-line":
            lines[1] = lines[1][: len(lines[1]) // 2] + "\n"
        elif damage == "torn-tail":
            lines[-1] = lines[-1][: len(lines[-1]) // 2]
        elif damage == "summary":
            (run / "summary.json").write_text('{"config_name": "baseline", "metr', encoding="utf-8")
        elif damage == "run-json":
            (run / "run.json").write_text("{broken", encoding="utf-8")
        results.write_text("".join(lines), encoding="utf-8")
    return setup


def says_in_stdout(text: str) -> Callable[[Path, Outcome], None]:
    def then(u: Path, res: Outcome) -> None:
        assert text in res.out, res.out[-2000:]
    return then


def not_embedded(u: Path, res: Outcome) -> None:
    assert "embedding" not in res.err  # refused before any embedding was done


def indexed(n: int) -> Callable[[Path, Outcome], None]:
    def then(u: Path, res: Outcome) -> None:
        assert f"Indexed {n} chunks" in res.out, res.out + res.err
    return then
