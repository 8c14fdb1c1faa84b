"""llama.cpp never takes the process down: the build has no AMX code, the engine check runs in a child,
and a child that dies becomes one line naming the cause and the fix."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rag.errors import ModelError
from rag.lm import probe


def _ggml_cpu_libraries() -> list[Path]:
    import llama_cpp

    return sorted((Path(llama_cpp.__file__).parent / "lib").glob("libggml-cpu*.so*"))


def test_build_has_no_amx_kernels():
    """README's install builds llama.cpp with -mno-amx-int8: its AMX path faults on some AMX CPUs."""
    assert "AMX_INT8 = 1" not in probe.build_info()
    libs = _ggml_cpu_libraries()
    assert libs, "libggml-cpu.so not found in llama_cpp/lib"
    if shutil.which("objdump") is None:
        pytest.skip("objdump not installed (apt-get install binutils); the system-info check above still ran")
    for lib in libs:
        asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True,
                             check=True).stdout
        assert "tileloadd" not in asm and "tdpbssd" not in asm, f"{lib.name} contains AMX instructions"


def test_amx_risk_needs_both_an_amx_build_and_an_amx_cpu(monkeypatch):
    monkeypatch.setattr(probe, "build_info", lambda: "AVX2 = 1 | AMX_INT8 = 1 | ")
    monkeypatch.setattr(probe, "cpu_flags", lambda: {"avx2", "amx_tile", "amx_int8"})
    assert probe.amx_risk()
    monkeypatch.setattr(probe, "cpu_flags", lambda: {"avx2", "avx512f"})
    assert not probe.amx_risk()
    monkeypatch.setattr(probe, "cpu_flags", lambda: {"amx_int8"})
    monkeypatch.setattr(probe, "build_info", lambda: "AVX2 = 1 | AMX_INT8 = 0 | ")
    assert not probe.amx_risk()


def test_extra_buffer_types_follow_the_setting_and_never_meet_an_amx_fault(monkeypatch):
    from rag.lm.local import use_extra_bufts

    monkeypatch.setattr(probe, "amx_risk", lambda: False)
    monkeypatch.setattr(probe, "cpu_flags", lambda: {"avx2", "avx512f", "avx512_vnni"})
    assert use_extra_bufts("auto") is False and use_extra_bufts("on") is True and use_extra_bufts("off") is False
    monkeypatch.setattr(probe, "cpu_flags", lambda: {"avx2", "fma"})
    assert use_extra_bufts("auto") is True and use_extra_bufts("off") is False
    monkeypatch.setattr(probe, "amx_risk", lambda: True)  # an AMX build on an AMX CPU: off, whatever was asked
    assert use_extra_bufts("on") is False and use_extra_bufts("auto") is False


def test_llama_extra_bufts_setting_lists_the_allowed_values():
    from rag.config import load_settings
    from rag.errors import ConfigError

    with pytest.raises(ConfigError, match=r"llama_extra_bufts='maybe' is not allowed; use one of: auto, on, off"):
        load_settings({"llama_extra_bufts": "maybe"})


# Loads a GGUF file with llama.cpp's log on and prints whether any weights went into a CPU_REPACK buffer.
REPACK_CHILD = """
import os, sys, tempfile
from rag.lm import probe
import llama_cpp.llama as module
default = module.llama_cpp.llama_model_default_params
log = tempfile.TemporaryFile()
os.dup2(log.fileno(), 2)
llama = probe.new_llama(extra_bufts=sys.argv[2] == "on", model_path=sys.argv[1], n_ctx=64, verbose=True)
log.seek(0)
print("repacked" if b"CPU_REPACK model buffer" in log.read() else "plain",
      "restored" if module.llama_cpp.llama_model_default_params is default else "LEFT PATCHED")
"""


@pytest.mark.slow
def test_extra_buffer_types_really_turn_off(isolated_sieve_home):
    """``Llama(use_extra_bufts=False)`` is silently ignored by llama-cpp-python; ``probe.new_llama`` is not:
    the real default model (Q4_K weights, which llama.cpp repacks) loads with and without CPU_REPACK buffers."""
    from rag.lm.models import DEFAULT_MODEL, model_path

    path = str(model_path(DEFAULT_MODEL))
    seen = {}
    for setting in ("on", "off"):
        child = subprocess.run([sys.executable, "-c", REPACK_CHILD, path, setting], capture_output=True, text=True,
                               timeout=300)
        assert child.returncode == 0, child.stderr[-2000:]
        seen[setting] = child.stdout.split()
    assert seen == {"on": ["repacked", "restored"], "off": ["plain", "restored"]}


def test_a_child_killed_by_sigill_becomes_one_line_with_the_fix(tmp_path):
    child = subprocess.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGILL)"],
                           capture_output=True, text=True)
    assert child.returncode == -signal.SIGILL
    message = probe.describe_failure(child.returncode, child.stderr, tmp_path / "model.gguf")
    assert "\n" not in message
    assert "illegal instruction (SIGILL)" in message and "model.gguf" in message
    assert "-mno-amx-int8" in message and "pip install --force-reinstall" in message
    # a shell reports the same death as 128 + signal number
    assert "SIGILL" in probe.describe_failure(128 + signal.SIGILL, "", tmp_path / "model.gguf")


def test_other_signals_and_errors_are_named(tmp_path):
    assert "SIGSEGV" in probe.describe_failure(-signal.SIGSEGV, "", tmp_path / "m.gguf")
    message = probe.describe_failure(1, "Traceback...\nValueError: Failed to load model from file: m.gguf\n",
                                     tmp_path / "m.gguf")
    assert message == "llama.cpp could not run m.gguf: ValueError: Failed to load model from file: m.gguf"


def test_an_unloadable_model_fails_the_check_in_the_child_not_here(tmp_path, isolated_sieve_home):
    bad = tmp_path / "not-a-model.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 4096)
    with pytest.raises(ModelError, match=r"^llama.cpp could not run not-a-model.gguf: ") as info:
        probe.ensure_engine_runs(bad)
    assert "\n" not in str(info.value)
    # a failure is not remembered (other tests of the session may have remembered their own good models)
    checks_file = isolated_sieve_home / "models" / "engine-checks.json"
    remembered = json.loads(checks_file.read_text(encoding="utf-8")) if checks_file.exists() else {}
    assert probe._key(bad, True) not in remembered
    with pytest.raises(ModelError):  # and so the next call checks again
        probe.ensure_engine_runs(bad)


@pytest.mark.slow
def test_default_model_evaluates_512_prompt_tokens_in_a_child(isolated_sieve_home):
    """The real engine and the real default model, in a subprocess: a fault fails this test with a message."""
    from rag.lm.models import DEFAULT_MODEL, model_path

    path = model_path(DEFAULT_MODEL)
    child = subprocess.run([sys.executable, "-m", "rag.lm.probe", str(path)], capture_output=True, text=True,
                           timeout=600)
    assert child.returncode == 0, probe.describe_failure(child.returncode, child.stderr, path)
    assert child.stdout.strip() == f"ok: {probe.PROBE_TOKENS} prompt tokens + 4 decode steps"
    assert probe.PROBE_TOKENS >= 512
    probe.ensure_engine_runs(path)  # the same check through the API, now remembered
    assert (isolated_sieve_home / "models" / "engine-checks.json").is_file()
