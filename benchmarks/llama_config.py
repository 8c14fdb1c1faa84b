"""llama.cpp configurations for the embedded model, side by side: extra buffer types (repack) on/off, threads.

Run: python benchmarks/llama_config.py [--models qwen2.5-coder-1.5b] [--repeats 3] [--out benchmarks/results/llama_config.md]

Each row loads the model with one configuration and measures, best of ``--repeats``: prompt processing of
512 tokens in one batch (tokens/s) and 32 single-token decode steps (tokens/s), the two costs of every
agent call. ``use_extra_bufts=False`` is the safe fallback Sieve uses when an AMX build meets an AMX CPU;
it also drops the CPU repack kernels. The build line is llama.cpp's own system info, so the table says
which kernels were compiled in (Sieve's install builds with ``-mno-amx-int8``: no AMX).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag.lm.local import default_threads  # noqa: E402
from rag.lm.models import model_path  # noqa: E402
from rag.lm.probe import build_info, cpu_flags  # noqa: E402
from benchmarks.tables import emit  # noqa: E402

TEXT = " ".join(f"Passage {i}: the nonlocal statement rebinds a name in the nearest enclosing function scope."
                for i in range(200))


def measure(path: Path, threads: int, extra_bufts: bool, repeats: int) -> tuple[float, float, float]:
    from llama_cpp import Llama

    start = time.perf_counter()
    llama = Llama(model_path=str(path), n_ctx=1024, n_batch=512, n_threads=threads, n_threads_batch=threads,
                  verbose=False, **({} if extra_bufts else {"use_extra_bufts": False}))
    load_s = time.perf_counter() - start
    tokens = llama.tokenize(TEXT.encode())[:512]
    prompt, decode = [], []
    for _ in range(repeats):
        llama.reset()
        start = time.perf_counter()
        llama.eval(tokens)
        prompt.append(len(tokens) / (time.perf_counter() - start))
        start = time.perf_counter()
        for token in tokens[:32]:
            llama.eval([token])
        decode.append(32 / (time.perf_counter() - start))
    del llama
    gc.collect()
    return load_s, max(prompt), max(decode)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="qwen2.5-coder-1.5b")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    cores = default_threads()
    configs = [("all cores, extra buffer types (default)", cores, True),
               ("all cores, no extra buffer types (AMX fallback)", cores, False)]
    if cores > 1:
        configs.append(("1 thread, extra buffer types", 1, True))
    lines = [f"llama.cpp configurations (`python benchmarks/llama_config.py`), {cores} usable cores, "
             f"AMX on this CPU: {'yes' if {'amx_int8', 'amx_tile'} & cpu_flags() else 'no'}", "",
             f"Build: `{build_info().strip()}`", "",
             "| model | configuration | load s | prompt tok/s | decode tok/s | prompt ratio | decode ratio |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for model in args.models.split(","):
        path = model_path(model)
        base = None
        for label, threads, extra in configs:
            load_s, pp, tg = measure(path, threads, extra, args.repeats)
            base = base or (pp, tg)
            lines.append(f"| {model} | {label} | {load_s:.1f} | {pp:.1f} | {tg:.2f} | {pp / base[0]:.2f} | "
                         f"{tg / base[1]:.2f} |")
            print(lines[-1], file=sys.stderr, flush=True)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
