"""Compile benchmark: wall time, LM calls and the dev/test metric gain of each optimizer, side by side.

    python benchmarks/compile_bench.py --optimizers bootstrap,random-search,mipro,gepa --roles grader --max-examples 4,4,10
    python benchmarks/compile_bench.py --from-artifacts artifacts --out benchmarks/results/compile.md   # tabulate only

Each optimizer runs through ``rag compile``'s own code (optimize.compile.compile_program) on the configured
index and golden set. ``--max-examples`` caps the splits identically for every optimizer, so they are scored on
the same train/dev/test examples (a ``--budget`` alone would trim each optimizer's splits differently). Artifacts
go to a scratch folder (``--artifacts-dir`` to choose it, e.g. to run optimizers in two processes and tabulate the
folder afterwards). The table is built from the artifacts' manifests, which record what was spent.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _gain(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "n/a"
    return f"{after - before:+.3f}"


def _tokens(spend: dict) -> str:
    """Prompt + completion tokens the model processed (cache hits record none)."""
    total = sum(int(u.get("prompt_tokens") or 0) + int(u.get("completion_tokens") or 0)
                for u in (spend.get("tokens") or {}).values())
    return f"{total:,}"


def _chosen(art) -> dict[str, str]:
    """Per role: the demos the optimizer kept and whether it replaced the instruction (and with what)."""
    from rag.report.compare import artifact_prompts

    out: dict[str, list[str]] = {}
    for row in artifact_prompts(art).itertuples():
        what = f"{row.n_demos} demos" + (f", new instruction: \"{' '.join(row.instructions.split())[:60]}\""
                                         if row.changed else ", instruction kept")
        out.setdefault(row.role, []).append(what)
    roles = set((art.manifest.get("scores") or {}))
    if "agent" in roles:  # the end-to-end role changed every step's predictor
        return {"agent": "; ".join(f"{r}: {w[0]}" for r, w in out.items() if r in ("grader", "rewriter", "answerer"))}
    return {r: "; ".join(w) for r, w in out.items()}


def table(arts: list) -> str:
    lines = ["| optimizer | artifact | wall s | LM calls (planned <=) | to the model | tokens to the model | role "
             "| train/dev/test | dev before -> after | test before -> after | test gain | what it chose |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for art in arts:
        m, chosen = art.manifest, _chosen(art)
        spend = m.get("spend", {})
        first = True
        for role, sc in sorted((m.get("scores") or {}).items()):
            effort = (m.get("optimizer_settings") or {}).get("effort", "light")
            head = (f"| {m.get('optimizer')} ({effort}) | {m.get('name')} | {spend.get('wall_s')} | "
                    f"{spend.get('lm_calls')} ({spend.get('planned_calls_upper_bound')}) | "
                    f"{'n/a' if spend.get('model_calls') is None else spend['model_calls']} | {_tokens(spend)} |"
                    ) if first else "| | | | | | |"
            size = ((m.get("golden") or {}).get("sizes") or {}).get(role) or {}
            split = "/".join(str(size.get(k, "?")) for k in ("train", "dev", "test"))
            lines.append(f"{head} {role} | {split} | {_fmt(sc.get('dev_before'))} -> {_fmt(sc.get('dev_after'))} | "
                         f"{_fmt(sc.get('test_before'))} -> {_fmt(sc.get('test_after'))} | "
                         f"{_gain(sc.get('test_before'), sc.get('test_after'))} | {chosen.get(role, '')} |")
            first = False
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--optimizers", default="bootstrap", help="comma-separated: bootstrap,random-search,mipro,gepa")
    ap.add_argument("--budget", type=int, help="LM-call cap per optimizer (trims each optimizer's splits to fit)")
    ap.add_argument("--max-examples", default="4,4,10", help="N or TRAIN,DEV,TEST per role, the same for every optimizer")
    ap.add_argument("--effort", default="light", help="light or medium")
    ap.add_argument("--artifacts-dir", type=Path, help="where the runs' artifacts go (default: a scratch folder)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="any setting, as for rag --set (e.g. top_k=2: shorter prompts, faster runs)")
    ap.add_argument("--golden", type=Path, default=ROOT / "golden" / "python_ref.jsonl")
    ap.add_argument("--roles", default="grader,rewriter,answerer")
    ap.add_argument("--from-artifacts", type=Path, help="only tabulate the artifacts in this folder")
    ap.add_argument("--keep", action="store_true", help="write artifacts into the project's artifacts/")
    ap.add_argument("--fresh", action="store_true", help="ignore finished work from earlier runs (rag compile --fresh)")
    ap.add_argument("--repeat", action="store_true",
                    help="then compile the first optimizer again, ignoring checkpoints: what the DSPy cache saves")
    ap.add_argument("--out", type=Path, help="also write the table (Markdown) here")
    ap.add_argument("--note", default="", help="a sentence for the header, e.g. the commands that made the artifacts")
    args = ap.parse_args()

    from rag.agent import artifacts

    if args.from_artifacts:
        arts = artifacts.list_artifacts(args.from_artifacts)
    else:
        from optimize.compile import compile_program, parse_max_examples, parse_roles
        from rag.config import load_settings, parse_assignments
        from rag.lm.configure import configure_dspy

        scratch = args.artifacts_dir or Path(tempfile.mkdtemp(prefix="sieve-compile-bench-"))
        settings = load_settings({**parse_assignments(args.set), "artifacts_dir": None if args.keep else scratch})
        configure_dspy(settings)
        roles, tag = parse_roles(args.roles), "+".join(parse_roles(args.roles))
        names = [o.strip() for o in args.optimizers.split(",") if o.strip()]
        # (optimizer, artifact name, ignore checkpoints): each optimizer, then with --repeat the first one again
        runs = [(n, f"bench-{n}-{tag}", args.fresh) for n in names]
        runs += [(names[0], f"bench-{names[0]}-{tag}-repeat", True)] if args.repeat else []
        arts = []
        for name, out, fresh in runs:
            print(f"== {out}" + (" (checkpoints ignored, DSPy cache on)" if fresh else ""), file=sys.stderr)
            result = compile_program(settings, golden=args.golden, optimizer=name, roles=roles, budget=args.budget,
                                     out=out, effort=args.effort, max_examples=parse_max_examples(args.max_examples),
                                     fresh=fresh)
            arts.append(result.artifact)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    repeat = any(a.name.endswith("-repeat") for a in arts)
    argv = ["NOTE" if i and sys.argv[i - 1] == "--note" else a for i, a in enumerate(sys.argv)][1:]
    text = (f"# Compile benchmark\n\nGenerated by `python benchmarks/compile_bench.py {shlex.join(argv)}` on "
            f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC (load average {load:.1f} on "
            f"{os.cpu_count()} cores). {'NOTE: ' + args.note + ' ' if args.note else ''}"
            f"Scores are each role's metric (optimize/roles.py), 0..1, on the splits recorded in each manifest. "
            f"Wall time and LM calls include scoring before and after. All runs share one DSPy cache: 'LM calls' "
            f"counts every call, 'to the model' only those the cache did not answer."
            + (" A `-repeat` artifact is the first optimizer compiled again with its checkpoints ignored (`--fresh`),"
               " so the DSPy cache answers its LM calls." if repeat else "")
            + f"\n\n{table(arts)}\n")
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
