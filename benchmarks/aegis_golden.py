"""Convert the Aegis policy questions into Sieve's golden JSONL (for ``rag eval`` on a second corpus).

Source: ``../shared/benchmarks/aegis/questions/*.json`` (see its README). Mapping:

- ``ground_truth.json`` (27 single-fact questions): ``S01``..``S27``, type ``answerable``; they carry no
  needles, so they have no gold chunks: retrieval and grader metrics skip them, answer metrics use them.
- ``ground_truth_hard.json`` (12) and ``ground_truth_heldout.json`` (4): ids kept (``X1``, ``P1``, ``U1``,
  ``H1``...). ``needles`` become ``evidence`` (a chunk containing one is gold); ``Paraphrase`` questions are
  type ``vague`` (worded unlike the documents); ``Unanswerable`` ones (no needles) are ``unanswerable`` with
  ``should_refuse: true``; the rest ``answerable``.
- As in the original measurement, the needle "three (3) business days" (which also occurs in an unrelated
  chunk) is replaced by "return all corporate hardware"; ``--keep-original-needles`` turns that off.
- Every item gets ``split`` (default ``test``); ``meta`` keeps the source fields (category, source docs).

The output goes to ``--out`` (default ``SIEVE_HOME/aegis/golden.jsonl``), never into the repository.

Run the agent on it::

    python benchmarks/aegis_golden.py                                  # writes SIEVE_HOME/aegis/golden.jsonl
    rag index "../shared/benchmarks/aegis/docs" --index-dir ~/.cache/sieve/aegis/index
    rag eval --config full --split test --golden ~/.cache/sieve/aegis/golden.jsonl \\
             --index-dir ~/.cache/sieve/aegis/index --out ~/.cache/sieve/runs/aegis-full
    rag report ~/.cache/sieve/runs/aegis-full

(``~/.cache/sieve`` is the default SIEVE_HOME on Linux; ``rag eval`` keeps each run under
``SIEVE_HOME/runs/<config>-<golden hash>/`` unless ``--out`` is given.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
AEGIS = REPO.parent / "shared" / "benchmarks" / "aegis"
REPLACED_NEEDLES = {"three (3) business days": "return all corporate hardware"}
TYPES = {"Paraphrase": "vague", "Unanswerable": "unanswerable"}


def convert(aegis_dir: Path, *, split: str = "test", original_needles: bool = False) -> list[dict[str, Any]]:
    """The golden items, in file order: single-fact, hard, held-out."""
    qdir = aegis_dir / "questions"
    if not qdir.is_dir():
        raise SystemExit(f"error: {qdir} not found; pass --aegis DIR (the folder holding docs/ and questions/)")
    items: list[dict[str, Any]] = []
    for n, row in enumerate(_read(qdir / "ground_truth.json"), 1):
        items.append(_item(f"S{n:02d}", "answerable", row["question"], row["ground_truth"], [], split,
                           {"category": row.get("category"), "source_doc": row.get("source_doc"),
                            "file": "ground_truth.json"}))
    for name in ("ground_truth_hard.json", "ground_truth_heldout.json"):
        for row in _read(qdir / name):
            typ = TYPES.get(row["category"], "answerable")
            needles = list(row.get("needles") or [])
            if not original_needles:
                needles = [REPLACED_NEEDLES.get(x, x) for x in needles]
            if typ != "unanswerable" and not needles:
                raise SystemExit(f"error: {qdir / name}: item {row['id']} is answerable but has no needles")
            items.append(_item(row["id"], typ, row["question"], row["ground_truth"], needles, split,
                               {"category": row["category"], "source_docs": row.get("source_docs"),
                                "original_needles": row.get("needles"), "file": name}))
    return items


def _item(iid, typ, question, reference, evidence, split, meta) -> dict[str, Any]:
    return {"id": iid, "type": typ, "question": question, "reference_answer": reference,
            "should_refuse": typ == "unanswerable", "relevant_chunk_ids": [], "evidence": evidence,
            "split": split, "meta": meta}


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"error: cannot read {path}: {exc}") from None


def missing_evidence(items: list[dict[str, Any]], docs_dir: Path) -> list[tuple[str, str]]:
    """(item id, needle) for every needle that occurs verbatim in no document (should be empty)."""
    texts = [" ".join(p.read_text(encoding="utf-8").split()) for p in sorted(docs_dir.rglob("*.md"))]
    return [(it["id"], e) for it in items for e in it["evidence"] if not any(" ".join(e.split()) in t for t in texts)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aegis", type=Path, default=AEGIS, help=f"the Aegis folder (default {AEGIS})")
    parser.add_argument("--out", type=Path, default=None, help="output JSONL (default SIEVE_HOME/aegis/golden.jsonl)")
    parser.add_argument("--split", default="test", choices=("train", "dev", "test"))
    parser.add_argument("--keep-original-needles", action="store_true",
                        help='keep "three (3) business days" instead of the original measurement\'s replacement')
    args = parser.parse_args(argv)
    if args.out is None:
        sys.path.insert(0, str(REPO))
        from rag.paths import sieve_home

        args.out = sieve_home() / "aegis" / "golden.jsonl"
    out = args.out.expanduser().resolve()
    if out.is_relative_to(REPO):
        raise SystemExit(f"error: {out} is inside the repository; the Aegis data must stay outside it (use --out)")
    items = convert(args.aegis, split=args.split, original_needles=args.keep_original_needles)
    for iid, needle in missing_evidence(items, args.aegis / "docs"):
        print(f"warning: {iid}: needle {needle!r} occurs in no document", file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items), encoding="utf-8")
    os.replace(tmp, out)
    counts = {t: sum(it["type"] == t for it in items) for t in ("answerable", "vague", "unanswerable")}
    print(f"wrote {len(items)} items to {out}: " + ", ".join(f"{v} {k}" for k, v in counts.items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
