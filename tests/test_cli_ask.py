"""`rag ask` loads its retriever in a background thread while DSPy and the LMs are prepared (rag.cli.common.InBackground):
what that load raises still reaches the user as the one clean error line (a missing index, in a real process:
tests/test_cli_retrieval.py), and Ctrl-C during it still exits 130."""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

import rag.cli.cmd_ask
import rag.cli.common
from tests.catalogue_support import check, damaged_index, run_cli


def test_index_part_damaged_is_the_rebuild_error(tmp_path: Path):
    # dense.faiss is read by the background load (Retriever.warm_up), not by Index.load
    damaged_index("truncate-faiss")(tmp_path)
    res = run_cli("ask", "what does assert do?", "--index-dir", tmp_path / "idx", "--mode", "dense", "--no-cache")
    check(res, 1, r"^Error: Index at .*/idx is corrupt \(dense\.faiss: .*Rebuild it with: rag index .*--index-dir .*/idx")


def _waiting_for_the_load(thread: threading.Thread) -> bool:
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code.co_name == "result" and frame.f_code.co_filename == rag.cli.common.__file__:
            return True
        frame = frame.f_back
    return False


def test_ctrl_c_while_the_retriever_loads_exits_130(tmp_path: Path, monkeypatch):
    release = threading.Event()

    def slow_load(settings):  # Ctrl-C (a real SIGINT to the main thread) while it waits for this load
        main, deadline = threading.main_thread(), time.monotonic() + 60
        while not _waiting_for_the_load(main) and time.monotonic() < deadline:
            time.sleep(0.01)
        signal.pthread_kill(main.ident, signal.SIGINT)
        release.wait(60)

    monkeypatch.setattr(rag.cli.cmd_ask, "load_retriever", slow_load)
    # Python's own SIGINT handler, as in a new `rag` process: pytest itself may run with SIGINT ignored (SIG_IGN is
    # inherited by a job started in the background, as `cmd &` in a non-interactive shell does)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        res = run_cli("ask", "what does assert do?", "--index-dir", tmp_path / "none", "--no-cache")
    finally:
        release.set()
        signal.signal(signal.SIGINT, previous)
    check(res, 130, r"^Interrupted:")
