"""Ingestion sources: built-in topics and folders (real files in tmp dirs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag.errors import InputError
from rag.ingest.corpus import Document, load_builtin_topics, load_folder
from rag.ingest.textfile import html_to_text


def test_builtin_topics_are_the_cpython_reference():
    from pydoc_data.topics import topics

    docs = load_builtin_topics()
    assert len(docs) == len(topics) > 50
    by_id = {d.doc_id: d for d in docs}
    assert by_id["assert"].text == topics["assert"]
    assert by_id["assert"].title == 'The "assert" statement'
    assert by_id["if"].source == "pydoc:if"


def test_builtin_subset_and_unknown_topic():
    assert [d.doc_id for d in load_builtin_topics(["if", "while"])] == ["if", "while"]
    with pytest.raises(InputError, match="no-such-topic"):
        load_builtin_topics(["if", "no-such-topic"])


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    (tmp_path / "work policies").mkdir()
    (tmp_path / "work policies" / "leave and absence.md").write_text("# Leave Policy\n\nYou get 25 days.\n", encoding="utf-8")
    (tmp_path / "guide.rst").write_text("Install Guide\n=============\n\nRun the installer.\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("plain notes about nothing\n", encoding="utf-8")
    (tmp_path / "page.html").write_text(
        "<html><head><title>Page T</title><style>p{}</style></head><body><h1>Intro</h1><p>Hello &amp; welcome.</p>"
        "<h2>Details</h2><pre>x = 1\n\ny = 2</pre><script>alert(1)</script></body></html>", encoding="utf-8")
    (tmp_path / "code.py").write_text("print('not a document')\n", encoding="utf-8")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "secret.md").write_text("# hidden\n", encoding="utf-8")
    return tmp_path


def test_folder_recursive_relative_posix_ids(folder: Path):
    docs = load_folder(folder, show_progress=False)
    assert [d.doc_id for d in docs] == ["guide.rst", "notes.txt", "page.html", "work policies/leave and absence.md"]
    titles = {d.doc_id: d.title for d in docs}
    assert titles == {"guide.rst": "Install Guide", "notes.txt": "notes", "page.html": "Page T",
                      "work policies/leave and absence.md": "Leave Policy"}
    assert all(isinstance(d, Document) and d.source.startswith(str(folder)) for d in docs)


def test_html_becomes_markdown_like_text():
    title, text = html_to_text("<title>T</title><h1>Intro</h1><p>a &amp; b</p><h2>More</h2><pre>x = 1\n\ny = 2</pre>"
                               "<script>evil()</script><table><tr><td>k</td><td>v</td></tr></table>")
    assert title == "T"
    assert "# Intro" in text and "## More" in text and "a & b" in text
    assert "```\nx = 1\n\ny = 2\n```" in text
    assert "evil" not in text and "| k" in text


def test_binary_and_non_utf8_files_are_skipped_with_a_warning(folder: Path):
    (folder / "binary.txt").write_bytes(b"\x00\x01\x02 not text")
    (folder / "latin1.md").write_bytes("caf\xe9 au lait".encode("latin-1"))
    with pytest.warns(UserWarning) as record:
        docs = load_folder(folder, show_progress=False)
    messages = " | ".join(str(w.message) for w in record)
    assert "binary.txt" in messages and "binary" in messages
    assert "latin1.md" in messages and "UTF-8" in messages
    assert "binary.txt" not in [d.doc_id for d in docs] and len(docs) == 4


def test_unreadable_file_is_skipped_with_a_warning(folder: Path, monkeypatch: pytest.MonkeyPatch):
    # Tests run as root, where chmod cannot make a file unreadable; fail the read for one file instead.
    target = folder / "notes.txt"
    real = Path.open

    def open_(self: Path, *args, **kwargs):
        if self == target:
            raise PermissionError(13, "Permission denied")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", open_)
    with pytest.warns(UserWarning, match=r"notes\.txt.*Permission denied"):
        docs = load_folder(folder, show_progress=False)
    assert "notes.txt" not in [d.doc_id for d in docs]


def test_empty_or_unsupported_folder_is_an_error(tmp_path: Path):
    with pytest.raises(InputError, match="no supported files"):
        load_folder(tmp_path, show_progress=False)
    (tmp_path / "a.py").write_text("x = 1\n")
    with pytest.raises(InputError, match="no supported files"):
        load_folder(tmp_path, show_progress=False)
    (tmp_path / "b.md").write_bytes(b"\xff\xfe\x00\x00")
    with pytest.warns(UserWarning), pytest.raises(InputError, match=r"could be indexed \(1 binary;"):
        load_folder(tmp_path, show_progress=False)


def test_missing_path_is_an_error(tmp_path: Path):
    with pytest.raises(InputError, match="no such file or folder"):
        load_folder(tmp_path / "nope", show_progress=False)


def test_single_file_path(folder: Path):
    docs = load_folder(folder / "guide.rst", show_progress=False)
    assert [d.doc_id for d in docs] == ["guide.rst"]
    with pytest.raises(InputError, match="unsupported file type"):
        load_folder(folder / "code.py", show_progress=False)
