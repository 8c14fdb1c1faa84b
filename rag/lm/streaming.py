"""The text of a model's reply as it is written: a listener for the calls made in one thread, and a reader that
pulls one output field's value out of a reply that is still growing.

``with listen(on_text, on_call=..., cancelled=...)``: within the block, an engine passes each piece of text the model
writes to ``on_text(delta)``, and calls ``on_call()`` when a call (or a hosted call's next attempt) starts: a reply's
pieces join to the text of the call since its last ``on_call``. The listener is a context variable: thread- and
task-local (``asyncio.to_thread`` carries it into the async engines' worker threads), so only the calls made inside
the block, on this thread, are heard. Both of Sieve's engines stream: the embedded one (``rag.lm.local``) reads
llama.cpp's tokens as they are generated, the hosted one (``rag.lm.groq``, Groq or any OpenAI-compatible server)
asks the server for a stream. Without a listener each runs exactly as it always has. What cannot stream (the DSPy
cache, a LiteLLM model string) calls neither: the reply arrives whole, as before.

``cancelled()``, when given, is asked before a call starts and at every token (embedded) or streamed piece (hosted):
once it says True the generation ends there (llama.cpp stops at its next token, the hosted stream is closed) and the
call raises ``rag.errors.Cancelled``; the cut reply is thrown away, never cached.

``FieldStream("answer")`` reads what a reply holds so far of one field, in either of the shapes DSPy's adapters ask
for: a JSON object (``{"cited_ids": [...], "answer": "It wraps [with#000]..."}``, escapes decoded) or the chat
adapter's ``[[ ## answer ## ]]`` sections. ``rag serve`` uses it to show the answer while the model writes it.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from rag.errors import Cancelled

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Listener:
    on_text: Callable[[str], None]
    on_call: Callable[[], None] | None = None
    cancelled: Callable[[], bool] | None = None

    def cancel_requested(self) -> bool:
        """Whether the caller stopped the call; False when there is no ``cancelled`` or it fails (logged)."""
        if self.cancelled is None:
            return False
        try:
            return bool(self.cancelled())
        except Exception:  # noqa: BLE001 - a faulty check must not cost the answer
            log.warning("the cancel check failed; it is asked nothing more", exc_info=True)
            object.__setattr__(self, "cancelled", None)  # once, not at every token
            return False


_LISTENER: contextvars.ContextVar[Listener | None] = contextvars.ContextVar("sieve_text_listener", default=None)


@contextlib.contextmanager
def listen(on_text: Callable[[str], None], on_call: Callable[[], None] | None = None,
           cancelled: Callable[[], bool] | None = None) -> Iterator[Listener]:
    """Within the block, streaming engines pass the text they generate to ``on_text`` and stop a call once
    ``cancelled()`` says so (thread- and task-local)."""
    listener = Listener(on_text, on_call, cancelled)
    token = _LISTENER.set(listener)
    try:
        yield listener
    finally:
        _LISTENER.reset(token)


def current() -> Listener | None:
    """The listener of this thread or task, if any."""
    return _LISTENER.get()


def raise_if_cancelled(listener: Listener | None, what: str) -> None:
    """Raise ``rag.errors.Cancelled`` (saying ``what`` was stopped) when ``listener``'s caller stopped the call."""
    if listener is not None and listener.cancel_requested():
        raise Cancelled(f"{what}: stopped by the caller")


# ---------------------------------------------------------------------------------------------- reading a field
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_END_OBJECT = re.compile(r"\s*}\s*")
_NEXT_KEY = re.compile(r'\s*,\s*"[A-Za-z_][A-Za-z0-9_ ]{0,40}"\s*:')
# what may still become one of the two above as more text arrives
_MAYBE_END = re.compile(r'\s*(?:,\s*(?:"[A-Za-z0-9_ ]{0,41}(?:"\s*)?)?)?')
_CHAT_MARK = "[[ ## "


def partial_field(text: str, name: str) -> tuple[str | None, bool]:
    """(the value of output field ``name`` so far, whether it is complete) in a reply that may still be growing;
    (None, False) while the field has not begun (or the reply is in neither shape).

    Only text that can no longer change is returned: an escape cut in half, a quote that may end the string, or the
    start of a ``[[ ## `` marker waits for the next piece. Complete means that what follows the field has begun (the
    next key, the next section); a field that ends the reply is known to be whole only when the call ends."""
    start = text.lstrip()
    if start.startswith("```"):  # a fenced JSON object
        start = start[start.find("\n") + 1:] if "\n" in start else ""
    if start.startswith("{"):
        return _json_field(start, name)
    if _CHAT_MARK in text:
        return _chat_field(text, name)
    return None, False


def _json_field(text: str, name: str) -> tuple[str | None, bool]:
    """Scan the top level of a (partial) JSON object for the key ``name`` and read its string value."""
    depth, i, expect_key = 0, 0, False
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            if depth == 1 and expect_key:
                key, end = _read_string(text, i + 1)
                if end is None:
                    return None, False
                colon = re.compile(r"\s*:\s*").match(text, end)
                if colon is None:
                    return None, False
                i = colon.end()
                if key == name:
                    if i >= n:
                        return None, False
                    if text[i] != '"':
                        return None, False  # not a string: nothing to show while it is written
                    return _read_value(text, i + 1)
                expect_key = False
                continue
            _, end = _read_string(text, i + 1)
            if end is None:
                return None, False
            i = end
            continue
        if c in "{[":
            depth += 1
            expect_key = depth == 1
        elif c in "}]":
            depth -= 1
            if depth <= 0:
                return None, False
        elif c == "," and depth == 1:
            expect_key = True
        i += 1
    return None, False


def _read_string(text: str, i: int) -> tuple[str, int | None]:
    """The string that starts at ``text[i]`` (after its opening quote): (its value, the index after its closing
    quote), or (as much as is certain, None) when it does not end yet."""
    out: list[str] = []
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            if i + 1 >= n:
                return "".join(out), None
            e = text[i + 1]
            if e == "u":
                code, used = _unicode_escape(text, i)
                if code is None:
                    return "".join(out), None
                out.append(code)
                i += used
                continue
            out.append(_ESCAPES.get(e, e))
            i += 2
            continue
        if c == '"':
            return "".join(out), i + 1
        out.append(c)
        i += 1
    return "".join(out), None


def _unicode_escape(text: str, i: int) -> tuple[str | None, int]:
    """A ``\\uXXXX`` escape at ``text[i]`` (a surrogate pair as one character; a lone surrogate as U+FFFD):
    (the text, characters used), or (None, 0) when it is not complete yet."""
    hexa = text[i + 2:i + 6]
    if len(hexa) < 4:
        return None, 0
    try:
        code = int(hexa, 16)
    except ValueError:
        return text[i:i + 6], 6  # not an escape after all: as written
    if 0xDC00 <= code < 0xE000:
        return "\ufffd", 6
    if not 0xD800 <= code < 0xDC00:
        return chr(code), 6
    after = text[i + 6:i + 12]  # a high surrogate: its low half follows
    if len(after) < 6 and "\\u".startswith(after[:2]):
        return None, 0
    if after.startswith("\\u"):
        try:
            low = int(after[2:], 16)
        except ValueError:
            low = 0
        if 0xDC00 <= low < 0xE000:
            return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)), 12
    return "\ufffd", 6


def _read_value(text: str, i: int) -> tuple[str, bool]:
    """The answer's string value from ``text[i]`` on, read as ``rag.lm.grammar.close_last_string`` reads the embedded
    engine's free last string, which may hold raw double quotes (``open_last_string``): a quote that is not escaped
    ends the value when the next key follows it (complete), and when ``}`` and nothing more follows it (at the end
    of the reply: the reply may still go on, so the value is not complete yet); followed by anything else it is part
    of the text. While it could still be either, the value stops before it."""
    out: list[str] = []
    while True:
        part, end = _read_string(text, i)
        out.append(part)
        if end is None:
            return "".join(out), False
        rest = text[end:]
        if _NEXT_KEY.match(rest):
            return "".join(out), True
        if _END_OBJECT.fullmatch(rest) or _MAYBE_END.fullmatch(rest):
            return "".join(out), False
        out.append('"')
        i = end


def _chat_field(text: str, name: str) -> tuple[str | None, bool]:
    """The ``[[ ## name ## ]]`` section of a chat-adapter reply so far, ending at the next ``[[ ## `` marker."""
    mark = f"[[ ## {name} ## ]]"
    at = text.find(mark)
    if at < 0:
        return None, False
    body = text[at + len(mark):]
    end = body.find(_CHAT_MARK)
    if end >= 0:
        return body[:end].strip(), True
    hold = next((k for k in range(len(_CHAT_MARK) - 1, 0, -1) if body.endswith(_CHAT_MARK[:k])), 0)
    return body[:len(body) - hold].strip(), False


class FieldStream:
    """One field's value as a reply grows: ``feed(delta)`` returns the value so far when it changed or is complete
    (the last value, once), else None.
    ``start()`` begins a new reply (a call made again: the value starts over)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.start()

    def start(self) -> None:
        self.text = ""
        self.value: str | None = None
        self.complete = False

    def feed(self, delta: str) -> str | None:
        if self.complete or not delta:
            return None
        self.text += delta
        value, complete = partial_field(self.text, self.name)
        changed = value is not None and (value != self.value or complete)
        self.value, self.complete = value, complete
        return value if changed else None
