"""The agent's subject guard, compared offline: exact words (before) against stems, dotted parts and possessives (now).

    python benchmarks/grader_probe.py --models qwen2.5-coder-1.5b --split dev --records R.jsonl   # grader calls
    python benchmarks/subject_guard.py R.jsonl [--out benchmarks/results/subject_guard_dev.md]     # no LM
    python benchmarks/subject_guard.py --run benchmarks/results/eval-full-qwen1.5b                 # a test run

The guard (``rag.agent.context.missing_terms``) overrules a "relevant" verdict when a word of the subject the
grader named appears in none of the passages it accepted. It is deterministic given the grader's output, so
its variants can be compared on recorded grader calls without calling the LM again.

From probe records (one grader call per item, its subject and passages), per variant: how many "relevant"
verdicts the guard overrules, split into answerable items whose gold passage was shown (a wrong overrule: the
agent refuses a question it could answer), unanswerable items (a right overrule) and answerable items without
their gold passage (right too: the answer is not there); and the grader's set precision / recall after the guard
(positive = a gold passage was shown, as ``rag eval`` defines it).

From an eval run (``--run``): every grade step that some variant overrules, and what each variant does with it (a
run records the grader's subject where the guard fired, and for every grade step since 2026-12-01). Choose on dev;
a test run is for reporting.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit  # noqa: E402
from rag.agent.context import _FILLER, missing_terms, split_citations  # noqa: E402

OLD_FILLER = _FILLER - {"vs", "versus"}  # the filler list before "vs" was added (chosen on dev with the rest)


def exact_missing_terms(subject: str, hits: Sequence) -> list[str]:
    """The guard before stems, dotted parts and possessives (commit 13062cc): each word must appear as written."""
    text = " ".join(f"{getattr(h, 'title', '') or ''} {getattr(h, 'text', '') or ''}" for h in hits).lower()
    out = []
    for word in subject.split():
        term = word.strip("`'\"()[]{},:;?!").rstrip(".").lower()
        if sum(c.isalpha() for c in term) >= 2 and term not in OLD_FILLER and term not in text and term not in out:
            out.append(term)
    return out


def _missing_before_calls(subject: str, hits: Sequence, mentioned: Callable[[str, str], bool]) -> list[str]:
    """The guard's word loop before a call was checked by its name (commit 2d04f3f), with ``mentioned(part, text)``
    deciding whether a part, or its stem, is in the passages."""
    from rag.agent.context import _stem

    text = " ".join(f"{getattr(h, 'title', '') or ''} {getattr(h, 'text', '') or ''}" for h in hits).lower()
    out = []
    for word in subject.split():
        term = word.strip("`'\"()[]{},:;?!").rstrip(".").removesuffix("()").lower()
        term = term.removesuffix("'s").removesuffix("\u2019s")
        parts = [p for p in re.split(r"[.]+", term) if sum(c.isalpha() for c in p) >= 2] or [term]
        found = all(mentioned(part, text) or mentioned(_stem(part), text) for part in parts)
        if sum(c.isalpha() for c in term) >= 2 and term not in _FILLER and term not in out and not found:
            out.append(term)
    return out


def anywhere_missing_terms(subject: str, hits: Sequence) -> list[str]:
    """The guard until 2026-12-02 (commit 0f8a332): a word, or its stem, may appear anywhere, inside another
    word too ("lock" in "block")."""
    return _missing_before_calls(subject, hits, lambda part, text: part in text)


def word_start_missing_terms(subject: str, hits: Sequence) -> list[str]:
    """The guard until 2026-12-02 13:00 UTC (commit 2d04f3f): at the start of a word, where an underscore counts
    as part of the word ("init" not in "__init__"), and a call with arguments checked as written ("id(x")."""
    return _missing_before_calls(subject, hits,
                                 lambda part, text: re.search(r"(?<![a-z0-9_])" + re.escape(part), text) is not None)


VARIANTS: dict[str, Callable[[str, Sequence], list[str]]] = {
    "exact words (before)": exact_missing_terms,
    "stems, dotted parts, possessives, anywhere in a word (until 2026-12-02)": anywhere_missing_terms,
    "the same, at the start of a word (until 2026-12-02 13:00 UTC)": word_start_missing_terms,
    "the same, a call by its name, a name without its leading underscores (now)": missing_terms,
}


def accepted(rec: dict) -> list[SimpleNamespace]:
    """The passages the agent would check: those the grader chose, resolved as the agent resolves them (an id, a
    passage number "[2]" or a copied header), or all shown when it chose none it was shown."""
    hits = [SimpleNamespace(**h) for h in rec["hits"]]
    chosen, _ = split_citations([str(c) for c in rec["chosen_ids"]], [h.chunk_id for h in hits])
    return [h for h in hits if h.chunk_id in chosen] or hits


def pct(num: int, den: int) -> str:
    return f"{100 * num / den:.1f}%" if den else "n/a"


def from_probe(records: list[dict]) -> list[str]:
    lines = [f"{len(records)} grader calls ({', '.join(sorted({r['model'] for r in records}))}); "
             f"{sum(r['relevant'] for r in records)} said relevant.", "",
             "| guard | overruled | of them: answerable, gold shown (wrong) | unanswerable (right) | "
             "answerable, no gold shown (right) | precision after | recall after |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    detail = []
    for name, fn in VARIANTS.items():
        tp = fp = fn_ = 0
        wrong = right_u = right_a = 0
        for r in records:
            said = r["relevant"]
            missing = fn(" ".join(r["subject"].split()), accepted(r)) if said else []
            if missing:
                said = False
                wrong += r["gold_shown"]
                right_u += r["type"] == "unanswerable"
                right_a += r["type"] != "unanswerable" and not r["gold_shown"]
                detail.append(f"| {name} | {r['id']} | {r['type']} | {r['gold_shown']} | {r['subject']!r} | "
                              f"{', '.join(missing)} |")
            tp += said and r["gold_shown"]
            fp += said and not r["gold_shown"]
            fn_ += (not said) and r["gold_shown"]
        lines.append(f"| {name} | {wrong + right_u + right_a} | {wrong} | {right_u} | {right_a} | "
                     f"{pct(tp, tp + fp)} ({tp}/{tp + fp}) | {pct(tp, tp + fn_)} ({tp}/{tp + fn_}) |")
    return lines + ["", "Every overrule:", "", "| guard | id | type | gold shown | subject | missing |",
                    "| --- | --- | --- | --- | --- | --- |", *detail]


def from_run(run: Path) -> list[str]:
    from rag.config import load_settings
    from rag.index.store import Index

    chunks = Index.load(settings=load_settings()).by_id  # the index the run used (the built-in one by default)
    note = re.compile(r"its subject '(.*)' is not in the accepted passages")
    lines = ["| id | type | gold shown | subject | " + " | ".join(f"{n}: overrules" for n in VARIANTS) + " |",
             "| --- | --- | --- | --- | " + " | ".join("---" for _ in VARIANTS) + " |"]
    for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        for st in ((r.get("prediction") or {}).get("trace") or {}).get("steps", []):
            m = next((note.search(n) for n in st.get("notes", []) if note.search(n)), None)
            # a step the guard overruled, or one the grader called relevant with its subject recorded (newer runs)
            subject = m.group(1) if m else (st.get("subject") if st.get("verdict") else None)
            if st["node"] != "grade" or not subject:
                continue
            ids = st["chosen_ids"] or st["shown_ids"]
            hits = [chunks[i] for i in ids if i in chunks]
            verdicts = ["yes (" + ", ".join(miss) + ")" if (miss := fn(subject, hits)) else "**no**"
                        for fn in VARIANTS.values()]
            if all(v == "**no**" for v in verdicts):
                continue
            gold = bool(set(r.get("gold_ids") or []) & set(st["shown_ids"]))
            lines.append(f"| {r['id']} | {r['type']} | {gold} | {subject!r} | {' | '.join(verdicts)} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="*", type=Path, help="JSONL written by grader_probe.py --records")
    parser.add_argument("--run", type=Path, action="append", default=[],
                        help="an eval run folder: the guard's overrules in its traces (repeatable)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if not args.records and not args.run:
        parser.error("give probe records, or --run RUN_DIR")
    lines = []
    if args.records:  # one table per records file and grader setting (model, passage length, demos) in it
        groups: dict[tuple, list[dict]] = {}
        for p in args.records:
            for line in p.read_text(encoding="utf-8").splitlines():
                rec = json.loads(line)
                demos = (rec.get("demos"), rec.get("demo_position", "after") if rec.get("demos") else None)
                groups.setdefault((p, rec["model"], rec.get("passage_chars"), demos), []).append(rec)
        for (path, model, chars, (demos, position)), recs in groups.items():
            shown = 'whole passages' if chars is None else f'first {chars} characters of each passage'
            where = "every role's, in one block before" if position == "shared" else position
            with_demos = f", the demos of {demos} {where} the passages" if demos else ""
            lines += [f"### {model}, {shown}{with_demos} (`{path}`)", "", *from_probe(recs), ""]
    for run in args.run:
        lines += ["", f"Overrules in `{run}`:", "", *from_run(run)]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
