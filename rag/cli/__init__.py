"""The ``rag`` command line: thin commands that parse options, call the library (``rag.api``) and print.

One module per command group (``cmd_index``, ``cmd_ask``, ``cmd_eval``, ``cmd_report``, ``cmd_compile``,
``cmd_models``, ``cmd_serve``); ``common`` holds the app and what they share; ``entry`` is the entry point (``rag.cli.main``).
"""

from rag.cli.entry import app, main

__all__ = ["app", "main"]
