"""The async side of a synchronous engine: each call runs in a worker thread (same limits, locks, ledger)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from dspy.lm15 import Request, Response, response_to_events


class ThreadedAsyncEngine:
    """Subclasses name ``sync_class``; ``load_state`` rebuilds the synchronous engine it wraps."""

    sync_class: ClassVar[type]
    supports_response_schema = True

    def __init__(self, sync: Any):
        self.sync = sync
        self.supported_params = getattr(sync, "supported_params", None)

    async def complete(self, request: Request) -> Response:
        return await asyncio.to_thread(self.sync.complete, request)

    async def stream(self, request: Request) -> AsyncIterator[Any]:
        for event in response_to_events(await self.complete(request)):
            yield event

    async def aclose(self) -> None:
        await asyncio.to_thread(self.sync.close)

    def dump_state(self) -> dict[str, Any]:
        return self.sync.dump_state()

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> "ThreadedAsyncEngine":
        return cls(cls.sync_class.load_state(state))
