"""The grader alone, per embedded model, on one split of the golden set: its decisions, speed and parse health.

Run: python benchmarks/grader_probe.py [--models qwen2.5-coder-1.5b,qwen2.5-coder-0.5b] [--split dev] [--k 4]
                                       [--demos qwen1.5b-bootstrap --demo-position after,before]
                                       [--out benchmarks/results/grader_probe.md]

For each item: hybrid retrieval (top k, the built-in index), one grader call through Sieve's adapter and
the real engine (cache off), then the verdict against the gold (positive = a gold chunk was retrieved,
the definition ``rag eval`` uses). The table puts the models side by side: set-level precision / recall
/ accuracy, the share of unanswerable items graded not relevant, ids named that were not shown, notes
(fields cut at their bound, unparsable output), and grader latency and tokens. Use dev or train to choose a
model or a prompt; the test split is for reporting.

``--demos NAME`` gives the grader the compiled demos of ``artifacts/NAME`` (its ``grade`` predictor's), and
``--demo-position`` puts them after the passages (Sieve's layout), before them, or ``shared``: every role's demos
of that program in one block before them, as the agent shows them with that setting (``SieveAdapter(demo_position=)``);
the table then counts calls whose subject is a demo's subject on a question that does not mention it (copies).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dspy  # noqa: E402

from benchmarks.demo_leak import copies_demo, demo_subjects, grade_demos  # noqa: E402
from benchmarks.tables import emit  # noqa: E402
from rag.agent.artifacts import apply, load  # noqa: E402
from rag.agent.context import format_context, split_citations  # noqa: E402
from rag.agent.module import Sieve  # noqa: E402
from rag.config import load_settings  # noqa: E402
from rag.eval.golden import gold_chunk_ids, load_golden  # noqa: E402
from rag.lm.adapter import DEMO_POSITIONS, SieveAdapter, program_demos, shown_ids  # noqa: E402
from rag.lm.configure import build_lm, configure_dspy  # noqa: E402
from rag.retrieval.retriever import Retriever  # noqa: E402
from rag.usage.metering import metered_call  # noqa: E402
from signatures import Grader  # noqa: E402


def _grade_one(model: str, it, retriever, grade, lm, k: int, passage_chars: int | None, id_choices: bool = True) -> dict:
    """One grader call on the top-k passages for ``it``; the record keeps what the agent's subject guard needs
    (subject, chosen ids, the passages), so guard variants can be compared offline (benchmarks/subject_guard.py)."""
    hits = retriever.search(it.question, k=k)
    shown = [h.chunk_id for h in hits]
    start = time.perf_counter()
    with shown_ids(shown if id_choices else ()):  # as the agent calls it (setting id_choices)
        pred, stats = metered_call(grade, lm, question=it.question, context=format_context(hits, max_chars=passage_chars))
    latency = time.perf_counter() - start
    _, invalid = split_citations([str(x) for x in pred.relevant_chunk_ids or []], shown)
    return {"model": model, "id": it.id, "type": it.type, "question": it.question,
            "gold_shown": bool(gold_chunk_ids(it, retriever.index.chunks) & set(shown)), "relevant": bool(pred.relevant),
            "subject": str(getattr(pred, "subject", "") or ""), "reason": str(pred.reason or ""),
            "chosen_ids": [str(x) for x in pred.relevant_chunk_ids or []], "invalid_ids": invalid,
            "hits": [{"chunk_id": h.chunk_id, "title": h.title, "text": h.text} for h in hits],
            "passage_chars": passage_chars, "id_choices": id_choices, "latency_s": latency, "tokens_in": stats.tokens_in,
            "tokens_out": stats.tokens_out, "notes": list(stats.notes)}


def probe(model: str, items, retriever, k: int, records: Path | None = None, passage_chars: int | None = None,
          id_choices: bool = True, demos: str | None = None, demo_position: str = "after") -> dict:
    settings = load_settings({"embedded_model": model, "cache": False})
    lm = build_lm("embedded", settings)
    grade = dspy.Predict(Grader)
    subjects: set[str] = set()
    program = None  # with demo_position "shared": the compiled program whose every role's demos the grader is shown
    if demos:
        raw = grade_demos(demos)
        grade.demos, subjects = [dspy.Example(**d) for d in raw], demo_subjects(raw)
        if demo_position == "shared":
            program = Sieve(retriever)
            apply(program, load(ROOT / "artifacts" / demos))
            grade = program.grade
    where = "every role's, in one block before" if demo_position == "shared" else demo_position
    label = model + ("" if id_choices else " (free ids)") + (f", demos of {demos} {where} the passages" if demos else "")
    copies = 0
    tp = fp = fn = tn = 0
    unanswerable_rejected = unanswerable = bad_ids = notes = 0
    latencies, tokens_in, tokens_out, rows = [], [], [], []
    done = {}
    if records and records.is_file():  # resume: items already probed with this model, passage length and id choice
        for line in records.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            if (rec["model"] == model and rec.get("passage_chars") == passage_chars
                    and rec.get("id_choices", False) == id_choices  # records before the setting: free ids
                    and rec.get("demos") == demos and rec.get("demo_position", "after") == demo_position):
                done[rec["id"]] = rec
    for i, it in enumerate(items, 1):
        if it.id in done:
            rec = done[it.id]
        else:
            with (dspy.context(adapter=SieveAdapter(demo_position=demo_position)),
                  program_demos(program) if program else contextlib.nullcontext()):
                rec = _grade_one(model, it, retriever, grade, lm, k, passage_chars, id_choices)
            rec.update(demos=demos, demo_position=demo_position)
        copies += copies_demo(rec["subject"], it.question, subjects)
        if records and it.id not in done:
            with records.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        positive, said = rec["gold_shown"], rec["relevant"]
        latencies.append(rec["latency_s"])
        tokens_in.append(rec["tokens_in"])
        tokens_out.append(rec["tokens_out"])
        notes += bool(rec["notes"])
        bad_ids += bool(rec["invalid_ids"])
        tp += said and positive
        fp += said and not positive
        fn += (not said) and positive
        tn += (not said) and not positive
        if it.type == "unanswerable":
            unanswerable += 1
            unanswerable_rejected += not said
        rows.append((it.id, it.type, positive, said, rec["reason"][:90]))
        print(f"[{label}] {i}/{len(items)} {it.id} gold-shown={positive} said={said} {rec['latency_s']:.1f}s "
              f"subject={rec['subject']!r} reason={rec['reason'][:70]!r}", file=sys.stderr, flush=True)
    n = len(items)
    return {"model": label, "n": n, "copies": copies if demos else None, "precision": tp / (tp + fp) if tp + fp else float("nan"),
            "recall": tp / (tp + fn) if tp + fn else float("nan"), "accuracy": (tp + tn) / n,
            "positives": tp + fn, "unanswerable_rejected": f"{unanswerable_rejected}/{unanswerable}",
            "bad_ids": bad_ids, "notes": notes, "p50_s": statistics.median(latencies),
            "tokens_in": statistics.mean(tokens_in), "tokens_out": statistics.mean(tokens_out), "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="qwen2.5-coder-1.5b,qwen2.5-coder-0.5b")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--limit", type=int, default=None, help="first N items of the split (all by default)")
    parser.add_argument("--golden", default=str(ROOT / "golden" / "python_ref.jsonl"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--records", type=Path, help="append one JSON line per item (subject, ids, passages shown)")
    parser.add_argument("--passage-chars", type=int, default=None,
                        help="show the grader only the first N characters of each passage (a latency lever)")
    parser.add_argument("--id-choices", default="on", help="on, off or on,off: the grader may name only the shown "
                        "ids (the default, setting id_choices) or any string; on,off probes both, one after the other")
    parser.add_argument("--demos", help="give the grader the compiled demos of artifacts/NAME")
    parser.add_argument("--demo-position", default="shared",
                        help=f"with --demos: {', '.join(DEMO_POSITIONS)} (the passages), or several comma-separated "
                        "(default: shared, the agent's default)")
    args = parser.parse_args()
    positions = args.demo_position.split(",")
    if not set(positions) <= set(DEMO_POSITIONS):
        parser.error(f"--demo-position {args.demo_position!r}: use one or more of {', '.join(DEMO_POSITIONS)}")
    settings = load_settings({"cache": False})
    configure_dspy(settings)
    retriever = Retriever.from_settings(settings)
    items = [it for it in load_golden(args.golden) if it.split == args.split][: args.limit]
    if not set(args.id_choices.split(",")) <= {"on", "off"}:
        parser.error(f"--id-choices {args.id_choices!r}: use on, off or on,off")
    choices = [{"on": True, "off": False}[v] for v in args.id_choices.split(",")]
    results = [probe(m, items, retriever, args.k, args.records, args.passage_chars, c, args.demos, pos)
               for m in args.models.split(",") for c in choices for pos in (positions if args.demos else ["after"])]
    base = results[0]["p50_s"]
    lines = [f"Grader alone on the `{args.split}` split (n = {len(items)}), hybrid top {args.k}, built-in index, "
             f"cache off (`python benchmarks/grader_probe.py --split {args.split}`)", "",
             "| model | precision | recall | accuracy | unanswerable graded not relevant | ids not shown | "
             "calls with notes | demo subject copied | p50 s | tokens in / out | p50 ratio |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    for r in results:
        lines.append(f"| {r['model']} | {r['precision']:.2f} | {r['recall']:.2f} | {r['accuracy']:.2f} | "
                     f"{r['unanswerable_rejected']} | {r['bad_ids']} | {r['notes']} | "
                     f"{'-' if r['copies'] is None else r['copies']} | {r['p50_s']:.1f} | "
                     f"{r['tokens_in']:.0f} / {r['tokens_out']:.0f} | {r['p50_s'] / base:.2f} |")
    lines += ["", f"Positives (a gold chunk in the top {args.k}): {results[0]['positives']} of {len(items)}.", ""]
    for r in results:
        lines += [f"<details><summary>{r['model']}: every item</summary>", "",
                  "| id | type | gold shown | said relevant | reason |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {i} | {t} | {p} | {s} | {why.replace('|', '/')} |" for i, t, p, s, why in r["rows"]]
        lines += ["", "</details>", ""]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
