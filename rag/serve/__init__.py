"""``rag serve``: a web page to ask questions and watch each decision stream in, and to browse evaluation runs
and compiled artifacts.

- ``programs``  named configurations and artifact choices, the programs built for them (as ``rag ask`` builds them)
- ``stream``    questions as jobs: the bounded queue, the worker, the events of each step
- ``evalview``  runs and artifacts as JSON, through rag.report.analysis, rag.report.markdown, rag.report.compare and rag.report.plots
- ``recordings`` eval runs' answers to a question, played back by the page when the server is busy or loading
- ``goldenview`` ``rag serve --review FILE``: a golden set's items, one at a time, and a human's decisions written to FILE
- ``keeping``   ``rag serve --keep-sql FILE``: a statement the page showed, run again and kept as a labelled SQL example
- ``app``       the FastAPI app: the page and the JSON API
- ``server``    uvicorn on a bound socket, in the foreground or on a thread
- ``static/``   the page: HTML, CSS and JavaScript modules, served as they are
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

PER_TYPE = 2  # example questions shown per question type


__all__ = ["build_app", "check_runs", "example_questions"]


def check_runs(runs: Path | None) -> None:
    """``rag serve --runs`` must name a folder that exists (a folder of runs, or one run folder): a file or a
    missing path is an InputError naming the flag, not a page that silently shows no runs."""
    from rag.errors import InputError

    if runs is None:
        return
    path = Path(runs).expanduser()
    if path.is_dir():
        return
    what = "is not a folder" if path.exists() else "does not exist"
    raise InputError(f"--runs {runs} {what}; pass the folder rag eval writes its runs in (default SIEVE_HOME/runs) "
                     "or one run folder")


def example_questions(golden: Path, per_type: int = PER_TYPE,
                      recorded: Callable[[list[str]], Iterable[str]] | None = None) -> list[dict[str, Any]]:
    """A few golden questions of each type (answerable, vague, unanswerable); [] without a file. First those with a
    recorded run (``recorded``: the questions among those given that have one, rag.serve.recordings), so the page
    can play one back when the model is busy; then the dev split."""
    from rag.errors import SieveError
    from rag.eval.golden import TYPES, load_golden

    if not Path(golden).is_file():
        print(f"Warning: no golden set at {golden}; the page shows no example questions", file=sys.stderr)
        return []
    try:
        items = load_golden(golden)
    except SieveError as exc:
        print(f"Warning: example questions not loaded: {exc}", file=sys.stderr)
        return []
    have = set(recorded([it.question.strip() for it in items])) if recorded is not None else set()
    items.sort(key=lambda it: (it.question.strip() not in have, it.split != "dev"))
    return [{"type": t, "question": it.question, "id": it.id}
            for t in TYPES for it in [i for i in items if i.type == t][:per_type]]


def build_app(*, runs: Path | None = None, sets: list[str] | None = None, config: str = "full",
              golden: Path | None = None, workers: int = 1, max_waiting: int = 8, host: str = "127.0.0.1",
              review: Path | None = None, keep_sql: Path | None = None) -> Any:
    """The app ``rag serve`` runs: the real programs (built on first use), runs under ``runs`` (default
    ``$SIEVE_RUNS`` or ``SIEVE_HOME/runs``), example questions from ``golden``; ``host`` is the address it listens
    on (the Host names it answers for, rag.serve.guard); ``review`` the golden file of the Review tab and
    ``keep_sql`` the file statements are kept in (none without them: the server writes no file)."""
    from rag.paths import golden_path
    from rag.report.runset import default_paths
    from rag.serve.app import create_app
    from rag.serve.evalview import RunBrowser
    from rag.serve.goldenview import GoldenReview
    from rag.serve.keeping import KeptQueries
    from rag.serve.programs import Programs

    check_runs(runs)
    programs = Programs(sets, default_config=config)
    settings = programs.settings(config)
    golden = golden_path(golden)
    browser = RunBrowser(runs or default_paths()[0], golden_dir=Path(golden).parent,
                         artifacts_dir=Path(settings.artifacts_dir))
    reviewing = GoldenReview(review, index=programs.index) if review is not None else None
    from rag.serve.recordings import find

    examples = example_questions(golden, recorded=lambda questions: find(browser.folders(), questions, full=False))
    return create_app(programs, browser, examples=examples, workers=workers,
                      max_waiting=max_waiting, host=host, review=reviewing,
                      keep=KeptQueries(keep_sql, programs.index) if keep_sql is not None else None)
