"""Structure-aware chunking and pre-chunked JSONL loading."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rag.errors import ConfigError, InputError
from rag.ingest.chunking import Chunk, chunk_document, chunk_documents, load_chunks_jsonl
from rag.ingest.corpus import Document, load_builtin_topics

POLICY = """# Travel Policy

Intro paragraph about travel.

## 1. Air Travel

Economy class is the default for flights under six hours. Business class needs VP approval.

### 1.1 Fares

| Route | Max fare |
| :--- | ---: |
| Domestic | $600 |
| International | $2,400 |

## 2. Lodging

```yaml
hotel:
  max_rate: 375

  tier: premium
```

Hotels must be booked through the portal.
"""


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text)


def test_markdown_heading_paths_ids_and_whole_blocks():
    doc = Document("travel/travel policy.md", POLICY, title="Travel Policy")
    chunks = chunk_document(doc, size=200, overlap=30)
    assert [c.id for c in chunks] == [f"travel/travel policy.md#{i:03d}" for i in range(len(chunks))]
    assert all(len(c.text) <= 200 for c in chunks)
    by_title = {c.title: c for c in chunks}
    assert "Travel Policy > 1. Air Travel > 1.1 Fares" in by_title
    table = by_title["Travel Policy > 1. Air Travel > 1.1 Fares"].text
    assert "| Domestic | $600 |\n| International | $2,400 |" in table  # the table stayed whole
    lodging = [c for c in chunks if "2. Lodging" in c.title]
    assert any("max_rate: 375\n\n  tier: premium\n```" in c.text for c in lodging)  # fenced code with a blank line, whole
    assert all(c.meta["doc_id"] == "travel/travel policy.md" for c in chunks)
    # nothing is lost: every word of the document appears in some chunk, in order
    assert set(words(POLICY)) <= set(words(" ".join(c.text for c in chunks)))


def test_small_sections_merge_and_title_is_common_heading_path():
    chunks = chunk_document(Document("p.md", POLICY, title="Travel Policy"), size=1200, overlap=150)
    assert len(chunks) == 1
    assert chunks[0].title == "Travel Policy"
    assert chunks[0].text.startswith("# Travel Policy") and chunks[0].text.rstrip().endswith("portal.")


def test_long_section_is_split_with_overlap_but_not_across_headings():
    sentences = " ".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(60))
    text = f"# Doc\n\n## Part A\n\n{sentences}\n\n## Part B\n\nShort closing text about part B that is long enough."
    chunks = chunk_document(Document("d.md", text, title="Doc"), size=300, overlap=60)
    part_a = [c for c in chunks if "Part B" not in c.title]
    assert part_a[0].title == "Doc" and part_a[0].text.startswith("# Doc\n\n## Part A\n\nSentence number 0 talks")
    assert all(c.title == "Doc > Part A" for c in part_a[1:]) and len(part_a) >= 5 and all(len(c.text) <= 300 for c in chunks)
    for prev, cur in zip(part_a, part_a[1:]):
        tail = prev.text[-60:]
        shared = cur.text[: len(tail)]
        assert shared.split()[0] in tail  # the next chunk starts with words from the previous tail
    part_b = [c for c in chunks if c.title == "Doc > Part B"]
    assert len(part_b) == 1 and part_b[0].text.startswith("## Part B")  # no overlap carried over a heading
    assert all(f"Sentence number {i} " in " ".join(c.text for c in part_a) for i in range(60))


def test_oversized_table_and_code_are_split_at_lines_table_header_repeated():
    rows = "\n".join(f"| item {i} | value {i} |" for i in range(40))
    code = "\n".join(f"    line_{i} = compute({i})" for i in range(40))
    text = f"# T\n\n| Name | Value |\n| --- | --- |\n{rows}\n\n```python\n{code}\n```\n"
    chunks = chunk_document(Document("t.md", text, title="T"), size=300, overlap=0)
    table_chunks = [c for c in chunks if "| item" in c.text]
    assert len(table_chunks) > 1
    assert table_chunks[0].text.startswith("# T\n\n| Name | Value |\n| --- | --- |")
    assert all(c.text.startswith("| Name | Value |\n| --- | --- |") for c in table_chunks[1:])
    assert all(len(c.text) <= 300 for c in chunks)
    for c in chunks:  # code lines are never cut in the middle
        for line in c.text.splitlines():
            if "line_" in line:
                assert re.fullmatch(r"\s*line_\d+ = compute\(\d+\)", line)


def test_restructuredtext_headings_from_builtin_topics():
    docs = load_builtin_topics(["try"])
    chunks = chunk_documents(docs)
    titles = {c.title for c in chunks}
    assert any(t.endswith('> "except" clause') for t in titles), titles
    assert all(c.id.startswith("try#") for c in chunks)
    assert all(len(c.text) <= 1200 for c in chunks)


def test_rst_overline_and_underline_levels():
    text = "=====\nGuide\n=====\n\nIntro.\n\nSetup\n-----\n\nStep one.\n\nDetails\n~~~~~~~\n\nMore."
    chunks = chunk_document(Document("g.rst", text, title="Guide"), size=20, overlap=0)
    assert [c.title for c in chunks][-1] == "Guide > Setup > Details"


def test_bad_chunk_settings():
    with pytest.raises(ConfigError):
        chunk_document(Document("x", "text"), size=100, overlap=100)


def test_very_long_word_is_hard_split():
    text = "x" * 5000
    chunks = chunk_document(Document("w.txt", text, title="w"), size=1000, overlap=100)
    assert all(len(c.text) <= 1000 for c in chunks) and "".join(c.text for c in chunks).count("x") >= 5000


# ------------------------------------------------------------------ pre-chunked JSONL


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_jsonl_ids_verbatim_and_metadata(tmp_path: Path):
    f = write(tmp_path / "c.jsonl", [
        json.dumps({"id": "build/bake#009", "text": "Bake overrides", "title": "Bake", "url": "https://x/y", "section": "Vars"}),
        "",
        json.dumps({"id": "  weird id ", "text": "second", "doc_id": "d2"}),
    ])
    chunks = load_chunks_jsonl(f)
    assert [c.id for c in chunks] == ["build/bake#009", "  weird id "]
    assert chunks[0] == Chunk("build/bake#009", "Bake overrides", "Bake", "", "https://x/y", {"section": "Vars"})
    assert chunks[1].source == "d2" and chunks[1].meta == {"doc_id": "d2"}


@pytest.mark.parametrize(("lines", "pattern"), [
    (['{"id": "a", "text": "x"}', '{"text": "no id"}'], r"c\.jsonl:2: missing required field 'id'"),
    (['{"id": "a"}'], r"c\.jsonl:1: missing required field 'text'"),
    (['{"id": "a", "text": ""}'], r"c\.jsonl:1: field 'text' must be a non-empty string"),
    (['{"id": 7, "text": "x"}'], r"c\.jsonl:1: field 'id' must be a non-empty string"),
    (['{"id": "a", "text": "x"}', '{"id": "a", "text": "y"}'], r"c\.jsonl:2: duplicate id 'a' \(first on line 1\)"),
    (['{"id": "a", "text": "x"', ], r"c\.jsonl:1: invalid JSON"),
    (['["a", "b"]'], r"c\.jsonl:1: expected a JSON object"),
    (['{"id": "a", "text": "x", "title": 3}'], r"c\.jsonl:1: field 'title' must be a string"),
    ([""], r"no records"),
])
def test_jsonl_bad_input(tmp_path: Path, lines: list[str], pattern: str):
    with pytest.raises(InputError, match=pattern):
        load_chunks_jsonl(write(tmp_path / "c.jsonl", lines))


def test_jsonl_missing_file(tmp_path: Path):
    with pytest.raises(InputError, match="no such file"):
        load_chunks_jsonl(tmp_path / "none.jsonl")
