"""The text of a reply as it is written (rag.lm.streaming): one field's value read from every prefix of a reply, in
JSON and in the chat adapter's sections; and the embedded engine on the real SmolLM2-135M GGUF, whose streamed call
returns what the same call returns without a listener, while the pieces it passes on join to that text."""

from __future__ import annotations

import json
import threading
import time

import dspy
import pytest

from rag.config import Settings
from rag.lm import streaming
from rag.lm.adapter import SieveAdapter
from rag.lm.grammar import close_last_string
from rag.lm.streaming import FieldStream, partial_field

ANSWER = 'Line one\nsays "hi" \\ back, \u00e9t\u00e9 \U0001F600 [with#000]. Tab:\there.'


def prefixes(text: str):
    return (text[:k] for k in range(len(text) + 1))


def values(text: str, name: str = "answer") -> list[tuple[str | None, bool]]:
    return [partial_field(prefix, name) for prefix in prefixes(text)]


@pytest.mark.parametrize("ascii_only", [True, False])
def test_every_prefix_of_a_json_reply_gives_a_prefix_of_the_value_and_the_whole_value_once_closed(ascii_only):
    reply = json.dumps({"cited_ids": ["with#000", "answer#1"], "answer": ANSWER}, ensure_ascii=ascii_only)
    seen = values(reply)
    for (value, done), prefix in zip(seen, prefixes(reply)):
        assert value is None or ANSWER.startswith(value), (prefix, value)
        assert not done  # the last key: whole only when the reply ends (its "} may be text, see below)
    assert seen[-1] == seen[-2] == (ANSWER, False)
    assert values(reply.replace("}", ', "n": 1}'))[-1] == (ANSWER, True)  # a key follows: complete
    grown = [v for v, _ in seen if v is not None]
    assert all(b.startswith(a) for a, b in zip(grown, grown[1:]))  # it only grows


def test_a_half_written_escape_waits_for_the_rest():
    assert partial_field('{"answer": "a\\', "answer") == ("a", False)
    assert partial_field('{"answer": "a\\u00', "answer") == ("a", False)
    assert partial_field('{"answer": "a\\u00e9', "answer") == ("a\u00e9", False)
    assert partial_field('{"answer": "a\\ud83d', "answer") == ("a", False)  # half of a surrogate pair
    assert partial_field('{"answer": "a\\ud83d\\ude00', "answer") == ("a\U0001F600", False)
    assert partial_field('{"answer": "a\\ud83d b', "answer") == ("a\ufffd b", False)  # a lone half: shown as U+FFFD
    assert partial_field('{"answer": "a\\n\\"b\\"\\t\\/', "answer") == ('a\n"b"\t/', False)


def test_the_field_is_found_only_as_a_key_of_the_top_level_object():
    reply = '{"reason": "the \\"answer\\": \\"no\\" part", "nested": {"answer": "inner"}, "list": ["answer", 1], '
    assert partial_field(reply, "answer") == (None, False)
    assert partial_field(reply + '"answer": "outer', "answer") == ("outer", False)
    assert partial_field(reply + '"answer": "outer"}', "answer") == ("outer", False)
    assert partial_field(reply + '"answer": "outer", "x": 1}', "answer") == ("outer", True)
    assert partial_field('{"answer": 3}', "answer") == (None, False)  # not a string: nothing to show
    assert partial_field('{"cited_ids": []}', "answer") == (None, False)
    assert partial_field("", "answer") == (None, False) and partial_field("Sure! {", "answer") == (None, False)
    assert partial_field('```json\n{"answer": "fenced', "answer") == ("fenced", False)


def test_a_raw_quote_in_the_last_string_is_text_unless_the_object_or_the_next_key_follows():
    """The embedded engine lets the last string hold raw double quotes (rag.lm.grammar.open_last_string)."""
    assert partial_field('{"answer": "say "hi" now"}', "answer") == ('say "hi" now', False)
    assert partial_field('{"answer": "say "hi" } now"}', "answer") == ('say "hi" } now', False)  # text after "}
    assert partial_field('{"answer": "say "hi" }\n', "answer") == ('say "hi', False)  # the end, or more text
    assert partial_field('{"answer": "say "', "answer") == ("say ", False)  # could be the end: it waits
    assert partial_field('{"answer": "say " ', "answer") == ("say ", False)
    assert partial_field('{"answer": "say "h', "answer") == ('say "h', False)
    assert partial_field('{"answer": "say ", "cited', "answer") == ("say ", False)
    assert partial_field('{"answer": "say ", and', "answer") == ('say ", and', False)
    assert partial_field('{"answer": "done", "cited_ids": ["a"]}', "answer") == ("done", True)


def test_the_chat_adapters_sections():
    reply = '[[ ## cited_ids ## ]]\n["with#000"]\n\n[[ ## answer ## ]]\nIt wraps [with#000].\n\n[[ ## completed ## ]]\n'
    seen = values(reply)
    assert seen[-1] == ("It wraps [with#000].", True)
    assert all(v is None or "It wraps [with#000].".startswith(v) for v, _ in seen)
    assert partial_field(reply[:reply.index("[[ ## answer")], "answer") == (None, False)
    assert partial_field("[[ ## answer ## ]]\nIt wraps\n\n[[ #", "answer") == ("It wraps", False)  # a marker begins
    assert partial_field("[[ ## answer ## ]]\nno end marker yet", "answer") == ("no end marker yet", False)


def test_a_field_stream_reports_each_new_value_and_starts_over_for_a_new_call():
    stream = FieldStream("answer")
    reply = json.dumps({"answer": "It wraps a block.", "cited_ids": []})
    got = [value for k in range(0, len(reply), 3) if (value := stream.feed(reply[k:k + 3])) is not None]
    assert got[-1] == "It wraps a block." and stream.complete and all(b.startswith(a) for a, b in zip(got, got[1:]))
    assert stream.feed(' trailing') is None  # complete: the rest is not read
    stream.start()
    assert stream.value is None and stream.feed('{"answer": "again') == "again"


def test_the_listener_is_heard_only_inside_its_block_and_on_its_own_thread():
    assert streaming.current() is None
    heard: list[str] = []
    with streaming.listen(heard.append) as listener:
        assert streaming.current() is listener
        other: list[object] = []
        thread = threading.Thread(target=lambda: other.append(streaming.current()))
        thread.start()
        thread.join()
        assert other == [None]
    assert streaming.current() is None


# ------------------------------------------------------------------------------ the embedded engine, real model
@pytest.fixture(scope="module")
def lm():
    from rag.lm.configure import build_lm

    return build_lm("embedded", Settings(cache=False, embedded_model="smollm2-135m"))


def same_call(lm, call):
    """The reply and its record, without a listener and then with one: (plain, streamed, pieces, calls heard)."""
    call()
    plain = lm.history[-1]
    pieces: list[str] = []
    calls: list[int] = []
    with streaming.listen(pieces.append, lambda: calls.append(1)):
        call()
    return plain, lm.history[-1], pieces, calls


def same_response(a, b) -> None:
    ra, rb = a["response"], b["response"]
    assert rb.message.text == ra.message.text
    assert rb.usage == ra.usage and rb.finish_reason == ra.finish_reason and a["usage"] == b["usage"]
    drop = {"latency_s"}
    assert ({k: v for k, v in rb.provider_data["sieve"].items() if k not in drop}
            == {k: v for k, v in ra.provider_data["sieve"].items() if k not in drop})
    assert rb.adaptations == ra.adaptations


@pytest.mark.slow
def test_a_streamed_text_call_returns_the_same_reply_and_its_pieces_join_to_it(lm):
    prompt = "Write two sentences about the sea."
    plain, streamed, pieces, calls = same_call(lm, lambda: lm(prompt))
    same_response(plain, streamed)
    text = streamed["response"].message.text
    assert calls == [1] and len(pieces) > 5 and "".join(pieces) == text
    assert streamed["usage"]["completion_tokens"] > 5


@pytest.mark.slow
def test_a_stop_sequence_is_never_passed_on(lm):
    prompt = "Count from one to twenty in words, separated by commas."
    words = lm(prompt)[0].split()
    stop = words[len(words) // 2]  # a word from the middle of what it writes
    plain, streamed, pieces, _ = same_call(lm, lambda: lm(prompt, stop=[stop]))
    same_response(plain, streamed)
    text = streamed["response"].message.text
    assert stop not in text and "".join(pieces) == text


class Answer(dspy.Signature):
    """Answer the question from the context, citing the passage id in brackets."""

    question: str = dspy.InputField()
    context: str = dspy.InputField()
    cited_ids: list[str] = dspy.OutputField()
    answer: str = dspy.OutputField()


@pytest.mark.slow
def test_a_streamed_structured_call_returns_the_same_reply_and_the_answer_field_can_be_read_as_it_grows(lm):
    """Grammar-constrained JSON with the free last string (rag.lm.grammar.open_last_string): the pieces join to what the
    model wrote, which the engine then closes and re-escapes exactly as without a listener."""
    inputs = {"question": "What does the pass statement do?",
              "context": "[pass#000] pass is a null operation: when it is executed, nothing happens."}

    def call():
        with dspy.context(lm=lm, adapter=SieveAdapter()):
            return dspy.Predict(Answer)(**inputs)

    plain, streamed, pieces, _ = same_call(lm, call)
    same_response(plain, streamed)
    text = streamed["response"].message.text
    joined = "".join(pieces)
    assert close_last_string(joined, "answer")[0] == text
    field = FieldStream("answer")
    grown = [v for piece in pieces if (v := field.feed(piece)) is not None]
    assert grown and grown[-1] == json.loads(text)["answer"]
    assert all(b.startswith(a) for a, b in zip(grown, grown[1:]))


@pytest.mark.slow
def test_a_listener_that_fails_costs_nothing_but_its_own_pieces(lm, caplog):
    def broken(piece: str) -> None:
        raise RuntimeError("listener bug")

    expected = lm("Say hello.")
    with streaming.listen(broken):
        assert lm("Say hello.") == expected
    assert "the text listener failed" in caplog.text


# ------------------------------------------------------------------------------ stopping a call (rag serve's Stop)
STORY = "Write a long story about a lighthouse keeper and his cat, at least 300 words."


@pytest.mark.slow
def test_a_cancelled_generation_stops_at_the_next_token_and_the_engine_goes_on_as_before(lm):
    """A long generation (up to 400 tokens) whose caller stops it after 5 pieces: it ends at the next token, within a
    bound, raising Cancelled, and nothing more is passed on; the engine's next calls reply as before it, the same
    prompt included (llama.cpp reuses the KV cache the cut call left: it must hold exactly what was evaluated)."""
    from rag.errors import Cancelled

    head = lm(STORY, max_tokens=24)[0]  # what the story begins with
    hello = lm("Say hello.")[0]
    calls = len(lm.history)
    pieces: list[str] = []
    stopped_at: list[float] = []

    def on_text(piece: str) -> None:
        pieces.append(piece)
        if len(pieces) == 5:
            stopped_at.append(time.perf_counter())

    with streaming.listen(on_text, cancelled=lambda: len(pieces) >= 5), pytest.raises(Cancelled, match="5 token"):
        lm(STORY, max_tokens=400)
    assert time.perf_counter() - stopped_at[0] < 2.0  # a token or two of a 135M model, however busy the machine
    assert len(pieces) == 5 and head.startswith("".join(pieces))
    assert len(lm.history) == calls  # no reply: nothing recorded
    assert lm(STORY, max_tokens=24)[0] == head
    assert lm("Say hello.")[0] == hello
    with streaming.listen(pieces.append, cancelled=lambda: True), pytest.raises(Cancelled):
        lm("Say hello.")  # stopped before it began: not a token written
    assert len(pieces) == 5


@pytest.mark.slow
def test_a_cancelled_reply_is_never_cached(lm, tmp_path):
    """With DSPy's cache on, a stopped call stores nothing: the same call made again runs the model (a real call: it
    reports its usage) and replies in full, and that reply is cached."""
    from dspy.clients.cache import Cache

    from rag.errors import Cancelled
    from rag.usage.metering import is_cache_hit

    cached = dspy.LM(lm.model, engine=lm.engine, cache=True, temperature=0.0, max_tokens=32, num_retries=0)
    old = dspy.cache
    dspy.cache = Cache(enable_disk_cache=False, enable_memory_cache=True, disk_cache_dir=str(tmp_path))
    try:
        pieces: list[str] = []
        with streaming.listen(pieces.append, cancelled=lambda: len(pieces) >= 3), pytest.raises(Cancelled):
            cached(STORY)
        reply = cached(STORY)[0]
        assert not is_cache_hit(cached.history[-1]) and cached.history[-1]["usage"]["completion_tokens"] > 3
        assert reply.startswith("".join(pieces)) and len(reply) > len("".join(pieces))
        assert cached(STORY)[0] == reply and is_cache_hit(cached.history[-1])
    finally:
        dspy.cache = old
