"""Fit a chat prompt into a model's context window by cutting the longest input field.

DSPy renders a call as a system message plus user messages whose inputs are marked
``[[ ## field ## ]]`` and which end with the output instructions. When the prompt does not
fit, the longest user message is shortened: inside it the longest field (the retrieved
context, whose passages come in rank order) loses its *tail*, so the best-ranked passages
and the closing instructions survive. A marker says how much was cut; the caller records it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

FIELD_MARKER = re.compile(r"\[\[ ## [^\]#]+ ## \]\]")
MESSAGE_OVERHEAD = 8  # chat-template tokens per message (role markers, separators)
MIN_DEMO_FIELD = 200  # a demo's longest field is cut to no less than this many characters
CHARS_PER_TOKEN = 3.0  # an estimate on the safe side where the model's own tokenizer is not at hand (hosted)


@dataclass(frozen=True)
class Fit:
    """The messages to send and what was cut from them (``dropped_tokens == 0``: nothing)."""

    messages: list[dict[str, str]]
    prompt_tokens: int
    dropped_tokens: int = 0
    field: str | None = None

    @property
    def note(self) -> str | None:
        if not self.dropped_tokens:
            return None
        where = f"field '{self.field}'" if self.field else "the longest message"
        return f"context window: cut {self.dropped_tokens} tokens from the end of {where} (lowest-ranked text first)"


def token_counter(lm: object) -> tuple[Callable[[str], int], bool]:
    """A function counting ``lm``'s tokens in a text, and whether it is exact: the embedded model's own tokenizer
    (``count_tokens`` of its engine), else an estimate of ``CHARS_PER_TOKEN`` characters a token."""
    count = getattr(getattr(lm, "_engine_spec", None), "count_tokens", None)
    if callable(count):
        return count, True
    return (lambda text: -(-len(text) // int(CHARS_PER_TOKEN))), False


def count_prompt(messages: list[dict[str, str]], count: Callable[[str], int]) -> int:
    """Tokens the messages take in the prompt, chat-template overhead included (an upper estimate)."""
    return sum(count(m["content"]) + MESSAGE_OVERHEAD for m in messages) + MESSAGE_OVERHEAD


def _longest_span(text: str) -> tuple[int, int, str | None]:
    """(start, end, field name) of the longest ``[[ ## field ## ]]`` body, or of the whole text.

    The text after the last blank line (DSPy's closing output instructions) is never part of a span.
    """
    tail = text.rfind("\n\n")
    protected = tail if tail > 0 else len(text)
    marks = [m for m in FIELD_MARKER.finditer(text) if m.start() < protected]
    if not marks:
        return 0, protected, None
    spans = []
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else protected
        spans.append((end - mark.end(), mark.end(), end, mark.group(0)[6:-6].strip()))
    _, start, end, name = max(spans)
    return start, end, name


def _span_text(text: str) -> str:
    start, end, _ = _longest_span(text)
    return text[start:end]


def fit_messages(
    messages: list[dict[str, str]],
    count: Callable[[str], int],
    budget: int,
    *,
    max_passes: int = 8,
) -> Fit:
    """Shorten ``messages`` until ``count_prompt(...) <= budget`` tokens.

    ``count`` returns the token count of a string. Cuts go by characters, proportional to
    the overflow, repeated at most ``max_passes`` times. Raises ``ValueError`` when even an
    empty field would not fit (the fixed instructions alone exceed the budget).
    """
    messages = [dict(m) for m in messages]
    total = count_prompt(messages, count)
    dropped, field = 0, None
    for _ in range(max_passes):
        if total <= budget:
            return Fit(messages, total, dropped, field)
        users = [i for i, m in enumerate(messages) if m["role"] == "user"] or list(range(len(messages)))
        # few-shot demos (every user message but the last) give way before the question's own context
        demos = [i for i in users[:-1] if len(_span_text(messages[i]["content"])) > MIN_DEMO_FIELD + 100]
        target = max(demos or users, key=lambda i: len(messages[i]["content"]))
        text = messages[target]["content"]
        start, end, field = _longest_span(text)
        body = text[start:end]
        body_tokens = max(count(body), 1)
        overflow = total - budget
        if overflow >= body_tokens and not demos:
            raise ValueError(
                f"prompt needs {total} tokens but only {budget} fit, and cutting the longest field cannot save enough; "
                "raise n_ctx or shorten the instructions"
            )
        keep_chars = max(int(len(body) * (1 - (overflow + 16) / body_tokens)), MIN_DEMO_FIELD if demos else 0)
        kept = body[: max(keep_chars, 0)].rstrip()
        marker = "\n[... truncated to fit the context window ...]\n\n"
        messages[target]["content"] = text[:start] + kept + marker + text[end:].lstrip("\n")
        new_total = count_prompt(messages, count)
        dropped += max(total - new_total, 0)
        total = new_total
    if total <= budget:
        return Fit(messages, total, dropped, field)
    raise ValueError(f"prompt still needs {total} tokens after {max_passes} cuts; budget is {budget}")
