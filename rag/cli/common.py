"""What every ``rag`` command shares: the Typer app, stderr diagnostics, flag checks, and the settings a command's
flags override (flags > ``SIEVE_*`` env > config file > defaults, as in rag.config)."""

from __future__ import annotations

from typing import Optional

import typer
import typer.core

from rag.config import Settings, load_settings
from rag.ingest.jsonl import dump_json  # noqa: F401 - re-exported: the CLI's JSON on stdout


class Interrupted(Exception):
    """Ctrl-C inside a command, carried past click (which would print "Aborted!", exit 1) to main()."""


COMMAND_ORDER = ("index", "search", "ask", "eval", "golden", "report", "calibrate", "compile", "artifacts", "models", "usage",
                 "serve", "notebook")  # as `rag --help` lists them: build, use, measure, improve, inspect


class _Group(typer.core.TyperGroup):
    def list_commands(self, ctx):
        return sorted(self.commands, key=lambda n: COMMAND_ORDER.index(n) if n in COMMAND_ORDER else len(COMMAND_ORDER))

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted() from None


app = typer.Typer(
    cls=_Group,
    name="rag",
    help="Sieve: a self-reflective RAG agent that grades its retrieval, rewrites failed queries and refuses rather than guesses.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def err(message: str) -> None:
    """Diagnostics and progress go to stderr."""
    typer.echo(message, err=True)


class _Stderr:
    """sys.stderr, noting whether its last write left a line open: a progress line ("\\rreading files 3/9", a tqdm
    bar) is drawn without a newline, and a warning written then would be glued to it."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.line_open = False

    def write(self, text):
        if isinstance(text, str) and text:
            self.line_open = not text.endswith("\n")
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def clean_warnings() -> None:
    """Show library warnings (skipped files, cut queries) as one plain stderr line each, on a line of its own even
    while a progress line is drawn (the progress goes on below it)."""
    import sys
    import warnings

    if not isinstance(sys.stderr, _Stderr):
        sys.stderr = _Stderr(sys.stderr)

    def one_line(message, category, *args, **kwargs) -> str:
        return f"{chr(10) if getattr(sys.stderr, 'line_open', False) else ''}Warning: {message}\n"

    warnings.formatwarning = one_line


def shown(text: object) -> str:
    """``text`` for one line of a terminal: a newline, carriage return, tab, escape or other unprintable character
    in an id or a title is written as its escape (``\\n``), so it cannot split a line or move the cursor."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def check_readable(path, flag: str) -> None:
    """An input path that exists but cannot be read is an InputError naming it and the flag (``Error:``, exit 1),
    checked before any work; typer's own check (``readable=True``) would print a usage box and exit 2. A missing
    path is left to the command, which says what it expected there."""
    import os
    import stat
    from pathlib import Path

    from rag.errors import InputError

    if path is None:
        return
    path = Path(path).expanduser()
    try:
        is_dir = stat.S_ISDIR(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        raise InputError(f"{path}: cannot reach it ({exc.strerror}); make the folders above it searchable "
                         f"(chmod u+x) or give {flag} another path") from None
    if not os.access(path, os.R_OK | (os.X_OK if is_dir else 0)):
        kind, mode = ("folder", "u+rx") if is_dir else ("file", "u+r")
        raise InputError(f"{path}: cannot read this {kind} (permission denied); make it readable (chmod {mode}) or "
                         f"give {flag} another {kind}")


_ON_INTERRUPT = [""]  # what main() says on Ctrl-C: what was kept and how to resume (set by each command)


def on_interrupt(note: str) -> None:
    _ON_INTERRUPT[0] = note


def at_least(minimum: int, **flags: Optional[int]) -> None:
    """A flag below ``minimum`` is an error naming the flag (not the setting behind it)."""
    from rag.errors import InputError

    for name, value in flags.items():
        if value is not None and value < minimum:
            raise InputError(f"--{name.replace('_', '-')} must be >= {minimum}, got {value}")


def quiet_loading() -> None:
    """No model-loading progress bars (transformers' "Loading weights", the hub's download bars)."""
    import os

    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:
        pass


def settings_from(sets: Optional[list[str]] = None, **flags) -> Settings:
    """Flags given on the command line override env vars and the config file (rag.config)."""
    from rag.config import parse_assignments

    return load_settings({**parse_assignments(sets), **{k: v for k, v in flags.items() if v is not None}})


class InBackground:
    """``work()`` in a daemon thread, started at once; :meth:`result` waits for it and returns its value, or raises
    here what it raised (a SieveError then becomes the usual one-line error). Daemon: Ctrl-C in the main thread,
    which :meth:`result`'s wait lets through, exits without waiting for the work to finish."""

    def __init__(self, work, name: str) -> None:
        import threading

        self._outcome: tuple[bool, object] = (False, None)
        self._thread = threading.Thread(target=self._run, args=(work,), name=name, daemon=True)
        self._thread.start()

    def _run(self, work) -> None:
        try:
            self._outcome = (True, work())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the waiting thread
            self._outcome = (False, exc)

    def result(self):
        self._thread.join()
        done, value = self._outcome
        if not done:
            raise value
        return value


def load_retriever(settings: Settings):
    """The retriever for ``settings`` with its index parts and query encoder loaded (rag.retrieval.retriever.Retriever.warm_up)."""
    from rag.retrieval.retriever import Retriever

    return Retriever.from_settings(settings).warm_up()
