"""llama.cpp configurations for the embedded model, side by side: extra buffer types (repack) on/off, threads,
flash attention.

Run: python benchmarks/llama_config.py [--models qwen2.5-coder-1.5b] [--repeats 3] [--rounds 2]
                                       [--only flash] [--out benchmarks/results/llama_config.md]

Each configuration loads the model and measures, best of ``--repeats``: prompt processing of 512 tokens in
one batch (tokens/s), 32 single-token decode steps (tokens/s), the two costs of every agent call, and a
grade-sized prompt: 1,250 tokens in batches of 512, as a grade call's prompt is read (seconds), then 16 decode
steps after it (tokens/s at a grade call's context length, where attention costs most). ``--only flash``
compares flash attention on and off at the default buffer types (the ``llama_flash_attn`` setting). The
configurations take turns for ``--rounds`` rounds (best of all), so that no one of them always runs first.
Extra buffer types off (``llama_extra_bufts = "off"``, via rag.lm.probe.new_llama) is also the safe fallback
Sieve uses when an AMX build meets an AMX CPU; it drops the CPU repack kernels. The "repacked" column says
whether the load put any weights in a CPU_REPACK buffer (from llama.cpp's own log), so a setting that did not
take cannot pass unseen. The build line is llama.cpp's own system info, so the table says which kernels were
compiled in (Sieve's install builds with ``-mno-amx-int8``: no AMX).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit  # noqa: E402
from rag.lm.local import default_threads, use_extra_bufts  # noqa: E402
from rag.lm.models import model_path  # noqa: E402
from rag.lm.probe import build_info, cpu_flags, new_llama  # noqa: E402

TEXT = " ".join(f"Passage {i}: the nonlocal statement rebinds a name in the nearest enclosing function scope."
                for i in range(200))
GRADE_TOKENS = 1250  # about one grade call's prompt


def measure(path: Path, threads: int, extra_bufts: bool, repeats: int,
            flash_attn: bool = False) -> tuple[float, float, float, float, float, bool]:
    with llama_log() as log:
        start = time.perf_counter()
        llama = new_llama(extra_bufts=extra_bufts, model_path=str(path), n_ctx=2048, n_batch=512, n_threads=threads,
                          n_threads_batch=threads, flash_attn=flash_attn, verbose=True)
        load_s = time.perf_counter() - start
        repacked = "CPU_REPACK model buffer" in log.read_text(errors="replace")
    long = llama.tokenize(TEXT.encode())[:GRADE_TOKENS]
    if len(long) < GRADE_TOKENS:
        raise SystemExit(f"the benchmark text has only {len(long)} tokens")
    tokens = long[:512]
    prompt, decode, grade, late = [], [], [], []
    for _ in range(repeats):
        llama.reset()
        start = time.perf_counter()
        llama.eval(tokens)
        prompt.append(len(tokens) / (time.perf_counter() - start))
        start = time.perf_counter()
        for token in tokens[:32]:
            llama.eval([token])
        decode.append(32 / (time.perf_counter() - start))
        llama.reset()
        start = time.perf_counter()
        llama.eval(long)
        grade.append(time.perf_counter() - start)
        start = time.perf_counter()
        for token in tokens[:16]:
            llama.eval([token])
        late.append(16 / (time.perf_counter() - start))
    del llama
    gc.collect()
    return load_s, max(prompt), max(decode), min(grade), max(late), repacked


@contextlib.contextmanager
def llama_log():
    """llama.cpp's C-level log (file descriptor 2) goes to a temporary file while the model loads."""
    with tempfile.NamedTemporaryFile(suffix=".log") as f:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            yield Path(f.name)
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="qwen2.5-coder-1.5b")
    parser.add_argument("--repeats", type=int, default=3, help="evaluations per load (best kept)")
    parser.add_argument("--rounds", type=int, default=2, help="loads per configuration, taking turns")
    parser.add_argument("--only", choices=("flash",), help="flash: flash attention off and on, nothing else")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    cores = default_threads()
    auto = use_extra_bufts("auto")
    # (label, threads, extra buffer types, flash attention)
    if args.only == "flash":
        configs = [(f"all cores, extra buffer types {'on' if auto else 'off'} (auto), flash attention off", cores,
                    auto, False),
                   (f"all cores, extra buffer types {'on' if auto else 'off'} (auto), flash attention on", cores,
                    auto, True)]
    else:
        configs = [(f"all cores, extra buffer types on{' (auto here)' if auto else ''}", cores, True, False),
                   (f"all cores, extra buffer types off{' (auto here)' if not auto else ''}", cores, False, False)]
        if cores > 1:
            configs.append((f"1 thread, extra buffer types {'on' if auto else 'off'}", 1, auto, False))
    lines = [f"llama.cpp configurations (`python benchmarks/llama_config.py`), {cores} usable cores, "
             f"AMX on this CPU: {'yes' if {'amx_int8', 'amx_tile'} & cpu_flags() else 'no'}, AVX-512: "
             f"{'yes' if 'avx512f' in cpu_flags() else 'no'}; best of {args.repeats} x {args.rounds} rounds, "
             "the configurations taking turns", "",
             f"Build: `{build_info().strip()}`", "",
             "| model | configuration | repacked | load s | prompt tok/s | decode tok/s | 1,250-token prompt s | "
             "decode tok/s after it | prompt ratio | decode ratio | 1,250-token ratio | decode-after ratio |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for model in args.models.split(","):
        path = model_path(model)
        best: dict[str, list] = {}
        for _ in range(args.rounds):
            for label, threads, extra, flash in configs:
                load_s, pp, tg, gs, late, repacked = measure(path, threads, extra, args.repeats, flash)
                old = best.get(label)
                best[label] = [min(load_s, old[0]) if old else load_s, max(pp, old[1]) if old else pp,
                               max(tg, old[2]) if old else tg, min(gs, old[3]) if old else gs,
                               max(late, old[4]) if old else late, repacked]
                print(f"{model} | {label}: prompt {pp:.1f} tok/s, decode {tg:.2f} tok/s, {GRADE_TOKENS} tokens "
                      f"{gs:.1f} s, decode after them {late:.2f} tok/s, repacked {repacked}", file=sys.stderr,
                      flush=True)
        base = best[configs[0][0]]
        for label, *_ in configs:
            load_s, pp, tg, gs, late, repacked = best[label]
            lines.append(f"| {model} | {label} | {'yes' if repacked else 'no'} | {load_s:.1f} | {pp:.1f} | {tg:.2f} | "
                         f"{gs:.1f} | {late:.2f} | {pp / base[1]:.2f} | {tg / base[2]:.2f} | {base[3] / gs:.2f} | "
                         f"{late / base[4]:.2f} |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
