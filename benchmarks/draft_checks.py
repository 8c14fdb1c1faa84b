"""What the drafter's mechanical checks (rag.curate.seedcheck) remove from drafted sets a human reviewed.

    python benchmarks/draft_checks.py --set benchmarks/results/drafted_builtin_60.jsonl=BUILTIN_INDEX \
        --set benchmarks/results/drafted_aegis_60.jsonl=AEGIS_INDEX --out benchmarks/results/draft_checks.md

Replays the checks on items drafted before they existed, with no model call: the seed passage is a contents page
(``lists_headings``: such passages are no longer sampled), the question and reference answer hold letters of a
script the passage shown to the drafter has none of (``foreign_scripts``), or the question points at "the passage"
(``names_its_passage``); such drafts are now drafted again from the next passage. And an unanswerable draft
every term of which the corpus now holds (``absent_terms``, which since matches a word's root and a hyphenated word
as written: "allowed" is in a corpus that says "allowance") is drafted again as well. Per set: how many of the items a human kept and rejected each check flags, and the share
kept before and after removing the flagged items. A check that flags kept items costs good items; one that flags
only rejected ones raises the kept share without a model. Read with care: items drafted again would be new drafts,
reviewed afresh, so the "after" column is the share among the items the checks let through, not a prediction.

A second table reads what the review rejects most, a reference answer that says more than its passage: per set,
the answerable and vague items whose reference's terms (rag.curate.absent.terms) the seed passage lacks in more than
a given share (rag.curate.absent.CorpusTerms of the seed alone), kept and rejected, at a few shares. No check
is built on it: it describes, it does not drop.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit, share  # noqa: E402


def flags(record: dict, chunks: dict, corpus) -> list[str]:
    """The checks that flag ``record`` (an item of a drafted set), given the index's chunks (rag.ingest.chunking.Chunk) by id and their
    rag.curate.absent.CorpusTerms."""
    from rag.curate.absent import absent_terms
    from rag.curate.draft import passage
    from rag.curate.seedcheck import foreign_scripts, lists_headings, names_its_passage

    seed = chunks.get(record.get("seed_chunk_id") or "")
    if seed is None:
        return ["seed not in the index"]
    found = ["contents page"] if lists_headings(seed.text) else []
    shown = passage(seed)  # as the drafter saw it
    reference = "" if record.get("should_refuse") else record.get("reference_answer") or ""
    foreign = foreign_scripts(f"{record['question']} {reference}", shown)
    found += [f"{', '.join(foreign)} letters"] * bool(foreign)
    found += ["points at its passage"] * names_its_passage(record["question"])
    now_present = "absent_terms" in record and not absent_terms(record["question"], corpus)  # drafted under the
    # absent-terms check (a set drafted before it had every such item rejected by review: that check is older)
    return found + ["unanswerable, every term in the corpus by root"] * now_present


BEYOND = (0.1, 0.2, 0.3, 0.5)  # shares of a reference's terms its seed passage lacks, for the second table


def beyond_seed(record: dict, seed) -> float | None:
    """The share of the reference answer's terms its seed passage does not hold; None for an item to be refused."""
    from rag.curate.absent import CorpusTerms, terms

    found = terms("" if record.get("should_refuse") else record.get("reference_answer") or "")
    passage = CorpusTerms([seed.text])
    return sum(not passage.has(t) for t in found) / len(found) if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", action="append", required=True, metavar="DRAFTED=INDEX_DIR",
                        help="a drafted set reviewed by hand and the index it was drafted from; repeatable")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from rag.curate.absent import CorpusTerms
    from rag.ingest.chunking import load_chunks_jsonl
    from rag.ingest.jsonl import json_lines

    lines = ["# The drafter's mechanical checks replayed on drafted sets reviewed by hand (no model call)", "",
             "Command: `python benchmarks/draft_checks.py " + " ".join(f"--set {s.split('=')[0]}=INDEX" for s in args.set)
             + "` (INDEX: the index each set was drafted from: the built-in index for the `drafted_builtin` sets, the "
             "Aegis index `benchmarks/retrieval_stages.py` builds for the `drafted_aegis` sets)", "",
             "| set | reviewed by hand | flagged, kept by the human | flagged, rejected by the human | kept before | "
             "kept among the items not flagged |", "| --- | --- | --- | --- | --- | --- |"]
    flagged_items: list[str] = []
    beyond = ["", "## References that say more than their passage", "",
              "Answerable and vague items whose reference's terms the seed passage lacks in more than the share in the "
              "column head: kept / rejected by the human.", "",
              "| set | items | kept before | " + " | ".join(f"> {b:.0%} lacking" for b in BEYOND) + " |",
              "| --- | --- | --- |" + " --- |" * len(BEYOND)]
    for spec in args.set:
        drafted, _, index_dir = spec.partition("=")
        chunks = {c.id: c for c in load_chunks_jsonl(Path(index_dir) / "chunks.jsonl")}
        reviewed = [r for _, _, r in json_lines(drafted, missing="no drafted set here (rag golden draft --out)")
                    if r.get("reviewed_by") == "human"]
        kept = lambda r: r.get("review") in ("accept", "edit")  # noqa: E731
        corpus = CorpusTerms(c.text for c in chunks.values())
        marked = {r["id"]: flags(r, chunks, corpus) for r in reviewed}
        hit_kept = [r for r in reviewed if marked[r["id"]] and kept(r)]
        hit_rejected = [r for r in reviewed if marked[r["id"]] and not kept(r)]
        rest = [r for r in reviewed if not marked[r["id"]]]
        lines.append(f"| {Path(drafted).name} | {len(reviewed)} | {len(hit_kept)} | {len(hit_rejected)} | "
                     f"{share(sum(map(kept, reviewed)), len(reviewed))} | {share(sum(map(kept, rest)), len(rest))} |")
        shares = [(beyond_seed(r, chunks[r["seed_chunk_id"]]), kept(r)) for r in reviewed
                  if r.get("seed_chunk_id") in chunks and not r.get("should_refuse")]
        shares = [(b, k) for b, k in shares if b is not None]
        beyond.append(f"| {Path(drafted).name} | {len(shares)} | {sum(k for _, k in shares)} | " + " | ".join(
            f"{sum(k for b, k in shares if b > t)} / {sum(not k for b, k in shares if b > t)}" for t in BEYOND) + " |")
        flagged_items += [f"- `{Path(drafted).name}` `{r['id']}` ({'kept' if kept(r) else 'rejected'}; "
                          f"{', '.join(marked[r['id']])}): {r['question']}" for r in reviewed if marked[r["id"]]]
    emit(lines + beyond + ["", "Flagged items:", "", *flagged_items], args.out)


if __name__ == "__main__":
    main()
