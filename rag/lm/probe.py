"""Does llama.cpp run on this CPU? A check in a child process, so a fault never kills the caller.

Some llama-cpp-python builds fault on some CPUs: built natively on an Intel CPU with AMX, llama.cpp
compiles its AMX int8 kernels, and those die with SIGILL ("Illegal instruction", exit 132) on machines
where the kernel does not grant AMX tile state. A crash like that cannot be caught inside the process, so
before a GGUF model is first loaded the engine runs :func:`main` in a child: load the model with the
same options, evaluate ``PROBE_TOKENS`` prompt tokens (batched, where the fast kernels run) and a few
single-token steps. A child that dies by a signal becomes one line that names the cause and the fix. The
verdict is remembered per llama.cpp build, model file and CPU in ``SIEVE_HOME/models/engine-checks.json``.

    python -m rag.lm.probe MODEL.gguf [--no-extra-bufts]   # exit 0 when the engine works
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from rag.errors import ModelError

PROBE_TOKENS = 512
REBUILD = ('CMAKE_ARGS="-DCMAKE_C_FLAGS=-mno-amx-int8 -DCMAKE_CXX_FLAGS=-mno-amx-int8" '
           "pip install --force-reinstall --no-cache-dir --no-deps llama-cpp-python")


def cpu_flags() -> set[str]:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def build_info() -> str:
    """llama.cpp's own system line ('AVX2 = 1 | AMX_INT8 = 0 | ...'): the features compiled in."""
    import llama_cpp

    return llama_cpp.llama_print_system_info().decode("utf-8", "replace")


_PARAMS_LOCK = threading.Lock()


def new_llama(*, extra_bufts: bool = True, **kwargs: Any) -> Any:
    """``llama_cpp.Llama(**kwargs)``, loaded with llama.cpp's extra buffer types (the CPU repack kernels, and
    AMX where the build has it) on or off.

    ``Llama`` has no such argument: ``Llama(..., use_extra_bufts=False)`` lands in its ``**kwargs`` and is
    dropped without a word (llama-cpp-python 0.3.36 still loaded CPU_REPACK buffers). So, for this one load,
    the field is set on the default model parameters that ``Llama`` starts from."""
    import llama_cpp.llama as module

    if extra_bufts:
        return module.Llama(**kwargs)
    lib = module.llama_cpp
    if "use_extra_bufts" not in {name for name, _ in lib.llama_model_params._fields_}:
        raise ModelError("this llama-cpp-python cannot turn off llama.cpp's extra buffer types (its "
                         f"llama_model_params has no use_extra_bufts); install a newer one: {REBUILD}")
    with _PARAMS_LOCK:
        default = lib.llama_model_default_params

        def without_extra_bufts() -> Any:
            params = default()
            params.use_extra_bufts = False
            return params

        lib.llama_model_default_params = without_extra_bufts
        try:
            return module.Llama(**kwargs)
        finally:
            lib.llama_model_default_params = default


def amx_risk() -> bool:
    """True when this llama.cpp build has AMX kernels and this CPU reports AMX: the combination that faults."""
    return "AMX_INT8 = 1" in build_info() and bool({"amx_int8", "amx_tile"} & cpu_flags())


def _library_id() -> str:
    import llama_cpp

    lib = Path(llama_cpp.__file__).parent / "lib"
    parts = [f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in sorted(lib.glob("*.so*"))]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _key(model: Path, extra_bufts: bool) -> str:
    st = model.stat()
    raw = f"{_library_id()}|{model.resolve()}:{st.st_size}:{st.st_mtime_ns}|{sorted(cpu_flags())}|{extra_bufts}"
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def _checks_file() -> Path:
    from rag.paths import sieve_home

    return sieve_home() / "models" / "engine-checks.json"


def ensure_engine_runs(model: Path, *, extra_bufts: bool = True, timeout: float = 600) -> None:
    """Run the child check once per (llama.cpp build, model file, CPU, options); raise ModelError if it dies."""
    path, key = _checks_file(), _key(model, extra_bufts)
    checks: dict[str, str] = {}
    with contextlib.suppress(OSError, ValueError):
        checks = json.loads(path.read_text(encoding="utf-8"))
    if checks.get(key) == "ok":
        return
    print(f"checking that llama.cpp runs {model.name} on this CPU (once)...", file=sys.stderr, flush=True)
    cmd = [sys.executable, "-m", "rag.lm.probe", str(model)] + ([] if extra_bufts else ["--no-extra-bufts"])
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ModelError(f"the llama.cpp check of {model.name} did not finish in {timeout:.0f} s; the machine may be "
                         "overloaded, try again") from None
    if proc.returncode != 0:
        raise ModelError(describe_failure(proc.returncode, proc.stderr, model))
    checks[key] = "ok"
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(checks, indent=1), encoding="utf-8")
        os.replace(tmp, path)


def describe_failure(returncode: int, stderr: str, model: Path) -> str:
    """One line: what killed the engine and what to do about it."""
    if returncode < 0 or returncode > 128:
        signum = -returncode if returncode < 0 else returncode - 128
        name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else f"signal {signum}"
        if signum == signal.SIGILL:
            return (f"llama.cpp crashed with an illegal instruction (SIGILL) running {model.name}: this "
                    f"llama-cpp-python build uses CPU instructions this machine faults on (usually AMX); rebuild it "
                    f"without them: {REBUILD}")
        return (f"llama.cpp crashed ({name}) running {model.name}; check the file (rag models) or rebuild "
                f"llama-cpp-python: {REBUILD}")
    last = (stderr.strip().splitlines() or ["no message"])[-1]
    return f"llama.cpp could not run {model.name}: {last}"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    extra_bufts = "--no-extra-bufts" not in args
    model = Path(next(a for a in args if not a.startswith("--")))
    llama = new_llama(extra_bufts=extra_bufts, model_path=str(model), n_ctx=PROBE_TOKENS + 64,
                      n_batch=PROBE_TOKENS, verbose=False)
    text = " ".join(f"Passage {i}: the nonlocal statement rebinds a name in the enclosing scope." for i in range(200))
    tokens = llama.tokenize(text.encode("utf-8"))[:PROBE_TOKENS]
    if len(tokens) < PROBE_TOKENS:
        raise SystemExit(f"the probe text has only {len(tokens)} tokens")
    llama.eval(tokens)  # batched prompt processing
    for token in tokens[:4]:  # single-token decode steps
        llama.eval([token])
    print(f"ok: {len(tokens)} prompt tokens + 4 decode steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
