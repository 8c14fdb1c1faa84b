"""``rag chat``: questions and follow-ups in the terminal; each follow-up is made standalone from the turns before it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from rag.cli.cmd_ask import print_answer
from rag.cli.common import InBackground, app, check_readable, clean_warnings, err, load_retriever, settings_from

COMMANDS = {"/clear": "forget the conversation so far", "/exit": "leave (or Ctrl-D)"}


@app.command()
def chat(
    index_dir: Optional[Path] = typer.Option(None, readable=False, help="Index directory (default: see rag index --help)."),
    trace: bool = typer.Option(False, "--trace", help="Show each decision (condense, retrieve, grade, ...) on stderr."),
    artifact: Optional[str] = typer.Option(None, help="Use this compiled artifact (name in artifacts/ or a path)."),
    no_artifact: bool = typer.Option(False, "--no-artifact", help="Run the uncompiled signatures."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Bypass the DSPy LM cache."),
    sets: Optional[list[str]] = typer.Option(None, "--set", help="Any setting as key=value, e.g. --set history_turns=5."),
) -> None:
    """Ask questions and follow-ups; each answer goes to stdout, as rag ask prints it.

    A follow-up ("and for classes?", "what does it return?") is first rewritten into a standalone question from
    the last history_turns turns (default 3, and at most history_chars characters); that question, shown on
    stderr, is what is searched, graded and answered. Type /clear to start over, /exit or Ctrl-D to leave. The
    conversation is kept only while the command runs.

    Examples:

        rag chat

        rag chat --trace --index-dir ops/index

        printf 'What does nonlocal do?\\nAnd for module-level names?\\n' | rag chat
    """
    clean_warnings()
    check_readable(index_dir, "--index-dir")
    settings = settings_from(sets, index_dir=index_dir, artifact=artifact, cache=False if no_cache else None)
    retriever_load = InBackground(lambda: load_retriever(settings), name="sieve-load-retriever")
    from rag.api import open_agent

    agent = open_agent(settings, use_artifact=not no_artifact, retriever=retriever_load.result)
    from rag.agent.program import load_models

    load_models(agent.program)  # the model loads here, not inside the first node's timing (--trace)
    interactive = sys.stdin.isatty()
    if interactive:
        err(f"Sieve chat over {agent.retriever.index.dir} ({agent.description}). "
            + "; ".join(f"{c}: {what}" for c, what in COMMANDS.items()))
    history: list[dict[str, str]] = []
    while True:
        if interactive:
            typer.echo("> ", err=True, nl=False)
        line = sys.stdin.readline()
        if not line:  # end of input (Ctrl-D, or the end of a piped file)
            break
        question = line.strip()
        if not question:
            continue
        if question == "/exit":
            break
        if question == "/clear":
            history.clear()
            err("(conversation cleared)")
            continue
        answer = agent(question, history=history)
        pred = answer.prediction
        standalone = next((s.rewrite for s in pred.trace.steps if s.node == "condense" and s.rewrite), None)
        if standalone and standalone != question:
            err(f"(searched as: {standalone})")
        if trace:
            err(pred.trace.render())
        print_answer(pred)
        typer.echo("")
        history.append({"question": question, "answer": answer.text})
        del history[:-max(settings.history_turns, 1)]  # the condenser reads no more than these
