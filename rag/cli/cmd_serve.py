"""``rag serve``: the web page and its JSON API."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rag.cli.common import (
    app,
    check_readable,
    clean_warnings,
    settings_from,
)
from rag.errors import SieveError


@app.command("serve")
def serve_cmd(
    host: str = typer.Option("127.0.0.1", help="Address to listen on. Anything but loopback is reachable by others, "
                             "and there is no authentication."),
    port: int = typer.Option(8000, help="Port to listen on (0 picks a free one)."),
    runs: Optional[Path] = typer.Option(None, "--runs", readable=False, help="Folder of eval runs to browse (default: SIEVE_RUNS, "
                                        "else SIEVE_HOME/runs), or one run folder."),
    config: str = typer.Option("full", help="The configuration selected when the page opens (rag eval --config list)."),
    index_dir: Optional[Path] = typer.Option(None, readable=False, help="Index directory (default: see rag index --help)."),
    golden: Optional[Path] = typer.Option(None, readable=False, help="Golden set the example questions come from."),
    queue: int = typer.Option(8, "--queue", min=0, help="Questions that may wait for the model; more get HTTP 503."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Bypass the DSPy LM cache."),
    sets: Optional[list[str]] = typer.Option(None, "--set", help="Any setting as key=value, for every configuration."),
    review: Optional[Path] = typer.Option(None, "--review", readable=False, help="A golden set JSONL (rag golden draft "
                                          "wrote it) to review on the page, in a Review tab: each decision is "
                                          "written into it at once. Without it the server writes no file."),
    keep_sql: Optional[Path] = typer.Option(None, "--keep-sql", readable=False, help="A JSONL the page's \"Keep this "
                                            "query\" button appends a question and its SQL statement to, as a "
                                            "labelled example (as rag ask --keep-sql); use it as sql_examples."),
) -> None:
    """Serve a web page to ask questions and watch each decision stream in (retrieve, grade, rewrite, answer or
    refuse), and to browse evaluation runs and compiled artifacts. JSON API under /api/ (docs/guides/web.md).

    Examples:

        rag serve                                   # http://127.0.0.1:8000

        rag serve --port 8080 --runs ~/.cache/sieve/runs

        rag serve --config hybrid --set answerer_model=groq/openai/gpt-oss-120b

        rag serve --review mine.jsonl               # review a drafted golden set in the Review tab

        rag serve --index-dir ops/index --keep-sql my_sql.jsonl   # keep statements from the page
    """
    for path, flag in ((runs, "--runs"), (golden, "--golden"), (index_dir, "--index-dir"), (review, "--review")):
        check_readable(path, flag)  # before anything loads or binds
    from rag.lm.configure import configure_dspy

    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise SieveError(f"rag serve needs {exc.name}: pip install fastapi uvicorn (or reinstall Sieve: "
                         "pip install -e .)") from None
    from rag.serve import build_app, check_runs
    from rag.serve.goldenview import check_review
    from rag.serve.keeping import check_keep
    from rag.serve.server import serve_forever

    check_runs(runs)  # before anything loads or binds
    check_review(review)
    check_keep(keep_sql)
    clean_warnings()
    pairs = [*(sets or []), *([f"index_dir={index_dir}"] if index_dir else []), *(["cache=false"] if no_cache else [])]
    configure_dspy(settings_from(pairs))
    serve_forever(lambda: build_app(runs=runs, sets=pairs, config=config, golden=golden, max_waiting=queue, host=host,
                                    review=review, keep_sql=keep_sql),
                  host, port)
