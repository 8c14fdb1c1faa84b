"""Between DSPy's canonical ``dspy.lm15`` types and a chat-completions style backend.

Both Sieve engines (llama.cpp in-process, Groq over HTTP) speak OpenAI-shaped chat
messages. This module turns a ``Request`` into those messages and the requested output
format, and builds the ``Response`` DSPy expects back, with Sieve's per-call metadata
(latency, cost, notes) under ``provider_data["sieve"]``. :class:`ThreadedAsyncEngine` is the async side of those
synchronous engines: each call runs in a worker thread (same limits, locks, ledger).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, ClassVar

from dspy.lm15 import Adaptation, Message, Request, Response, TextPart, Usage, response_to_events

# What DSPy's adapters may send to a Sieve engine (capability hints for JSONAdapter).
SUPPORTED_PARAMS = frozenset({"temperature", "max_tokens", "top_p", "seed", "stop", "response_format"})


@dataclass(frozen=True)
class OutputFormat:
    """What the caller asked the text to be: free ``text``, any ``json_object``, or ``json_schema``."""

    kind: str  # "text" | "json_object" | "json_schema"
    schema: dict[str, Any] | None = None
    name: str = "response"
    strict: bool = False


def output_format(request: Request) -> OutputFormat:
    """Read ``request.config.response_format`` (canonical shape, see lm15 INV-050)."""
    fmt = request.config.response_format
    if not fmt:
        return OutputFormat("text")
    if fmt.get("type") == "json_schema" and isinstance(fmt.get("schema"), dict):
        return OutputFormat("json_schema", fmt["schema"], fmt.get("name") or "response", bool(fmt.get("strict")))
    return OutputFormat("json_object")


def _text_of(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, tuple) else getattr(content, "parts", ())
    texts = []
    for part in parts:
        if not isinstance(part, TextPart):
            raise ValueError(f"{where}: only text parts are supported by Sieve's engines, got a {part.type!r} part")
        texts.append(part.text)
    return "\n".join(texts)


def chat_messages(request: Request) -> list[dict[str, str]]:
    """``[{"role": ..., "content": ...}]`` with the system prompt first; text parts only."""
    messages = []
    if request.system is not None:
        messages.append({"role": "system", "content": _text_of(request.system, "system")})
    for i, message in enumerate(request.messages):
        role = {"developer": "system"}.get(message.role, message.role)
        if role not in ("system", "user", "assistant"):
            raise ValueError(f"messages[{i}]: role {message.role!r} is not supported by Sieve's engines")
        messages.append({"role": role, "content": _text_of(message, f"messages[{i}]")})
    return messages


def build_response(
    *,
    model: str,
    text: str,
    input_tokens: int | None,
    output_tokens: int | None,
    finish_reason: str,
    sieve: dict[str, Any],
    response_id: str | None = None,
    notes: tuple[Adaptation, ...] = (),
) -> Response:
    """A one-message text ``Response``; ``sieve`` lands in ``provider_data["sieve"]`` (JSON only)."""
    finish = finish_reason if finish_reason in ("stop", "length", "tool_call", "content_filter", "error") else "stop"
    return Response(
        id=response_id,
        model=model,
        message=Message.assistant([TextPart(text or "")]),
        finish_reason=finish,
        usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens),
        provider_data={"sieve": sieve},
        adaptations=notes,
    )


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
