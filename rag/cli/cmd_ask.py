"""``rag ask``: one question answered with numbered sources, or refused."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from rag.cli.common import (
    InBackground,
    app,
    at_least,
    check_readable,
    clean_warnings,
    err,
    load_retriever,
    settings_from,
)
from rag.errors import InputError

SHOWN_ROWS = 5  # rows of a SQL result printed under its source


@app.command()
def ask(
    question: str = typer.Argument(..., help="The question to answer."),
    json_out: bool = typer.Option(False, "--json", help="Print the full prediction and trace as JSON."),
    trace: bool = typer.Option(False, "--trace", help="Show each decision (retrieve, grade, rewrite, answer) on stderr."),
    mode: Optional[str] = typer.Option(None, help="Retrieval mode: bm25, dense or hybrid."),
    k: Optional[int] = typer.Option(None, "--k", help="Passages shown to the grader and answerer."),
    max_rewrites: Optional[int] = typer.Option(None, help="Rewrites before refusing (default 2)."),
    reflection: Optional[bool] = typer.Option(None, "--reflection/--no-reflection", help="Grade and rewrite (default), or retrieve-then-answer."),
    index_dir: Optional[Path] = typer.Option(None, readable=False, help="Index directory (default: see rag index --help)."),
    artifact: Optional[str] = typer.Option(None, help="Use this compiled artifact (name in artifacts/ or a path)."),
    no_artifact: bool = typer.Option(False, "--no-artifact", help="Run the uncompiled signatures."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Bypass the DSPy LM cache."),
    sets: Optional[list[str]] = typer.Option(None, "--set", help="Any setting as key=value, e.g. --set grader_model=groq/openai/gpt-oss-20b."),
    where: Optional[list[str]] = typer.Option(None, "--where", help="Search only passages whose metadata matches, e.g. --where category=travel (repeat, or comma-separate values)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Say on stderr which prompts and models run, and why compiled artifacts were used or skipped."),
    keep_sql: Optional[Path] = typer.Option(None, "--keep-sql", help="After the answer, keep the question and the SQL statement that ran as a labelled example in this JSONL (asks first); use the file as sql_examples."),
    yes: bool = typer.Option(False, "--yes", "-y", help="With --keep-sql: keep without asking."),
) -> None:
    """Answer a question from the indexed documents, with numbered sources, or refuse.

    Examples:

        rag ask "What does the nonlocal statement do?"

        rag ask "How do I make my object work with len()?" --trace

        rag ask "What does asyncio.gather return?" --json > answer.json

        rag ask "What is a lambda?" --no-reflection --mode bm25

        rag ask "What is a lambda?" --verbose   # which artifact ran, or why none did

        rag ask "What is the hotel limit in Boston?" --where category=travel

        rag ask "How many open claims exceed the amount that requires manager approval?" --index-dir ops/index

        rag ask "How many claims are open?" --index-dir ops/index --keep-sql my_sql.jsonl   # then --set sql_examples=my_sql.jsonl

    An index built with tables (rag index, rag demo ops) routes each question to the documents, the tables or
    both; answers cite SQL results as [sql:1], shown with their statement, and the grounding critic flags an
    answer whose claims the evidence does not state as low confidence.
    """
    clean_warnings()
    at_least(1, k=k)
    at_least(0, max_rewrites=max_rewrites)
    check_readable(index_dir, "--index-dir")  # before the index or any model loads
    if keep_sql is not None and not yes and not sys.stdin.isatty():
        raise InputError("--keep-sql asks before it keeps a statement, and stdin is not a terminal; pass --yes to keep "
                         "it without asking")
    settings = settings_from(sets, mode=mode, top_k=k, max_rewrites=max_rewrites, reflection=reflection,
                         index_dir=index_dir, artifact=artifact, cache=False if no_cache else None)
    # The index, its search libraries and the query encoder load while DSPy is imported and the LMs are made.
    retriever_load = InBackground(lambda: load_retriever(settings), name="sieve-load-retriever")
    from rag.api import open_agent

    agent = open_agent(settings, use_artifact=not no_artifact, retriever=retriever_load.result)  # waited for after DSPy loads
    from rag.agent.program import load_models

    load_models(agent.program)  # the model loads here, not inside the first node's timing (--trace)
    if where:
        from rag.retrieval.filters import parse_where

        agent.retriever.where = parse_where(where)
    if verbose:
        for message in agent.program.messages:
            err(message)
        err(f"Using {agent.description}; models: " + ", ".join(f"{r}={m}" for r, m in agent.program.models.items()))
    answer = agent(question)
    pred = answer.prediction
    if trace:
        err(pred.trace.render())
    if json_out:
        from rag.cli.common import dump_json

        data = answer.to_dict()
        data["artifact"] = agent.program.artifact.name if agent.program.artifact else None
        typer.echo(dump_json(data, indent=2, ensure_ascii=False))
    else:
        print_answer(pred)
    if keep_sql is not None:
        keep(question, pred, keep_sql, ask=not yes)


def keep(question: str, pred, path: Path, *, ask: bool) -> None:
    """Keep the statement that answered ``question`` in ``path`` as a labelled SQL example (rag.data.labelled), after
    asking on stderr unless ``ask`` is False."""
    from rag.data.labelled import keep_example, kept_statement

    ran = next((s for s in reversed(pred.trace.steps) if s.node == "sql" and s.result), None)
    if ran is None:
        raise InputError("--keep-sql: no SQL statement ran for this question, so there is nothing to keep (an index "
                         "with tables routes data questions to them: rag index --help)")
    statement = kept_statement(ran.sql, ran.result["sql"])
    rows = None if ran.result.get("truncated") else ran.result["rows"]
    if ask:
        err(f"\nStatement: {statement}")
        err("".join(f"  {' | '.join(map(str, row))}\n" for row in ran.result["rows"][:SHOWN_ROWS]).rstrip("\n")
            or "  (no rows)")
        if not typer.confirm(f"Keep it as a labelled example in {path}?", default=False, err=True):
            err("Not kept.")
            return
    route = next((s.route for s in pred.trace.steps if s.node == "route"), None)
    item_id = keep_example(path, question, statement, rows, route, answer=pred.answer)
    err(f"Kept as {item_id} in {path} (split train). The SQL writer sees it with --set sql_examples={path}, or "
        "sql_examples in sieve.toml (docs/guides/data.md).")


def print_answer(pred) -> None:
    """An answer on stdout as ``rag ask`` prints it: the text, a low-confidence flag, the numbered sources (or the
    closest passages of a refusal) with their SQL results, and the passages read but not cited."""
    from rag.agent.critique import flagged_by
    from rag.ingest.chunking import page_label

    typer.echo(pred.answer)
    if getattr(pred, "low_confidence", False):
        typer.echo(f"\nLow confidence, flagged by {flagged_by(pred.trace)}: {pred.critic_reason}.")
    listed = pred.sources if not pred.refused else pred.closest
    if listed:
        typer.echo("\nSources:" if not pred.refused else "\nClosest passages (judged not relevant):")
        for i, src in enumerate(listed, 1):
            where = ", ".join(x for x in (src["title"] or src["chunk_id"], page_label(src)) if x)
            typer.echo(f"  [{i}] {where} ({src['chunk_id']})")
            if src.get("sql"):  # a SQL result: the statement that ran, and its first rows
                typer.echo(f"      {src['sql']}")
                typer.echo("".join(f"      {' | '.join(map(str, row))}\n" for row in src["rows"][:SHOWN_ROWS])
                           .rstrip("\n") or "      (no rows)")
                more = len(src["rows"]) - SHOWN_ROWS
                if more > 0 or src.get("truncated"):
                    typer.echo(f"      ... {max(more, 0)} more row(s) fetched"
                               + (f"; more not fetched (sql_rows = {len(src['rows'])})" if src.get("truncated") else "")
                               + " (--json has every fetched row)")
    uncited = getattr(pred, "uncited", None) or []
    if uncited:
        typer.echo("\nAlso read, not cited:")
        for src in uncited:
            where = ", ".join(x for x in (src["title"] or src["chunk_id"], page_label(src)) if x)
            typer.echo(f"  - {where} ({src['chunk_id']})")
