"""PDF and Word files: real files built with fpdf2 and python-docx (tests/doc_builders.py), read, chunked and
indexed for real; headings as section paths, tables whole, page numbers in chunk metadata and citations; every
kind of bad file skipped with one line and counted; big files read without loading them whole."""

from __future__ import annotations

import json
import os
import shutil
import tracemalloc
import warnings
from pathlib import Path

import pytest
from dspy.utils import DummyLM
from typer.testing import CliRunner

from rag.ingest.chunking import chunk_document, chunk_documents, page_label
from rag.ingest.corpus import load_folder
from rag.ingest.pdf import read_pdf
from rag.ingest.readers import Unreadable
from rag.ingest.word import read_docx
from tests import doc_builders as build

TABLE_MD = ("| Grade | Days per year | Carry over |\n| --- | --- | --- |\n| A | 20 | 5 |\n| B | 25 | 8 |\n"
            "| C | 30 | 10 |")
HEADINGS = [("1. Leave", 1, 1), ("1.1 Sick leave", 2, 1), ("1.2 Leave allowance", 2, 2), ("2. Travel", 1, 4),
            ("2.1 Hotels", 2, 4), ("2.2 Per diem", 2, 5), ("3. Conduct", 1, 6)]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """The good files, built once: the handbook as PDF (with and without bookmarks) and DOCX, and a long table."""
    folder = tmp_path_factory.mktemp("made")
    build.handbook_pdf(folder / "handbook.pdf")
    build.handbook_pdf(folder / "plain.pdf", outline=False)
    build.handbook_docx(folder / "handbook.docx")
    build.long_table_pdf(folder / "offices.pdf")
    build.rendered_breaks_docx(folder / "rendered.docx")
    return folder


def headings(parsed) -> list[tuple[str, int, int]]:
    return [(b.text, b.level, b.page) for b in parsed.blocks if b.kind == "heading"]


# ------------------------------------------------------------------ readers
@pytest.mark.parametrize("name", ["handbook.pdf", "plain.pdf"])
def test_pdf_headings_from_bookmarks_or_type_size_tables_and_pages(made: Path, name: str):
    parsed = read_pdf(made / name, 10**7)
    assert parsed.title == build.TITLE and parsed.pages == 6
    found = headings(parsed)
    # bookmarks name the sections; without them the larger type does (the title line is one too)
    assert [h for h in found if h[0] != build.TITLE] == HEADINGS
    tables = [b for b in parsed.blocks if b.kind == "table"]
    assert [(t.text, t.page, t.page_end) for t in tables] == [(TABLE_MD, 2, None)]
    by_text = {b.text[:20]: b for b in parsed.blocks if b.kind == "para"}
    assert by_text[build.TRAVEL[:20]].page == 4 and by_text[build.PER_DIEM[:20]].page == 5
    assert by_text[build.TRAVEL[:20]].text == build.TRAVEL  # wrapped lines rejoined into the paragraph
    assert parsed.notes == ["page 3 of 6 has no text layer (scanned?) and is not indexed; OCR the file to index it "
                            "(e.g. ocrmypdf)"]


def test_a_pdf_table_that_runs_onto_the_next_page_is_one_block(made: Path):
    parsed = read_pdf(made / "offices.pdf", 10**7)
    (table,) = [b for b in parsed.blocks if b.kind == "table"]
    rows = table.text.split("\n")
    assert (table.page, table.page_end) == (1, 2)
    assert rows[0] == "| Office | City | Desks |" and rows.count(rows[0]) == 1  # the repeated header is dropped
    assert rows[2:] == [f"| Office {i:02d} | City {i:02d} | {9 + i} |" for i in range(1, 41)]


def test_docx_heading_styles_table_list_and_hard_page_breaks(made: Path):
    parsed = read_docx(made / "handbook.docx", 10**7)
    assert parsed.title == build.TITLE
    assert headings(parsed) == [(build.TITLE, 0, 1), *HEADINGS[:-1]]  # page 3 holds only a picture
    (table,) = [b for b in parsed.blocks if b.kind == "table"]
    assert (table.text, table.page) == (TABLE_MD, 2)
    paras = [b.text for b in parsed.blocks if b.kind == "para"]
    assert "- Submit leave requests" in paras  # a List Bullet paragraph
    # a line that looks like Markdown is text: the structure comes from the file, not from re-parsing its text
    assert "| not a table | just text # with markup-like characters" in paras


def test_docx_pages_from_words_rendered_page_breaks(made: Path):
    parsed = read_docx(made / "rendered.docx", 10**7)
    assert [(b.text[:12], b.page, b.page_end) for b in parsed.blocks] == [
        ("Rendered", 1, None), ("First page t", 1, None), ("Second page ", 2, None), ("A paragraph ", 2, 3)]


def test_docx_without_any_page_break_has_no_page_numbers(tmp_path: Path):
    import docx

    d = docx.Document()
    d.add_heading("Only", 1)
    d.add_paragraph("One page of text.")
    d.save(str(tmp_path / "one.docx"))
    parsed = read_docx(tmp_path / "one.docx", 10**7)
    assert [b.page for b in parsed.blocks] == [None, None]
    chunks = chunk_document(_doc(parsed, "one.docx"), 1200, 150)
    assert "page" not in chunks[0].meta and page_label(chunks[0].meta) == ""


def _doc(parsed, doc_id):
    from rag.ingest.corpus import Document

    return Document(doc_id, "\n\n".join(b.markdown() for b in parsed.blocks), title=parsed.title or doc_id,
                    blocks=parsed.blocks)


# ------------------------------------------------------------------ chunks
@pytest.mark.parametrize("name", ["handbook.pdf", "handbook.docx"])
def test_chunks_have_section_paths_whole_tables_and_pages(made: Path, tmp_path: Path, name: str):
    folder = tmp_path / "docs"
    folder.mkdir()
    shutil.copy(made / name, folder / name)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        docs = load_folder(folder, show_progress=False)
    said = [str(w.message) for w in record if issubclass(w.category, UserWarning)]
    assert said == ([f"{folder / name}: page 3 of 6 has no text layer (scanned?) and is not indexed; OCR the file "
                     "to index it (e.g. ocrmypdf)"] if name.endswith(".pdf") else [])
    chunks = chunk_documents(docs, size=600, overlap=80)
    assert [c.id for c in chunks] == [f"{name}#{i:03d}" for i in range(len(chunks))]
    assert all(len(c.text) <= 600 for c in chunks)

    def one(word: str):
        (hit,) = [c for c in chunks if word in c.text]
        return hit

    table = one("| Grade |")
    assert TABLE_MD in table.text  # whole, in one chunk
    assert table.title == f"{build.TITLE} > 1. Leave > 1.2 Leave allowance" and table.meta["page"] == 2
    hotels = one("Boston")
    # the chunk holds the chapter heading too, so its path is the two headings' common part
    assert hotels.title == f"{build.TITLE} > 2. Travel" and hotels.text.startswith("# 2. Travel\n\n## 2.1 Hotels\n\n")
    assert (hotels.meta["page"], page_label(hotels.meta)) == (4, "p. 4") and "page_end" not in hotels.meta
    sick = one("doctor's note")
    assert sick.title == f"{build.TITLE} > 1. Leave > 1.1 Sick leave" and sick.meta["page"] == 1
    assert not any("Boston" in c.text and "doctor's note" in c.text for c in chunks)
    # a chunk never mixes chapters: it closes at a heading once it holds a quarter of its size
    for c in chunks:
        assert not ("# 1. Leave" in c.text and "# 2. Travel" in c.text)
    if name.endswith(".pdf"):  # the long section on page 6 is cut between its paragraphs, all on page 6
        conduct = [c for c in chunks if c.title == f"{build.TITLE} > 3. Conduct"]
        assert len(conduct) >= 3 and {c.meta["page"] for c in conduct} == {6}
        assert all(c.text.rstrip().endswith(".") for c in conduct)
    for c in chunks:
        assert c.meta["doc_id"] == name and c.source.endswith(name)


def test_a_chunk_that_ends_on_the_next_chapters_heading_is_cited_by_its_text(made: Path, tmp_path: Path):
    shutil.copy(made / "handbook.pdf", tmp_path / "handbook.pdf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        docs = load_folder(tmp_path, show_progress=False)
    # at the default size the allowance section is too short to stand alone, so the next chapter's heading
    # (page 4) joins it; its text is all on page 2
    (table,) = [c for c in chunk_documents(docs, 1200, 150) if "| Grade |" in c.text]
    assert table.text.rstrip().endswith("# 2. Travel") and page_label(table.meta) == "p. 2"


def test_a_chunk_over_two_pages_cites_both(made: Path, tmp_path: Path):
    shutil.copy(made / "offices.pdf", tmp_path / "offices.pdf")
    docs = load_folder(tmp_path, show_progress=False)
    chunks = chunk_documents(docs, size=3000, overlap=0)
    (table,) = [c for c in chunks if "| Office 40 |" in c.text]
    assert (table.meta["page"], table.meta["page_end"], page_label(table.meta)) == (1, 2, "pp. 1-2")
    assert table.text.count("| Office |") == 1 and table.title == "offices > Office locations"


# ------------------------------------------------------------------ bad files
BAD = {
    "encrypted.pdf": (build.encrypted_pdf, "encrypted", "needs a password"),
    "corrupt.pdf": (lambda p: p.write_bytes(b"%PDF-1.7\n1 0 obj <</Type /Catalog" + b"\x00garbage" * 50), "corrupt",
                    "cannot be parsed as a PDF"),
    "truncated.pdf": (None, "corrupt", "cannot be parsed as a PDF"),
    "empty.pdf": (lambda p: p.write_bytes(b""), "empty", "empty file"),
    "blank.pdf": (build.blank_pdf, "empty", "no text in its 2 page(s)"),
    "scanned.pdf": (build.image_only_pdf, "image-only", "no text layer"),
    "encrypted.docx": (build.encrypted_docx, "encrypted", "needs a password"),
    "corrupt.docx": (lambda p: p.write_bytes(b"PK\x03\x04" + os.urandom(400)), "corrupt", "not a .docx"),
    "truncated.docx": (None, "corrupt", "not a .docx"),
    "empty.docx": (build.empty_docx, "empty", "no text"),
    "scanned.docx": (build.image_only_docx, "image-only", "only images"),
}


def make_bad(name: str, folder: Path, made: Path) -> Path:
    path = folder / name
    maker = BAD[name][0]
    if maker is None:  # the first half of a real file, as an interrupted download leaves it
        whole = (made / ("handbook" + path.suffix)).read_bytes()
        path.write_bytes(whole[: len(whole) // 2])
    else:
        maker(path)
    return path


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_kind_of_bad_file_is_skipped_with_one_line_and_counted(made: Path, tmp_path: Path, name: str):
    make_bad(name, tmp_path, made)
    (tmp_path / "good.md").write_text("# Good\n\nA readable note.\n", encoding="utf-8")
    _, reason, says = BAD[name]
    with pytest.warns(UserWarning) as record:
        docs = load_folder(tmp_path, show_progress=False)
    messages = [str(w.message) for w in record]
    assert messages == [m for m in messages if name in m] and len(messages) == 1  # one warning, naming the file
    assert messages[0].startswith(f"skipping {tmp_path / name}: ") and says in messages[0] and "\n" not in messages[0]
    assert [d.doc_id for d in docs] == ["good.md"]
    assert dict(docs.skipped) == {reason: 1} and docs.skipped_summary() == f"skipped 1 file: 1 {reason}"


def test_a_parser_crash_skips_only_that_file(made: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import rag.ingest.word

    shutil.copy(made / "handbook.docx", tmp_path / "a.docx")
    shutil.copy(made / "handbook.docx", tmp_path / "b.docx")
    real = rag.ingest.word.read_docx

    def flaky(path, max_chars):
        if Path(path).name == "a.docx":
            raise RecursionError("maximum recursion depth exceeded")
        return real(path, max_chars)

    monkeypatch.setattr(rag.ingest.word, "read_docx", flaky)
    with pytest.warns(UserWarning, match=r"a\.docx: cannot be parsed \(RecursionError"):
        docs = load_folder(tmp_path, show_progress=False)
    assert [d.doc_id for d in docs] == ["b.docx"] and dict(docs.skipped) == {"corrupt": 1}


def test_a_damaged_page_loses_only_that_page(made: Path, monkeypatch: pytest.MonkeyPatch):
    import rag.ingest.pdf

    real = rag.ingest.pdf._page_items

    def damaged(page):
        if page.page_number == 2:
            raise ValueError("bad content stream")
        return real(page)

    monkeypatch.setattr(rag.ingest.pdf, "_page_items", damaged)
    parsed = read_pdf(made / "handbook.pdf", 10**7)
    assert "page 2 of 6 could not be read and is not indexed" in parsed.notes
    assert not any(b.kind == "table" for b in parsed.blocks) and any("Boston" in b.text for b in parsed.blocks)


def test_text_over_max_file_mb_is_skipped(made: Path):
    with pytest.raises(Unreadable, match="max_file_mb") as info:
        read_pdf(made / "handbook.pdf", 1000)
    assert info.value.reason.startswith("over max_file_mb")
    with pytest.raises(Unreadable, match="max_file_mb"):
        read_docx(made / "handbook.docx", 1000)


def test_office_lock_files_are_not_documents(made: Path, tmp_path: Path):
    shutil.copy(made / "handbook.docx", tmp_path / "handbook.docx")
    (tmp_path / "~$handbook.docx").write_bytes(b"\x0bowner name" + b"\x00" * 150)  # what Word leaves while editing
    docs = load_folder(tmp_path, show_progress=False)
    assert [d.doc_id for d in docs] == ["handbook.docx"] and not docs.skipped


# ------------------------------------------------------------------ big files
def _peak(fn, *args) -> int:
    fn(*args)  # imports and first-use caches are not what is measured
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_big_pdf_is_read_page_by_page(tmp_path: Path):
    path = build.text_pdf(tmp_path / "big.pdf", 20, image_mb=1.0)  # 20 pages, each with 1 MB of picture
    size = path.stat().st_size
    assert size > 18e6
    parsed = read_pdf(path, 10**7)
    assert [b.page for b in parsed.blocks] == list(range(1, 21)) and "word0020" in parsed.blocks[-1].text
    assert _peak(read_pdf, path, 10**7) < size / 4  # never the whole file, nor all of its pages


def test_a_big_docx_is_streamed_not_loaded_whole(made: Path, tmp_path: Path):
    import docx

    path = build.docx_with_big_media(tmp_path / "photos.docx", 24)
    parsed = read_docx(path, 10**7)
    assert any("Boston" in b.text for b in parsed.blocks)
    assert _peak(read_docx, path, 10**7) < 3e6
    assert _peak(docx.Document, str(path)) > 24e6  # what python-docx's Document() would have held


# ------------------------------------------------------------------ rag index / search / ask, for real
@pytest.fixture(scope="module")
def indexed(made: Path, tmp_path_factory):
    """`rag index` over the handbook as PDF and DOCX, a Markdown note, a Word lock file and every kind of bad
    file; returns (folder, index folder, the result, the warning lines as the CLI prints them on stderr)."""
    from rag.cli import app

    root = tmp_path_factory.mktemp("e2e")
    folder = root / "policies"
    (folder / "bad").mkdir(parents=True)
    shutil.copy(made / "handbook.pdf", folder / "handbook.pdf")
    shutil.copy(made / "handbook.docx", folder / "handbook.docx")
    (folder / "~$ndbook.docx").write_bytes(b"\x0bowner name" + b"\x00" * 150)
    (folder / "notes.md").write_text("# Notes\n\nThe canteen opens at eight.\n", encoding="utf-8")
    for name in BAD:
        make_bad(name, folder / "bad", made)
    idx = root / "idx"
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings(record=True) as record:
        mp.setenv("SIEVE_HOME", str(root / "home"))
        warnings.simplefilter("always")
        result = CliRunner().invoke(app, ["index", str(folder), "--index-dir", str(idx), "-q", "--chunk-size", "500",
                                          "--chunk-overlap", "60"])
        # the CLI prints each warning with its own format (rag.cli.common.clean_warnings)
        said = "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in record
                       if issubclass(w.category, UserWarning) and str(folder) in str(w.message))
    return folder, idx, result, said.splitlines()


def test_rag_index_reads_pdf_and_docx_and_counts_what_it_skipped(indexed):
    folder, idx, result, lines = indexed
    assert result.exit_code == 0, result.output
    kinds = sorted(BAD[n][1] for n in BAD)
    counts = {k: kinds.count(k) for k in kinds}
    (last,) = result.stdout.splitlines()
    assert last.startswith("Indexed ") and f"; skipped {len(BAD)} files: " in last
    for kind, n in counts.items():
        assert f"{n} {kind}" in last
    for name in BAD:  # exactly one line per bad file, saying why
        (line,) = [ln for ln in lines if f"bad/{name}" in ln]
        assert line.startswith(f"Warning: skipping {folder / 'bad' / name}: ") and BAD[name][2] in line
    (scan,) = [ln for ln in lines if "handbook.pdf" in ln]
    assert "page 3 of 6 has no text layer" in scan
    assert len(lines) == len(BAD) + 1  # nothing else: no word about the lock file
    assert result.stderr == ""  # -q, and no parser's log lines
    chunks = [json.loads(x) for x in (idx / "chunks.jsonl").read_text().splitlines()]
    docs = {c["meta"]["doc_id"] for c in chunks}
    assert docs == {"handbook.pdf", "handbook.docx", "notes.md"}
    assert all(isinstance(c["meta"].get("page"), int) for c in chunks if c["meta"]["doc_id"] != "notes.md")
    assert not any("page" in c["meta"] for c in chunks if c["meta"]["doc_id"] == "notes.md")


def test_rag_search_shows_the_page(indexed):
    from rag.cli import app

    _, idx, built, _ = indexed
    assert built.exit_code == 0, built.output
    result = CliRunner().invoke(app, ["search", "hotel cap per night in Boston", "--index-dir", str(idx), "--k", "2",
                                      "--json"])
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)
    # the PDF and the Word file say the same: the passage is shown once, and names its twin in the other file
    first = hits[0]
    assert "Boston" in first["text"] and first["meta"]["page"] == 4 and len(first["duplicates"]) == 1
    assert first["meta"]["doc_id"] in ("handbook.pdf", "handbook.docx") and "Boston" not in hits[1]["text"]
    twin = next(json.loads(ln) for ln in (idx / "chunks.jsonl").read_text().splitlines()
                if json.loads(ln)["id"] == first["duplicates"][0])
    assert {first["meta"]["doc_id"], twin["meta"]["doc_id"]} == {"handbook.pdf", "handbook.docx"}
    both = CliRunner().invoke(app, ["search", "hotel cap per night in Boston", "--index-dir", str(idx), "--k", "2",
                                    "--json"], env={"SIEVE_DEDUPE": "false"})
    hits = json.loads(both.stdout)
    assert {h["meta"]["doc_id"] for h in hits} == {"handbook.pdf", "handbook.docx"}
    assert all("Boston" in h["text"] and h["meta"]["page"] == 4 for h in hits)
    result = CliRunner().invoke(app, ["search", "hotel cap per night in Boston", "--index-dir", str(idx), "--k", "1"])
    assert f"    {build.TITLE} > 2. Travel, p. 4\n" in result.stdout


def test_rag_ask_cites_the_page_in_sources_and_trace(indexed, monkeypatch: pytest.MonkeyPatch):
    import rag.lm.configure
    from rag.cli import app
    from rag.index.store import Index
    from rag.lm.adapter import SieveAdapter
    from rag.retrieval.retriever import Retriever

    _, idx, built, _ = indexed
    assert built.exit_code == 0, built.output
    question = "How much may a hotel in Boston cost per night?"
    hits = Retriever(Index.load(idx), mode="hybrid", top_k=4).search(question)
    cited = next(h for h in hits if h.meta["doc_id"].startswith("handbook.") and "Boston" in h.text)

    def scripted(settings):  # the grader accepts the handbook's passage (PDF or Word: the same words), the answerer cites it
        lm = DummyLM([{"reason": "it states the cap", "relevant": True, "relevant_chunk_ids": [cited.chunk_id],
                       "subject": "Boston hotels"},
                      {"answer": f"375 dollars per night [{cited.chunk_id}].", "cited_ids": [cited.chunk_id]}],
                     adapter=SieveAdapter())
        return {role: lm for role in ("grader", "rewriter", "answerer", "judge")}

    monkeypatch.setattr(rag.lm.configure, "lms_for_roles", scripted)
    result = CliRunner().invoke(app, ["ask", question, "--index-dir", str(idx), "--no-artifact", "--no-cache",
                                      "--trace", "--set", "top_k=4"])
    assert result.exit_code == 0, result.output
    assert f"[1] {build.TITLE} > 2. Travel, p. 4 ({cited.chunk_id})" in result.stdout
    assert f"cited=['{cited.chunk_id} (p. 4)']" in result.stderr
    (retrieve,) = [ln for ln in result.stderr.splitlines() if ln.startswith("1. retrieve")]
    assert f"{cited.chunk_id} (p. 4)" in retrieve  # in the retrieve step too

    result = CliRunner().invoke(app, ["ask", question, "--index-dir", str(idx), "--no-artifact", "--no-cache", "--json",
                                      "--set", "top_k=4"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["sources"][0]["page"] == 4 and "page_end" not in data["sources"][0]
