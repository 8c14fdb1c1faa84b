"""Count the LM calls an optimization really makes (cache hits included), for the artifact's manifest."""

from __future__ import annotations

import threading
from typing import Any

from dspy.utils.callback import BaseCallback


class CallCounter(BaseCallback):
    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        with self._lock:
            self.calls += 1
