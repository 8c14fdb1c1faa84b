"""Role -> model resolution, shared LM objects, configuration errors, and the CLI commands."""

import re

import dspy
import pytest
from typer.testing import CliRunner

from rag.cli import app
from rag.config import Settings
from rag.errors import ConfigError
from rag.lm.configure import GROQ_DEFAULTS, build_lm, lms_for_roles, resolve_specs
from rag.lm.groq import GroqEngine
from rag.lm.local import LlamaCppEngine
from rag.usage.ledger import Ledger


@pytest.fixture
def no_key(monkeypatch, tmp_path):
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("SIEVE_HOME", str(tmp_path / "home"))


def test_defaults_are_embedded_without_a_key(no_key):
    assert set(resolve_specs(Settings()).values()) == {"embedded"}
    lms = lms_for_roles(Settings(cache=False))
    assert len({id(lm) for lm in lms.values()}) == 1  # one shared embedded LM
    assert isinstance(lms["grader"].engine, LlamaCppEngine)


def test_defaults_are_groq_with_a_key_from_dotenv(no_key, tmp_path, monkeypatch):
    (tmp_path / ".env").write_text("GROQ_API_KEY=gsk_test_only\n")
    specs = resolve_specs(Settings(judge_model="embedded"))
    assert specs == {**GROQ_DEFAULTS, "judge": "embedded"}
    assert specs["judge"] != specs["answerer"]
    lms = lms_for_roles(Settings(judge_model="embedded"))
    assert lms["grader"] is lms["rewriter"] and lms["grader"] is not lms["answerer"]
    assert isinstance(lms["answerer"].engine, GroqEngine) and lms["answerer"].num_retries == 0
    assert "gsk_test_only" not in repr(lms["answerer"].engine)
    assert "gsk_test_only" not in str(lms["answerer"].dump_state())


def test_other_specs(no_key):
    litellm = build_lm("openai/gpt-4o-mini", Settings(cache=False))
    assert isinstance(litellm, dspy.LM) and litellm.engine == "auto" and litellm.cache is False
    with pytest.raises(ConfigError, match="not recognised"):
        build_lm("gpt4", Settings())
    from rag.errors import ModelError

    with pytest.raises(ModelError, match="does not exist"):
        build_lm("gguf:/nowhere/model.gguf", Settings()).engine.load()


@pytest.mark.slow
def test_rag_models_and_usage_commands(no_key, tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["models"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()  # assembly and engine-check progress go to stderr
    assert [line.split()[0] for line in lines] == ["grader", "rewriter", "answerer", "judge", "proposer"]
    for line in lines[:4]:  # the default model: its file, size, hash check and measured speed
        assert "embedded" in line and "ok: qwen2.5-coder-1.5b-instruct-q4_k_m.gguf (1,117 MB, sha256 ok" in line
        assert re.search(r"prompt \d+ tok/s, output [\d.]+ tok/s$", line)
    assert "the answerer's model" in lines[4]

    result = runner.invoke(app, ["models", "--no-check", "--set", "proposer_model=groq/llama-3.3-70b-versatile"])
    assert result.exit_code == 0 and "proposer  groq/llama-3.3-70b-versatile" in result.output

    result = runner.invoke(app, ["models", "--set", "judge_model=groq/qwen/qwen3-32b"])
    assert result.exit_code != 0 and "UNUSABLE: GROQ_API_KEY is not set" in result.output

    assert "no hosted-model calls" in runner.invoke(app, ["usage"]).output
    Ledger().record(model="groq/openai/gpt-oss-20b", status="ok", input_tokens=1200, output_tokens=40, cost_usd=0.0001)
    result = runner.invoke(app, ["usage", "--days", "1"])
    assert result.exit_code == 0 and "groq/openai/gpt-oss-20b" in result.output and "1200" in result.output


def test_lms_save_and_load_without_secrets(no_key, monkeypatch):
    from dspy.clients.base_lm import BaseLM

    embedded = build_lm("embedded", Settings(cache=False, n_ctx=1024, embedded_model="smollm2-135m"))
    state = embedded.dump_state()
    assert state["engine"]["class"] == "rag.lm.local:LlamaCppEngine" and state["engine"]["state"]["n_ctx"] == 1024
    loaded = BaseLM.load_state(state, allow_custom_lm_class=True)
    assert isinstance(loaded.engine, LlamaCppEngine) and loaded.engine.model_path == embedded.engine.model_path

    monkeypatch.setenv("GROQ_API_KEY", "gsk_secret_value")
    hosted = build_lm("groq/openai/gpt-oss-20b", Settings(lm_max_retries=2))
    state = hosted.dump_state()
    assert "gsk_secret_value" not in str(state) and state["engine"]["state"]["max_retries"] == 2
    assert BaseLM.load_state(state, allow_custom_lm_class=True).engine.retry.max_retries == 2


def test_the_demo_position_setting_reaches_the_adapter_and_is_checked(tmp_path):
    from rag.lm.adapter import SieveAdapter
    from rag.lm.configure import configure_dspy

    configure_dspy(Settings(cache=False, cache_dir=tmp_path, demo_position="before"))  # as test_agent_e2e does
    assert isinstance(dspy.settings.adapter, SieveAdapter) and dspy.settings.adapter.demo_position == "before"
    configure_dspy(Settings(cache=False, cache_dir=tmp_path))
    assert dspy.settings.adapter.demo_position == "shared"  # one demo block ahead of the passages, for every role
    with pytest.raises(ConfigError, match="demo_position='middle' is not allowed; use one of: after, before, shared"):
        Settings(demo_position="middle").validate()
