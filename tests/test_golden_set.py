"""Checks on the hand-written golden set ``golden/python_ref.jsonl``.

Reads the file with :mod:`json` and the corpus with :mod:`pydoc_data.topics` directly (no ``rag.*``
imports), so the golden set can be validated on its own. Each check names the file line and field
that fails. See ``golden/README.md`` for the schema and for how the set was written.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from itertools import combinations
from pathlib import Path
from pydoc_data.topics import topics

import pytest

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "python_ref.jsonl"

TYPES = ("answerable", "vague", "unanswerable")
SPLITS = ("train", "dev", "test")
TARGET_SPLIT = {"train": 0.40, "dev": 0.20, "test": 0.40}
SPLIT_TOLERANCE = 0.08          # +-8 percentage points per type
MIN_COUNTS = {"answerable": 58, "vague": 17, "unanswerable": 30}
MIN_TOTAL = 105
EVIDENCE_WORDS = (5, 15)        # evidence strings stay short ...
EVIDENCE_MAX_TOPICS = 4         # ... and distinctive (found in at most this many topics)
NEAR_DUP_JACCARD = 0.8          # token-set Jaccard at or above this is a near-duplicate
REQUIRED = {
    "id": str, "type": str, "question": str, "reference_answer": str, "should_refuse": bool,
    "evidence": list, "relevant_topics": list, "split": str,
}
ID_RE = re.compile(r"^pyref-[avu]-\d{3}$")
VERSION_HINT = f"(corpus = pydoc_data of Python {sys.version.split()[0]}; the set was written against 3.11.7)"


def collapse(text: str) -> str:
    """Collapse runs of whitespace to one space (the comparison used for evidence strings)."""
    return re.sub(r"\s+", " ", text).strip()


def tokens(question: str) -> frozenset[str]:
    """Normalised token set of a question: lower-cased runs of letters, digits and underscores."""
    return frozenset(re.findall(r"[a-z0-9_]+", question.lower()))


def jaccard(a: str, b: str) -> float:
    """Token-set Jaccard similarity of two questions (1.0 = same words, order ignored)."""
    ta, tb = tokens(a), tokens(b)
    return len(ta & tb) / len(ta | tb) if ta | tb else 1.0


TOPICS = {name: collapse(text) for name, text in topics.items()}
CORPUS_LOWER = " ".join(TOPICS.values()).lower()


def load_rows() -> list[tuple[int, dict]]:
    rows = []
    with GOLDEN.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rows.append((lineno, json.loads(line)))
            except json.JSONDecodeError as exc:
                pytest.fail(f"{GOLDEN.name}:{lineno}: invalid JSON ({exc}); fix the line")
    return rows


ROWS = load_rows()
ITEMS = [row for _, row in ROWS]


def where(lineno: int, field: str) -> str:
    return f"{GOLDEN.name}:{lineno} field '{field}'"


def test_schema_every_line():
    problems = []
    for lineno, row in ROWS:
        for field, kind in REQUIRED.items():
            if not isinstance(row.get(field), kind):
                problems.append(f"{where(lineno, field)}: expected {kind.__name__}, got {row.get(field)!r}")
        if problems:
            continue
        if not ID_RE.match(row["id"]) or row["id"][6] != row["type"][0]:
            problems.append(f"{where(lineno, 'id')}: {row['id']!r} must be pyref-<a|v|u>-NNN matching its type")
        if row["type"] not in TYPES:
            problems.append(f"{where(lineno, 'type')}: {row['type']!r} not in {TYPES}")
        if row["split"] not in SPLITS:
            problems.append(f"{where(lineno, 'split')}: {row['split']!r} not in {SPLITS}")
        if row["should_refuse"] != (row["type"] == "unanswerable"):
            problems.append(f"{where(lineno, 'should_refuse')}: must be true exactly for unanswerable items")
        if not row["question"].strip() or not row["reference_answer"].strip():
            problems.append(f"{where(lineno, 'question')}: question and reference_answer must be non-empty")
        if row["type"] == "unanswerable":
            if row["evidence"] or row["relevant_topics"]:
                problems.append(f"{where(lineno, 'evidence')}: unanswerable items carry no evidence/topics")
            terms = row.get("absent_terms")
            if not isinstance(terms, list) or not terms or not all(isinstance(t, str) and t for t in terms):
                problems.append(f"{where(lineno, 'absent_terms')}: unanswerable items need >= 1 absent term")
        else:
            if not row["evidence"] or not all(isinstance(e, str) and e.strip() for e in row["evidence"]):
                problems.append(f"{where(lineno, 'evidence')}: answerable/vague items need >= 1 evidence string")
            unknown = [t for t in row["relevant_topics"] if t not in TOPICS]
            if not row["relevant_topics"] or unknown:
                problems.append(f"{where(lineno, 'relevant_topics')}: empty or unknown topics {unknown}")
    ids = Counter(row.get("id") for row in ITEMS)
    problems += [f"id {i!r} appears {n} times" for i, n in ids.items() if n > 1]
    assert not problems, "\n".join(problems)


def test_counts_meet_minimums():
    counts = Counter(row["type"] for row in ITEMS)
    assert len(ITEMS) >= MIN_TOTAL, f"{len(ITEMS)} items < {MIN_TOTAL}"
    for kind, minimum in MIN_COUNTS.items():
        assert counts[kind] >= minimum, f"{counts[kind]} {kind} items < {minimum}"


def test_evidence_is_verbatim_short_and_in_relevant_topics():
    problems = []
    for lineno, row in ROWS:
        covered = set()
        for ev in row["evidence"]:
            ev_c = collapse(ev)
            holders = {name for name, text in TOPICS.items() if ev_c in text}
            n_words = len(ev_c.split())
            if not holders:
                problems.append(f"{where(lineno, 'evidence')}: {ev!r} not found in the corpus {VERSION_HINT}")
                continue
            if not set(row["relevant_topics"]) & holders:
                problems.append(f"{where(lineno, 'relevant_topics')}: none of them contains {ev!r} (found in {sorted(holders)})")
            if not EVIDENCE_WORDS[0] <= n_words <= EVIDENCE_WORDS[1]:
                problems.append(f"{where(lineno, 'evidence')}: {ev!r} has {n_words} words, keep {EVIDENCE_WORDS}")
            if len(holders) > EVIDENCE_MAX_TOPICS:
                problems.append(f"{where(lineno, 'evidence')}: {ev!r} occurs in {len(holders)} topics; pick a more distinctive string")
            covered |= holders
        missing = covered - set(row["relevant_topics"])
        extra = set(row["relevant_topics"]) - covered
        if row["evidence"] and (missing or extra):
            problems.append(f"{where(lineno, 'relevant_topics')}: should be exactly the topics holding the evidence; "
                            f"add {sorted(missing)}, remove {sorted(extra)}")
    assert not problems, "\n".join(problems)


def test_split_proportions_stratified_by_type():
    for kind in TYPES:
        splits = Counter(row["split"] for row in ITEMS if row["type"] == kind)
        total = sum(splits.values())
        for split, target in TARGET_SPLIT.items():
            share = splits[split] / total
            assert abs(share - target) <= SPLIT_TOLERANCE, (
                f"{kind}: {split} share {share:.0%} is off the {target:.0%} target by more than "
                f"{SPLIT_TOLERANCE:.0%} ({dict(splits)})")


def test_jaccard_measure_on_hand_computed_cases():
    assert jaccard("How do I X?", "how do i x") == 1.0
    assert jaccard("a b c d", "a b c e") == pytest.approx(3 / 5)
    assert jaccard("What does pass do?", "What does pass do when executed?") == pytest.approx(4 / 6)


def test_no_duplicate_or_near_duplicate_questions():
    flagged = []
    for (la, a), (lb, b) in combinations(ROWS, 2):
        sim = jaccard(a["question"], b["question"])
        if collapse(a["question"].lower()) == collapse(b["question"].lower()) or (
                a["split"] != b["split"] and sim >= NEAR_DUP_JACCARD):
            flagged.append(f"lines {la} ({a['split']}) and {lb} ({b['split']}): Jaccard {sim:.2f}: "
                           f"{a['question']!r} ~ {b['question']!r}")
    assert not flagged, "\n".join(flagged)


def test_unanswerable_absent_terms_do_not_occur_in_corpus():
    present = []
    for lineno, row in ROWS:
        for term in row.get("absent_terms", []):
            if collapse(term).lower() in CORPUS_LOWER:
                hits = [name for name, text in TOPICS.items() if collapse(term).lower() in text.lower()]
                present.append(f"{where(lineno, 'absent_terms')}: {term!r} occurs in topics {hits} {VERSION_HINT}")
    assert not present, "\n".join(present)


def test_readme_counts_table_matches_stats_script():
    """golden/README.md carries the table printed by benchmarks/golden_stats.py for this file."""
    import importlib.util

    root = GOLDEN.parents[1]
    spec = importlib.util.spec_from_file_location("golden_stats", root / "benchmarks" / "golden_stats.py")
    stats = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stats)
    readme = (root / "golden" / "README.md").read_text(encoding="utf-8")
    block = readme.split("<!-- golden-stats:start -->")[1].split("<!-- golden-stats:end -->")[0].strip()
    assert block == stats.table(ITEMS), "golden/README.md counts are stale: paste `python benchmarks/golden_stats.py` output"
