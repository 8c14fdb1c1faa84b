"""Where Sieve's files are: its data home, and the project files it ships (golden sets, labels, artifacts).

Two roots, never the working directory:

- :func:`sieve_home` is where Sieve *writes*: indexes, eval runs, the LM cache, the usage ledger, labels you add.
  ``$SIEVE_HOME`` overrides the per-user cache folder.
- :data:`PROJECT_ROOT` is the source checkout (an editable install), which holds ``golden/``, ``artifacts/`` and
  ``notebooks/``. Sieve reads from it; only an explicit ``--out``/``--store``/``--labels`` writes there.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

PROJECT_ROOT = Path(__file__).resolve().parents[1]
GOLDEN_FILE = "python_ref.jsonl"
LABELS_FILE = "judge_labels.jsonl"


def sieve_home() -> Path:
    """Root for Sieve's data: indexes, eval runs, LM cache, usage ledger. ``$SIEVE_HOME`` overrides."""
    return Path(os.environ.get("SIEVE_HOME") or platformdirs.user_cache_dir("sieve")).expanduser()


def project_path(*parts: str) -> Path:
    """A file or folder of the project (``golden/``, ``artifacts/``, ``notebooks/``), wherever the command runs."""
    return PROJECT_ROOT.joinpath(*parts)


def golden_path(path: str | os.PathLike | None = None) -> Path:
    """The golden set to read: ``path`` when given, else the built-in corpus's ``golden/python_ref.jsonl``."""
    return Path(path) if path is not None else project_path("golden", GOLDEN_FILE)


def labels_path(path: str | os.PathLike | None = None) -> Path:
    """The committed human judge labels (``golden/judge_labels.jsonl``), or ``path`` when given."""
    return Path(path) if path is not None else project_path("golden", LABELS_FILE)


def user_labels_path() -> Path:
    """Where ``rag calibrate`` keeps labels you add when no ``--store`` is given: inside :func:`sieve_home`."""
    return sieve_home() / "labels" / LABELS_FILE
