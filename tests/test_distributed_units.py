"""The parts of rag.distributed that need no cluster: the limiter's state, the embedding shards, the CLI's
``--ray [ADDRESS]`` and its one-line errors (the cluster itself is exercised in tests/test_ray.py)."""

from __future__ import annotations

import sys
import time

import pytest
from typer.testing import CliRunner

from rag.cli import app
from rag.distributed.cluster import INSTALL_HINT, optional_value, require_ray
from rag.distributed.embed import shards
from rag.distributed.limiter import LimiterState
from rag.errors import ConfigError


def test_limiter_state_grants_r_per_window_then_says_how_long_to_wait():
    state = LimiterState(window=0.5)
    granted = [state.reserve("m", 2, 10_000, 100) for _ in range(3)]
    assert [g[0] is not None for g in granted] == [True, True, False]
    wait = granted[2][1]
    assert 0 < wait <= 0.5
    time.sleep(wait + 0.01)
    assert state.reserve("m", 2, 10_000, 100)[0] is not None  # the window moved on
    assert state.reserve("other", 2, 10_000, 100)[0] is not None  # budgets are per model
    assert state.stats()["granted"] == {"m": 3, "other": 1}


def test_limiter_state_counts_tokens_as_settled_and_stops_for_everyone():
    state = LimiterState(window=60)
    handle, _, _ = state.reserve("m", 100, 1_000, 900)  # estimated 900 of 1,000 tokens
    assert state.reserve("m", 100, 1_000, 200)[0] is None  # would pass the token budget
    state.settle(handle, 100)  # the provider counted 100
    assert state.reserve("m", 100, 1_000, 200)[0] is not None
    state.stop("daily quota spent (TPD)")
    state.stop("a later report does not replace the first")
    assert state.reserve("m", 100, 1_000, 1) == (None, 0.0, "daily quota spent (TPD)")


def test_shards_are_longest_first_whole_runs():
    texts = ["aa", "a", "aaaa", "aaa", "aaaa", ""]
    parts = shards(texts, 2)
    assert parts == [[2, 4], [3, 0], [1, 5]]  # length descending, ties in row order
    assert sorted(i for p in parts for i in p) == list(range(len(texts)))


def test_ray_flag_takes_an_optional_address():
    assert optional_value(["eval", "--ray"], "--ray", "local") == ["eval", "--ray", "local"]
    assert optional_value(["eval", "--ray", "--limit", "2"], "--ray", "local")[:3] == ["eval", "--ray", "local"]
    assert optional_value(["eval", "--ray", "auto"], "--ray", "local") == ["eval", "--ray", "auto"]


def test_missing_ray_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ConfigError) as err:
        require_ray()
    assert str(err.value) == INSTALL_HINT and 'pip install -e ".[ray]"' in INSTALL_HINT


@pytest.mark.parametrize("args, message", [
    (["eval", "--config", "full", "--ray", "local", "--threads", "2"], "give one of them"),
    (["eval", "--config", "full", "--workers", "2"], "--workers needs --ray"),
    (["eval", "--config", "full", "--ray", "local", "--workers", "0"], "--workers must be >= 1, got 0"),
    (["eval", "--retrieval-only", "--ray", "local"], "--ray would be ignored"),
    (["index", "--workers", "2"], "--workers needs --ray"),
])
def test_ray_flags_misused_are_one_line_errors(args, message):
    result = CliRunner().invoke(app, args)
    assert result.exit_code != 0
    text = (result.stderr if hasattr(result, "stderr") else "") + str(result.exception or "") + result.output
    assert message in text


def test_a_shard_of_whole_batches_embeds_bit_for_bit_as_the_whole_list():
    """What ``rag index --ray`` relies on: the ONNX encoder's batch plan, cut into runs of whole batches, each run
    embedded by a worker (its own encoder instance, one thread), gives exactly the vectors of one local
    ``encode`` over the whole list (same padded batches), and the worker loads the encoder the record names."""
    import numpy as np

    from rag.distributed.embed import EmbedWorker, onnx_shards
    from rag.index.encoder import BATCH_SIZE, MAX_BATCH_TOKENS, index_encoder

    encoder, record = index_encoder("default", "onnx")
    words = "the with statement wraps a block in a context manager whose exit method always runs".split()
    texts = [" ".join(words[(i * 7) % len(words):] + words * (i % 23)) for i in range(150)]  # lengths vary, some tie
    whole = encoder.encode(texts)
    plan = encoder.batches(texts)
    lengths = [len(e.ids) for e in encoder.tokenizer.encode_batch(texts)]  # MiniLM truncates at 256 tokens
    assert sorted(i for rows in plan for i in rows) == list(range(len(texts))) and len(plan) >= 4
    for rows in plan:  # each batch within both bounds, padded to its longest text
        assert len(rows) <= BATCH_SIZE and len(rows) * max(lengths[i] for i in rows) <= MAX_BATCH_TOKENS
    parts = onnx_shards(encoder, texts, 2)
    assert sorted(i for p in parts for i in p) == list(range(len(texts))) and len(parts) == -(-len(plan) // 2)
    worker = EmbedWorker("default", record, threads=1)
    assert worker.ready()[1] == record["id"]
    for rows in parts:
        assert np.array_equal(worker.embed([texts[i] for i in rows]), whole[rows])
    int8, int8_record = index_encoder("default", "onnx", precision="int8")  # one text per batch
    parts = onnx_shards(int8, texts, 2)
    assert [len(p) for p in parts] == [2 * BATCH_SIZE, 2 * BATCH_SIZE, len(texts) - 4 * BATCH_SIZE]
    worker = EmbedWorker("default", int8_record, threads=1)
    for rows in parts:
        assert np.array_equal(worker.embed([texts[i] for i in rows]), int8.encode(texts)[rows])


def test_a_capturing_process_hands_its_ledger_rows_to_the_one_that_writes_them(tmp_path, monkeypatch):
    """What a Ray eval worker does: each call's row goes to ``send`` as the call ends, nothing is written where the
    call was made, and the driver writes the rows as they were (day, model, tokens), once."""
    from rag.usage import ledger as L

    monkeypatch.setattr(L, "_send", None)
    worker_side, sent = L.Ledger(tmp_path / "worker.sqlite"), []
    L.capture(sent.append)
    worker_side.record(model="m", status="ok", input_tokens=10, output_tokens=2, cost_usd=0.001, latency_s=0.1)
    worker_side.record(model="m", status="rate_limited", latency_s=0.2)
    L.capture(None)
    assert not (tmp_path / "worker.sqlite").exists()  # nothing written where the calls were made
    assert len(sent) == 2
    driver = L.Ledger(tmp_path / "driver.sqlite")
    driver.write_rows(sent)
    (day,) = driver.daily()
    assert (day.model, day.calls, day.failed, day.input_tokens, day.output_tokens) == ("m", 1, 1, 10, 2)


def test_the_usage_inbox_hands_each_row_over_once():
    """The driver's inbox (plain Python here): rows under their keys, taken once; a key sent twice is one row."""
    from rag.distributed.eval import UsageInbox

    inbox = UsageInbox()
    inbox.put("a-0", (1.0,))
    inbox.put("a-1", (2.0,))
    inbox.put("a-1", (2.0,))
    assert inbox.take() == {"a-0": (1.0,), "a-1": (2.0,)} and inbox.take() == {}
