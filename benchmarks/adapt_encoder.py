"""The shipped encoder against a copy adapted to each corpus by inverse cloze (rag.index.adapt): first retrieval.

    python benchmarks/adapt_encoder.py --only builtin --splits train,dev            # choosing the recipe
    python benchmarks/adapt_encoder.py --out benchmarks/results/adapt_encoder.md    # every corpus

Per corpus: the index with the shipped all-MiniLM-L6-v2, an encoder adapted on that corpus's own chunks (no
question is read), the index again with it, then dense and hybrid retrieval of both, paired on the same items
(sign-flip p for means, McNemar for shares). Corpora as in ``benchmarks/retrieval_stages.py``: Polygraph's dev
half (25 items with gold), Aegis's 13 questions with needles, the built-in golden set's ``--splits``. Adapted
encoders are kept in ``--work`` per corpus and recipe, so a rerun only scores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.retrieval_stages import Corpus, aegis, builtin, polygraph  # noqa: E402
from benchmarks.tables import emit, paired_cell  # noqa: E402
from rag.config import load_settings  # noqa: E402
from rag.index.adapt import AdaptConfig, adapt  # noqa: E402
from rag.index.store import index_text  # noqa: E402


def score(corpus: Corpus, mode: str) -> dict[str, list[float]]:
    corpus.retriever.mode = mode
    out: dict[str, list[float]] = {m: [] for m in corpus.metrics}
    for item in corpus.items:
        hits = corpus.retriever.retrieve(item.question, k=8).hits
        for m, fn in corpus.metrics.items():
            v = fn(item, hits)
            out[m].append(float("nan") if v is None else v)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="polygraph,aegis,builtin")
    ap.add_argument("--splits", default="train,dev", help="built-in golden set splits (test: once, for reporting)")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "benchmarks")
    ap.add_argument("--work", type=Path, default=Path("/tmp/sieve-adapt-bench"))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an AdaptConfig field")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    config = AdaptConfig()
    for pair in args.set:
        key, _, value = pair.partition("=")
        config = replace(config, **{key: type(getattr(config, key))(value)})
    recipe = hashlib.sha256(json.dumps(asdict(config), sort_keys=True).encode()).hexdigest()[:10]
    settings = load_settings()
    lines = [f"# Adapted encoder (inverse cloze on the corpus) against the shipped one, {time.strftime('%Y-%m-%d %H:%M')} UTC",
             "", f"`python benchmarks/adapt_encoder.py {' '.join(argv if argv is not None else sys.argv[1:])}`", "",
             f"Recipe {recipe}: `{json.dumps(asdict(config))}`", ""]
    wanted = args.only.split(",")
    pooled: dict[tuple[str, str], tuple[list[float], list[float]]] = {}  # (mode, metric) -> shipped, adapted values
    for name in ("polygraph", "aegis", "builtin"):
        if name not in wanted:
            continue
        work = args.work / name
        shipped = _corpora(name, args, work / "shipped", settings)
        chunks = shipped[0].retriever.index.chunks
        folder = work / f"encoder-{recipe}"
        if not (folder / "adapted.json").is_file():
            adapt([index_text(c) for c in chunks], settings.embedding_model, folder, config, corpus=name,
                  log=lambda m: print(m, file=sys.stderr))
        meta = json.loads((folder / "adapted.json").read_text(encoding="utf-8"))
        adapted = _corpora(name, args, work / f"adapted-{recipe}", settings.replace(embedding_model=str(folder)))
        for a, b in zip(shipped, adapted):
            lines += [f"## {a.name}", "", f"n = {len(a.items)}; encoder adapted on {meta['passages']} passages, "
                      f"{meta['pairs']} pairs, {meta['steps']} steps in {meta['seconds']} s (loss {meta['loss_first']} -> "
                      f"{meta['loss_last']}). In brackets after adapted: paired difference from shipped, p.", "",
                      "| encoder | mode | " + " | ".join(a.metrics) + " |", "| --- | --- |" + " --- |" * len(a.metrics)]
            for mode in ("dense", "hybrid"):
                base = score(a, mode)
                new = score(b, mode)
                lines.append(f"| shipped | {mode} | " + " | ".join(paired_cell(base[m], m in a.shares) for m in a.metrics) + " |")
                lines.append(f"| adapted | {mode} | " + " | ".join(paired_cell(new[m], m in a.shares, base[m]) for m in a.metrics) + " |")
                for m in a.metrics:
                    pooled.setdefault((mode, m), ([], []))[0].extend(base[m])
                    pooled[(mode, m)][1].extend(new[m])
            lines.append("")
        print("\n".join(lines[-12:]), file=sys.stderr)
    shared = sorted({m for (_, m), (values, _) in pooled.items() if len(values) > 0})
    ran = [n for n in ("polygraph", "aegis", "builtin") if n in wanted]
    if len(ran) > 1:  # one paired test over every item of the corpora run, per metric they share
        metrics = [m for m in ("Recall@4", "MRR@4", "Recall@8") if m in shared]
        if metrics:
            lines += [f"## Pooled: every item with gold of {', '.join(ran)}", "",
                      "| encoder | mode | " + " | ".join(metrics) + " |", "| --- | --- |" + " --- |" * len(metrics)]
            for mode in ("dense", "hybrid"):
                lines.append(f"| shipped | {mode} | " + " | ".join(paired_cell(pooled[(mode, m)][0], False) for m in metrics) + " |")
                lines.append(f"| adapted | {mode} | " + " | ".join(
                    paired_cell(pooled[(mode, m)][1], False, pooled[(mode, m)][0]) for m in metrics) + " |")
            lines.append("")
    emit(lines, args.out)
    return 0


def _corpora(name: str, args: argparse.Namespace, work: Path, settings) -> list[Corpus]:
    work.mkdir(parents=True, exist_ok=True)
    if name == "polygraph":
        return [polygraph(args.shared, work, settings)]
    if name == "aegis":
        return aegis(args.shared, work, settings)[:1]
    return [builtin(work, settings, args.splits.split(","))]


if __name__ == "__main__":
    raise SystemExit(main())
