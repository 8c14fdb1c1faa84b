"""The cue router's rules at an earlier commit against today's, paired, on route-labelled questions.

    python benchmarks/router_rounds.py --index-dir $SIEVE_HOME/demo/ops/index --before 6278fb3 \
        --report golden/ops_routes.jsonl:eighth,ninth golden/ops_sql_blind.jsonl:blind7 \
        --out benchmarks/results/router_rounds.md

No model call. ``rag/data/schemalink.py`` as it was at ``--before`` (read with ``git show``) and as it is in the
working tree each build their vocabulary from the same index (``--short-names``: linking names said short, as the
agent does by default) and route every question of the ``--report`` splits
(FILE:SPLIT,SPLIT; any golden file whose items carry ``route``). Per split and pooled: the share routed right by each
with its Wilson interval and the paired comparison (McNemar, exact), also without the questions that repeat one of
an earlier split of the same files (rag.eval.overlap.near_duplicates, as benchmarks/router_learned.py counts them);
then every question whose route changed, and what today's rules still get wrong.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.router_learned import repeating  # noqa: E402
from benchmarks.tables import emit, share, shown_path  # noqa: E402
from rag.stats.intervals import compare_paired  # noqa: E402

MODULE = "rag/data/schemalink.py"


def _short(module: ModuleType, on: bool) -> dict:
    """``short_names=True`` for ``module``'s Vocabulary.for_index when ``on`` and its rules know the setting."""
    import inspect

    return {"short_names": True} if on and "short_names" in inspect.signature(module.Vocabulary.for_index).parameters else {}


@contextlib.contextmanager
def _modules_at(rev: str, paths: list[str]):
    """While inside, each module of ``paths`` (rag/data/shortnames.py) imports as committed at ``rev``: a module
    the rules import when they build their vocabulary is then the one of their day."""
    saved = {}
    for path in paths:
        name = path.removesuffix(".py").replace("/", ".")
        importlib.import_module(name)
        saved[name] = sys.modules[name]
        sys.modules[name] = module_at(rev, path)
    try:
        yield
    finally:
        sys.modules.update(saved)


def module_at(rev: str, path: str) -> ModuleType:
    """The module at ``path`` (rag/data/schemalink.py) as committed at ``rev``, imported under its own name
    (``schemalink_<rev>``) beside today's."""
    source = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True)
    name = f"{Path(path).stem}_{rev}"
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up by name
    exec(compile(source.stdout, f"{rev}:{path}", "exec"), module.__dict__)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index-dir", type=Path, required=True, help="the ops demo's index (rag demo ops)")
    parser.add_argument("--before", required=True, help="the commit whose rules are compared with today's")
    parser.add_argument("--report", nargs="+", required=True, help="FILE:SPLIT[,SPLIT...] of route-labelled items")
    parser.add_argument("--short-names", action="store_true", help="both vocabularies link names said short, as the "
                        "agent's short_names (on by default) has them; rules from before the setting read whole names")
    parser.add_argument("--also", nargs="*", default=[], help="more modules taken at --before while the `before` "
                        "vocabulary is built (rag/data/shortnames.py), for a round that changed them")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from rag.config import load_settings
    from rag.data import Warehouse
    from rag.data import schemalink as today
    from rag.eval.golden import load_golden
    from rag.index.store import Index

    index = Index.load(args.index_dir, load_settings({"index_dir": args.index_dir}))
    warehouse = Warehouse(index.tables_path)
    rules = {"before": module_at(args.before, MODULE), "today": today}
    vocab = {"today": today.Vocabulary.for_index(index, warehouse, **_short(today, args.short_names))}
    with _modules_at(args.before, args.also):  # the vocabulary's helpers (rag.data.shortnames) as they were too
        vocab["before"] = rules["before"].Vocabulary.for_index(index, warehouse, **_short(rules["before"], args.short_names))

    sets, pooled, pooled_new = [], [], []
    for spec in args.report:
        file, _, splits = spec.rpartition(":")
        items = [i for i in load_golden(Path(file)) if i.meta.get("route")]
        order = splits.split(",")
        for k, split in enumerate(order):
            mine = [i for i in items if i.split == split]
            if not mine:
                raise SystemExit(f"{file}: no route-labelled items in split {split!r}")
            earlier = [i for i in items if i.split not in order[k:]]  # unreported splits, and reported ones before
            repeats = repeating(mine, earlier)
            sets.append((f"`{Path(file).stem}` `{split}`", mine))
            if repeats:
                sets.append((f"`{split}` without the {len(repeats)} that repeat an earlier split",
                             [i for i in mine if i.id not in repeats]))
            pooled += mine
            pooled_new += [i for i in mine if i.id not in repeats]
    sets += [("**pooled**", pooled), ("**pooled, without repeats**", pooled_new)]

    routes = {i.id: {k: m.read_cues(i.question, vocab[k]) for k, m in rules.items()} for i in pooled}
    command = (f"python benchmarks/router_rounds.py --index-dir {shown_path(args.index_dir)} --before {args.before} "
               f"--report {' '.join(args.report)}" + (" --short-names" if args.short_names else "")
               + (f" --also {' '.join(args.also)}" if args.also else "")
               + (f" --out {shown_path(args.out)}" if args.out else ""))
    lines = ["# The cue router's rules before and after a round, on questions neither was written with", "",
             f"Command: `{command}`", "",
             f"`before`: {', '.join([MODULE, *args.also])} at {args.before}; `today`: the working tree's. No model "
             "call.", "",
             "| questions | n | before | today | paired (McNemar) |", "|---|---|---|---|---|"]
    for name, items in sets:
        before = [float(routes[i.id]["before"].route == i.meta["route"]) for i in items]
        after = [float(routes[i.id]["today"].route == i.meta["route"]) for i in items]
        c = compare_paired(before, after, "before", "today")
        lines.append(f"| {name} | {len(items)} | {share(int(sum(before)), len(items))} | "
                     f"{share(int(sum(after)), len(items))} | {c.only_b} better, {c.only_a} worse, p={c.p:.4f} |")
    changed = [i for i in pooled if routes[i.id]["before"].route != routes[i.id]["today"].route]
    lines += ["", f"Routes that changed ({len(changed)}):", ""]
    lines += [f"- `{i.id}` (gold {i.meta['route']}): {routes[i.id]['before'].route} -> {routes[i.id]['today'].route}: "
              f"{i.question} ({routes[i.id]['today'].reason})" for i in changed]
    wrong = [i for i in pooled if routes[i.id]["today"].route != i.meta["route"]]
    lines += ["", f"What today's rules get wrong ({len(wrong)}):", ""]
    lines += [f"- `{i.id}` (gold {i.meta['route']}, today {routes[i.id]['today'].route}): {i.question} "
              f"({routes[i.id]['today'].reason})" for i in wrong]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
