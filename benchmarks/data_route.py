"""The data route's router and SQL writer alone, per variant, on splits of a golden set with route labels.

Run: python benchmarks/data_route.py --index-dir ~/.cache/sieve/demo/ops/index --golden ~/.cache/sieve/demo/ops/golden.jsonl
                                     [--splits train,dev] [--router router,router+demos,needs]
                                     [--sql sql,sql+demos] [--artifact ops-data-route-qwen1.5b]
                                     [--records runs/data_route.jsonl] [--out benchmarks/results/data_route.md]

Each call goes through Sieve's adapter and the embedded model (cache off), as the agent makes it; a record per
(variant, item) is appended to ``--records`` and reused on a rerun. Router variants: ``router`` (signatures.SourceRouter
as shipped), ``cues`` (rag.data.schemalink: the question's wording against the tables' and documents' words, no
model call), ``router+demos`` (with the demos of ``--artifact``), ``needs`` (the question split in two yes/no
questions, ``NEEDS`` below: does the answer come from table rows, does it rest on a rule the documents state; both ->
both, rows -> data, else docs). SQL variants: ``sql`` (signatures.SQLWriter), ``sql+demos``, ``sql+rules`` (``SQL_RULES`` added to the
instructions), ``sql+drills`` (the three worked examples of rag.data.drills nearest the question, written from the
tables with no labels, as ``sql_drills`` shows them) and ``sql+similar`` (the three labelled queries of ``--examples`` nearest the question as demos, as
``sql_examples`` shows them, ahead of the schema; after it, a call is 2.1x faster but the examples' gain shrank:
benchmarks/results/sql_examples_layout.md, measured at commit 9d26ccc and reverted), scored by running the
statement through the guard against the gold rows (what ``rag eval`` calls SQL execution accuracy); a "both" item's
writer reads its gold passages. ``@text`` has the writer answer with a ```sql block instead of JSON (the agent's
``sql_output = "text"``, rag.agent.sqltext). ``+voteN`` drafts N statements, the first greedy and the others at
the default ``sql_sample_temperature``, and scores the one whose result the most of them return (``sql_samples = N``, rag.agent.sqlvote).
``+links`` shows the writer, beside the schema, the table values and record ids the question names (``sql_links =
"values"``, rag.data.valuelinks); ``+names`` only the names and ids (``sql_links = "names"``), ``+names+short`` also
a name said by its leading words ("Birch Foods", ``short_names``, rag.data.shortnames), ``+names+short+paths`` also
the join path from a table asked about to a named record's (``sql_join_paths``, rag.data.joinpaths); the router's
``cues+short`` links short names too. ``+figures`` lists the passages' sentences that state a figure, those sharing
most words with the question first (FIGURES of them), ahead of the passages; ``+figinline`` adds the first of them to
the question (measured on 2026-12-07 and not built: benchmarks/results/sql_figures_test.md). Corrections (``--correct``): ``sql+correct`` is the agent's form (``sql+names+short+paths+correct`` with the
default's value links); ``:redrawN`` draws a
correction that repeats the failed statement again at ``sql_sample_temperature`` with seeds 1..N until it differs
(measured at commit 15cde36 as the agent's ``sql_redraws``, then reverted: benchmarks/results/sql_redraws.md).
A variant may pin the prompt layout: ``@tables-first`` (the schema ahead of the
question; the adapter's layout since 2026-12-04) or ``@question-first`` (the layout before); without one, the
adapter's layout of the day (records keep their variant's name, so a rerun reuses them). Choose on train and dev;
the test split is for reporting.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RECORDS = ROOT / "runs" / "data_route.jsonl"

import dspy  # noqa: E402

from benchmarks.tables import emit, shown_path  # noqa: E402
from rag.stats.intervals import wilson  # noqa: E402


class NeedsRowsAndRule(dspy.Signature):
    """Answer two questions about what the question needs.

    needs_rows: does the answer have to be computed from rows of the data tables (a count, a total, an average, a
    list, a top few, or a value stored in a table)?
    needs_rule: does the question name or rely on a rule, limit, deadline, rate or definition that the documents
    state (for example "the limit the policy sets", "the standard terms", "How often is ...", "What must ...")?
    A question may need both: a rule from the documents applied to the rows, such as how many orders exceed the
    refund limit."""

    question: str = dspy.InputField()
    tables: str = dspy.InputField(desc="the data tables: names, columns, example values")
    reason: str = dspy.OutputField(desc="a few words: what the question asks for", max_length=80)
    needs_rows: bool = dspy.OutputField()
    needs_rule: bool = dspy.OutputField()


def needs_route(rows: bool, rule: bool) -> str:
    return "both" if rows and rule else "data" if rows else "docs"


def _router(variant: str, demos: list) -> dspy.Predict:
    from signatures import SourceRouter

    predict = dspy.Predict(NeedsRowsAndRule if variant.startswith("needs") else SourceRouter)
    predict.demos = list(demos) if "+demos" in variant else []
    return predict


@contextlib.contextmanager
def _layout(variant: str):
    """``@tables-first`` variants: the schema leads the prompt and the question comes last, next to the task (as the
    passages lead the grader's prompt); otherwise the adapter's layout as shipped."""
    from rag.lm import adapter

    shipped = adapter.LEADING_INPUTS
    first = "@tables-first" in variant and "tables" not in shipped
    adapter.LEADING_INPUTS = (*shipped, "tables") if first else tuple(i for i in shipped if i != "tables") \
        if "@question-first" in variant else shipped
    try:
        if "@text" in variant:  # the writer answers with a ```sql block (rag.agent.sqltext, sql_output = "text")
            from rag.agent.sqltext import SQLTextAdapter

            with dspy.context(adapter=SQLTextAdapter()):
                yield
        else:
            yield
    finally:
        adapter.LEADING_INPUTS = shipped


def _route_one(variant: str, predict, item, schema: str, lm) -> dict:
    from rag.agent.dataroute import parse_route
    from rag.data.schemalink import read_cues
    from rag.usage.metering import metered_call

    start = time.perf_counter()
    if variant.startswith("cues"):  # predict is the Vocabulary: no model call
        cues = read_cues(item.question, predict)
        return {"role": "router", "variant": variant, "id": item.id, "split": item.split, "gold": item.meta["route"],
                "got": cues.route, "right": cues.route == item.meta["route"], "reason": cues.reason,
                "latency_s": time.perf_counter() - start, "tokens_in": 0}
    pred, stats = metered_call(predict, lm, question=item.question, tables=schema)
    if variant.startswith("needs"):
        route = needs_route(bool(pred.needs_rows), bool(pred.needs_rule))
        extra = {"needs_rows": bool(pred.needs_rows), "needs_rule": bool(pred.needs_rule)}
    else:
        route, extra = parse_route(pred.source), {}
    return {"role": "router", "variant": variant, "id": item.id, "split": item.split, "gold": item.meta["route"],
            "got": route, "right": route == item.meta["route"], "reason": str(pred.reason or ""), **extra,
            "latency_s": time.perf_counter() - start, "tokens_in": stats.tokens_in}


def _sql_one(variant: str, predict, item, schema: str, documents: str, warehouse, lm, examples=None) -> dict:
    from optimize.roles import sql_outcome
    from rag.agent.dataroute import clean_sql
    from rag.usage.metering import metered_call

    start = time.perf_counter()
    shown, demos = examples.similar(item.question) \
        if examples is not None and ("+similar" in variant or "+drills" in variant) else ([], None)
    inputs = dict(question=item.question, tables=schema, documents=documents, previous="",
                  **({"demos": demos} if demos else {}))
    pred, stats = metered_call(predict, lm, **inputs)
    text, voted = pred.sql, {}
    samples = int(m.group(1)) if (m := re.search(r"\+vote(\d+)", variant)) else 1
    if samples > 1 and clean_sql(pred.sql):  # an empty greedy statement ("the tables cannot answer") stands
        text, voted = _voted(predict, lm, inputs, pred.sql, samples, warehouse)
    right, sql, error = sql_outcome(warehouse, text, item.meta["gold_result"], rows=50, timeout_s=5.0)
    return {"role": "sql", "variant": variant, "id": item.id, "split": item.split, "gold": item.meta["route"],
            "sql": sql, "error": error, "right": right, "latency_s": time.perf_counter() - start,
            "tokens_in": stats.tokens_in, "examples": shown, **voted}


def _voted(predict, lm, inputs: dict, greedy: str, samples: int, warehouse) -> tuple[str, dict]:
    """``+voteN``: the greedy statement and N - 1 more drafted at ``sql_sample_temperature``'s default with seeds 1, 2, ..., each run as
    written; the statement whose result the most drafts return, a tie to the earliest (rag.agent.sqlvote, as
    ``sql_samples = N`` has the agent do)."""
    from rag.agent.dataroute import clean_sql
    from rag.agent.sqlvote import agreed
    from rag.config import Settings
    from rag.errors import DataError
    from rag.usage.metering import metered_call

    temperature = Settings.sql_sample_temperature  # the agent's default
    drafts = [clean_sql(greedy)]
    for seed in range(1, samples):
        try:
            drafts.append(clean_sql(metered_call(predict, lm, config={"temperature": temperature, "seed": seed},
                                                 **inputs)[0].sql))
        except Exception:  # an output that could not be parsed: no vote
            drafts.append("")
    results = []
    for sql in drafts:
        try:
            results.append(warehouse.run(sql, time_limit_s=5.0, max_rows=50) if sql else None)
        except DataError:
            results.append(None)
    chosen, votes = agreed(results)
    return drafts[max(chosen, 0)], {"drafts": drafts, "chosen": chosen, "votes": votes}


SQL_RULES = ("Join another table only when the question needs one of its columns: joining a table with several rows "
             "per row multiplies counts and sums. Add no condition the question does not ask for. The data is a "
             "record of the past: never use CURRENT_DATE, NOW() or CURDATE(); take dates from the question, the "
             "documents or the tables' description. A rate or a percentage is 100.0 * the matching rows / all rows.")

CORRECTIONS = {  # how the failed statement and its error are shown to the writer for its one correction
    "sql+correct": lambda sql, error: f"{sql}\nerror: {error}",  # the agent's form (rag.agent.dataroute)
    "sql+correct:error-only": lambda sql, error: f"A previous query failed with this error: {error}",
    "sql+correct:differ": lambda sql, error: (f"{sql}\nerror: {error}\nThis query failed. Do not repeat it: write a "
                                              "different query that avoids the error."),
}


def _correct_one(variant: str, predict, item, schema: str, documents: str, warehouse, lm, first: dict) -> dict | None:
    """The one correction after a first statement that the guard refused or DuckDB failed (None: nothing to correct):
    whether it repeats the failed statement, runs, and returns the gold rows."""
    from optimize.roles import sql_outcome
    from rag.usage.metering import metered_call

    if not first.get("error"):
        return None
    from rag.config import Settings

    start = time.perf_counter()
    form, _, redraws = variant.split("@")[0].partition(":redraw")
    form = re.sub(r"\+(links|names|short|paths)", "", form)  # sql+names+short+paths+correct: the links, the agent's form
    inputs = dict(question=item.question, tables=schema, documents=documents,
                  previous=CORRECTIONS[form](first["sql"], first["error"]))
    pred, stats = metered_call(predict, lm, **inputs)
    right, sql, error = sql_outcome(warehouse, pred.sql, item.meta["gold_result"], rows=50, timeout_s=5.0)
    repeated, drawn = sql == first["sql"], None
    for seed in range(1, int(redraws or 0) + 1):  # ``:redrawN``
        if not (sql and same_sql(sql, first["sql"])):
            break
        try:
            again = metered_call(predict, lm, config={"temperature": Settings.sql_sample_temperature, "seed": seed},
                                 **inputs)[0].sql
        except Exception:  # an output that could not be parsed: the next draw
            continue
        outcome = sql_outcome(warehouse, again, item.meta["gold_result"], rows=50, timeout_s=5.0)
        if outcome[1] and not same_sql(outcome[1], first["sql"]):
            (right, sql, error), drawn = outcome, seed
    return {"role": "correct", "variant": variant, "id": item.id, "split": item.split, "gold": item.meta["route"],
            "sql": sql, "error": error, "right": right, "repeated": repeated, "runs": bool(sql) and not error,
            "redrawn": drawn, "latency_s": time.perf_counter() - start, "tokens_in": stats.tokens_in}


FIGURES = 3  # ``+figures``: the figure sentences listed ahead of the documents


def figure_sentences(question: str, passages: list[str]) -> list[str]:
    """The passages' sentences that state a figure (a digit in them), most words shared with ``question`` first
    (ties in reading order): what a ``both`` question's statement has to apply."""
    from rag.data.schemalink import is_content, root, words

    asked = {root(w) for w in words(question) if is_content(w)}
    found = []
    for text in passages:
        for line in text.splitlines():
            for sentence in re.split(r"(?<=[.!?])\s+", line.strip().lstrip("-*# ").strip()):
                if re.search(r"\d", sentence) and sentence not in found:
                    found.append(sentence)
    shared = {s: len(asked & {root(w) for w in words(s) if is_content(w)}) for s in found}
    return sorted(found, key=lambda s: -shared[s])


def _with_figures(variant: str, question: str, passages: list[str], documents: str) -> tuple[str, str]:
    """``+figures``: the top figure sentences listed ahead of the documents; ``+figinline``: the best one after
    the question. Other variants: both unchanged."""
    figures = figure_sentences(question, passages) if "+fig" in variant else []
    if not figures:
        return question, documents
    if "+figinline" in variant:
        return f"{question} (the documents: '{figures[0]}')", documents
    listed = "\n".join(f"- {f}" for f in figures[:FIGURES])
    return question, f"Figures the documents state:\n{listed}\n\n{documents}"


def _run(role: str, variant: str, predict, item, schema: str, index, warehouse, lm, first: dict | None = None,
         examples=None, links=None) -> dict:
    from rag.agent.dataroute import documents_text
    from rag.data.valuelinks import section
    from rag.eval.golden import gold_chunk_ids
    from rag.retrieval.retriever import Hit

    if role == "router":
        return _route_one(variant, predict, item, schema, lm)
    named = [] if links is None else links["values"].lines(item.question) if "+links" in variant else \
        links["paths"].lines(item.question) if "+names+short+paths" in variant else \
        links["short"].lines(item.question) if "+names+short" in variant else \
        links["names"].lines(item.question) if "+names" in variant else []
    schema += section(named)
    gold = sorted(gold_chunk_ids(item, index.chunks)) if item.meta["route"] == "both" else []
    hits = [Hit(chunk_id=c, text=index.by_id[c].text, title="", source="", rank=0, score=0.0, stages={}) for c in gold]
    question, documents = _with_figures(variant, item.question, [h.text for h in hits], documents_text(hits))
    item = dataclasses.replace(item, question=question) if question != item.question else item
    if role == "correct":
        rec = _correct_one(variant, predict, item, schema, documents, warehouse, lm, first)
    else:
        rec = _sql_one(variant, predict, item, schema, documents, warehouse, lm, examples)
    return {**rec, "links": named} if rec is not None and named else rec


def _table(records: list[dict], role: str, splits: list[str]) -> list[str]:
    variants = list(dict.fromkeys(r["variant"] for r in records if r["role"] == role))
    groups = ["docs", "data", "both"] if role == "router" else ["data", "both"]
    head = ["variant", *(f"{s} (n)" for s in splits), *(f"route {g}" for g in groups), "s per call (p50)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in variants:
        mine = [r for r in records if r["role"] == role and r["variant"] == v]
        cells = [v]
        for s in splits:
            got = [r["right"] for r in mine if r["split"] == s]
            lo, hi = wilson(sum(got), len(got)) if got else (0, 0)
            cells.append(f"{sum(got) / len(got):.0%} [{lo:.0%}, {hi:.0%}] ({len(got)})" if got else "—")
        for g in groups:
            got = [r["right"] for r in mine if r["gold"] == g]
            cells.append(f"{sum(got)}/{len(got)}")
        cells.append(f"{statistics.median(r['latency_s'] for r in mine):.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index-dir", type=Path, required=True)
    parser.add_argument("--golden", type=Path, required=True)
    parser.add_argument("--splits", default="train,dev")
    parser.add_argument("--router", default="router,needs", help="router variants (empty: none)")
    parser.add_argument("--sql", default="", help="SQL writer variants: sql, sql+demos (empty: none)")
    parser.add_argument("--correct", default="", help="correction variants after a failed first statement of the "
                        "--correct-after variant (needs it in --sql): " + ", ".join(CORRECTIONS) + " (@text: as a "
                        "```sql block)")
    parser.add_argument("--correct-after", default="sql", help="the SQL variant whose failed first statements the "
                        "correction variants correct (e.g. sql@text)")
    parser.add_argument("--artifact", default="ops-data-route-qwen1.5b", help="whose demos the +demos variants use")
    parser.add_argument("--examples", default="", help="for the +similar variants: FILE:SPLITS, the labelled queries "
                        "shown, the 3 nearest per question (rag.data.labelled.SQLExamples, as sql_examples does)")
    parser.add_argument("--records", type=Path, default=RECORDS, help="calls made, reused on a rerun")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from rag.config import load_settings
    from rag.data import Warehouse, schema_summary
    from rag.eval.golden import load_golden
    from rag.index.store import Index
    from rag.lm.configure import build_lm, configure_dspy

    settings = load_settings({"index_dir": args.index_dir, "cache": False})
    configure_dspy(settings)
    index = Index.load(args.index_dir, settings)
    schema, warehouse = schema_summary(index.tables_record), Warehouse(index.tables_path)
    splits = [s for s in args.splits.split(",") if s]
    items = [i for i in load_golden(args.golden) if i.split in splits and i.meta.get("route")]
    state = json.loads((ROOT / "artifacts" / args.artifact / "program.json").read_text()) if args.artifact else {}
    demos = {name: [dspy.Example(**d) for d in state.get(f"data.{name}", {}).get("demos", [])] for name in ("choose", "write")}
    lm = build_lm("embedded", settings)
    examples = None
    if args.examples:
        from rag.data.labelled import SQLExamples

        file, _, shown_splits = args.examples.rpartition(":")
        examples = SQLExamples.from_file(file, shown_splits.split(","), index.query_encoder.encode, k=3)
    links = None
    if "+links" in args.sql + args.correct or "+names" in args.sql + args.correct:
        from rag.data.schemalink import column_values
        from rag.data.shortnames import ShortNames
        from rag.data.valuelinks import ValueLinks

        values = column_values(index.tables_record, warehouse)
        links = {kind: ValueLinks.from_record(index.tables_record, warehouse, values, names_only=kind != "values",
                                              short=ShortNames.from_record(index.tables_record, values)
                                              if kind in ("short", "paths") else None, paths=kind == "paths")
                 for kind in ("values", "names", "short", "paths")}
    drilled = None
    if "+drills" in args.sql:
        from rag.data.drills import Drills
        from rag.data.labelled import SQLExamples

        written = Drills(index.tables_record, warehouse)
        drilled = SQLExamples.from_items(written.items, index.query_encoder.encode, k=3, linked=written.linked)
    args.records.parent.mkdir(parents=True, exist_ok=True)
    done = {(r["role"], r["variant"], r["id"]): r for r in map(json.loads, args.records.read_text().splitlines())} \
        if args.records.is_file() else {}
    records = []
    jobs = [("router", v) for v in args.router.split(",") if v] + [("sql", v) for v in args.sql.split(",") if v]
    jobs += [("correct", v) for v in args.correct.split(",") if v]
    for role, variant in jobs:
        if role == "router" and variant.startswith("cues"):
            from rag.data.schemalink import Vocabulary

            predict = Vocabulary.for_index(index, warehouse, short_names="+short" in variant)
        elif role == "router":
            predict = _router(variant, demos["choose"])
        else:  # the SQL writer, first statement or correction
            from signatures import SQLWriter

            predict = dspy.Predict(SQLWriter.with_instructions(SQLWriter.instructions + " " + SQL_RULES)
                                   if "+rules" in variant else SQLWriter)
            predict.demos = demos["write"] if "+demos" in variant else []
        todo = items if role == "router" else [i for i in items if i.meta.get("gold_result") is not None]
        if role == "correct":  # after the plain writer's first statement, when it failed
            todo = [i for i in todo if (done.get(("sql", args.correct_after, i.id)) or {}).get("error")]
        for n, item in enumerate(todo, 1):
            key = (role, variant, item.id)
            if key not in done or variant.startswith("cues"):  # the cues are read again: they take microseconds
                with _layout(variant):
                    rec = _run(role, variant, predict, item, schema, index, warehouse, lm,
                               done.get(("sql", args.correct_after, item.id)),
                               drilled if "+drills" in variant else examples, links)
                done[key] = rec
                with args.records.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            records.append(done[key])
            print(f"[{role} {variant}] {n}/{len(todo)} {item.id}: {'right' if done[key]['right'] else 'wrong'}",
                  file=sys.stderr, flush=True)
    lines = [f"# The data route alone: {args.golden.name}, splits {', '.join(splits)}", "",
             f"Command: `python benchmarks/data_route.py --index-dir {shown_path(args.index_dir)} --golden "
             f"{shown_path(args.golden)} --splits {args.splits} --router {args.router or chr(34) * 2} --sql "
             f"{args.sql or chr(34) * 2} --artifact {args.artifact or chr(34) * 2}"
             f"{f' --examples {shown_path(args.examples)}' if args.examples else ''}"
             f"{f' --correct {args.correct}' if args.correct else ''}"
             f"{f' --correct-after {args.correct_after}' if args.correct_after != 'sql' else ''}"
             f"{f' --records {shown_path(args.records)}' if args.records != RECORDS else ''}`", "",
             "Share right per split with its 95% Wilson interval (n items), right/items per gold route, and the "
             "median seconds per call, on the embedded Qwen2.5-Coder-1.5B (cache off).", ""]
    if args.router:
        lines += ["## Router: routing accuracy", "", *_table(records, "router", splits), ""]
    if args.sql:
        lines += ["## SQL writer: execution accuracy (the gold rows)", "", *_table(records, "sql", splits), ""]
        lines += _paired(records, [v for v in args.sql.split(",") if v], items, examples)
    if args.correct:
        lines += ["## The one correction, after a first statement that was refused or failed", "",
                  "| variant | corrections | repeats the failed statement | runs | right (gold rows) |", "|---|---|---|---|---|"]
        for v in args.correct.split(","):
            mine = [r for r in records if r["role"] == "correct" and r["variant"] == v]
            lines.append(f"| {v} | {len(mine)} | {sum(r['repeated'] for r in mine)} | {sum(r['runs'] for r in mine)} | "
                         f"{sum(r['right'] for r in mine)} |")
        lines.append("")
        lines += _with_correction(records, [v for v in args.sql.split(",") if v], args.correct.split(",")[0],
                                  args.correct_after)
        lines += _corrections_paired(records, args.correct.split(","), args.correct_after)
    emit(lines, args.out)


def _with_correction(records: list[dict], variants: list[str], correct: str, after: str) -> list[str]:
    """The ``+vote`` variants against ``after`` as the agent runs them, with its one correction: a first statement
    that failed is corrected (``correct``'s record), and a vote in which no draft ran corrects the greedy draft,
    which is ``after``'s first statement, the same way (McNemar, exact)."""
    from rag.stats.intervals import mcnemar

    if not any("+vote" in v for v in variants):
        return []
    first = {r["id"]: r for r in records if r["role"] == "sql" and r["variant"] == after}
    fixed = {r["id"]: bool(r["right"]) for r in records if r["role"] == "correct" and r["variant"] == correct}
    ids = [i for i, r in first.items() if not r.get("error") or i in fixed]
    base = [bool(first[i]["right"]) or fixed.get(i, False) for i in ids]
    lines = [f"With the agent's one correction (`{correct}` after a failed first statement of `{after}`; a vote in "
             "which no draft ran corrects the greedy draft the same way):", "",
             f"| variant | items | `{after}` + correction right | right | better / worse | p |", "|---|---|---|---|---|---|"]
    for v in variants:
        mine = {r["id"]: r for r in records if r["role"] == "sql" and r["variant"] == v and "+vote" in v}
        if not mine:
            continue
        got = [bool(mine[i]["right"]) or (mine[i].get("chosen", 0) < 0 and fixed.get(i, False)) if i in mine else False
               for i in ids]
        worse, better, p = mcnemar(base, got)
        lines.append(f"| {v} | {len(ids)} | {sum(base)} | {sum(got)} | {better} / {worse} | {p:.3f} |")
    return lines + [""]


def same_sql(a: str, b: str) -> bool:
    """Whether two statements are the same but for whitespace and case."""
    return " ".join(a.split()).lower() == " ".join(b.split()).lower()


def _corrections_paired(records: list[dict], corrections: list[str], after: str) -> list[str]:
    """Each correction variant against the first, as the agent scores a question: ``after``'s first statement, or
    its correction where it was refused or failed (McNemar, exact); with the seconds each adds per question."""
    from rag.stats.intervals import mcnemar

    if len(corrections) < 2:
        return []
    first = {r["id"]: r for r in records if r["role"] == "sql" and r["variant"] == after}
    fixed = {v: {r["id"]: r for r in records if r["role"] == "correct" and r["variant"] == v} for v in corrections}
    ids = list(first)

    def scored(v: str) -> list[bool]:
        return [bool(first[i]["right"]) or bool((fixed[v].get(i) or {}).get("right")) for i in ids]

    def added(v: str) -> float:
        return sum(r["latency_s"] for r in fixed[v].values()) / max(len(ids), 1)

    base = scored(corrections[0])
    lines = [f"`{after}`'s first statement, corrected where it failed, by each correction against `{corrections[0]}` "
             "(McNemar, exact), and the correction's seconds per question, averaged over all the items:", "",
             f"| correction | items | `{corrections[0]}` right | right | better / worse | p | s per question added |",
             "|---|---|---|---|---|---|---|",
             f"| {corrections[0]} | {len(ids)} | {sum(base)} | {sum(base)} | | | {added(corrections[0]):.1f} |"]
    for v in corrections[1:]:
        got = scored(v)
        worse, better, p = mcnemar(base, got)
        redrawn = sum(r.get("redrawn") is not None for r in fixed[v].values())
        lines.append(f"| {v} ({redrawn} drawn again) | {len(ids)} | {sum(base)} | {sum(got)} | {better} / {worse} | "
                     f"{p:.3f} | {added(v):.1f} |")
    return lines + [""]


def _paired(records: list[dict], variants: list[str], items: list, examples) -> list[str]:
    """Each SQL variant against the first on the same items (McNemar, exact); with ``examples``, also without the
    items whose question repeats or rewords one the examples come from (benchmarks/router_learned.repeating)."""
    from benchmarks.router_learned import repeating
    from rag.stats.intervals import mcnemar

    if len(variants) < 2:
        return []
    right = {(r["variant"], r["id"]): bool(r["right"]) for r in records if r["role"] == "sql"}
    ids = [i.id for i in items if (variants[0], i.id) in right]
    sets = [("all", ids)]
    if examples is not None:
        shown = [SimpleNamespace(id=f"example:{e['id']}", question=e["question"]) for e in examples.items]
        repeats = repeating([i for i in items if i.id in ids], shown)
        sets.append((f"without the {len(repeats)} that repeat an example's question", [i for i in ids if i not in repeats]))
    lines = [f"Paired against `{variants[0]}` on the same items (McNemar, exact):", "",
             "| variant | items | " + f"`{variants[0]}` right | right | better / worse | p |", "|---|---|---|---|---|---|"]
    for v in variants[1:]:
        for name, mine in sets:
            a, b = [right[(variants[0], i)] for i in mine], [right.get((v, i), False) for i in mine]
            worse, better, p = mcnemar(a, b)
            lines.append(f"| {v} ({name}) | {len(mine)} | {sum(a)} | {sum(b)} | {better} / {worse} | {p:.3f} |")
    return lines + [""]


if __name__ == "__main__":
    main()
