"""The cue router's rules at an earlier commit against today's, paired, on route-labelled questions.

    python benchmarks/router_rounds.py --index-dir $SIEVE_HOME/demo/ops/index --before 6278fb3 \
        --report golden/ops_routes.jsonl:eighth,ninth golden/ops_sql_blind.jsonl:blind7 \
        --out benchmarks/results/router_rounds.md

No model call. The cue router as it was at ``--before`` (the whole ``rag`` package of that commit, exported with
``git archive`` and run in a child process, so a round that moved or split modules compares too) and as it is in the
working tree each build their vocabulary from the same index (``--before-index``: another one for the earlier rules,
when the round changed what the index holds, such as the demo's sidecars) and route every question of the
``--report`` splits (FILE:SPLIT,SPLIT; any golden file whose items carry ``route``); ``--short-names`` links names
said short, as the agent does by default. Per split and pooled: the share routed right by each with its Wilson
interval and the paired comparison (McNemar, exact), also without the questions that repeat one of an earlier split
of the same files (rag.eval.overlap.near_duplicates, as benchmarks/router_learned.py counts them);
then every question whose route changed, and what today's rules still get wrong.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.router_learned import repeating  # noqa: E402
from benchmarks.tables import emit, share, shown_path  # noqa: E402
from rag.stats.intervals import compare_paired  # noqa: E402


def _short(module: ModuleType, on: bool) -> dict:
    """``short_names=True`` for ``module``'s Vocabulary.for_index when ``on`` and its rules know the setting."""
    import inspect

    return {"short_names": True} if on and "short_names" in inspect.signature(module.Vocabulary.for_index).parameters else {}


_CHILD = """
import inspect, json, sys
from pathlib import Path
from rag.config import load_settings
from rag.data import Warehouse
from rag.data import schemalink
from rag.index.store import Index
job = json.load(sys.stdin)
index_dir = Path(job["index_dir"])
index = Index.load(index_dir, load_settings({"index_dir": index_dir}))
short = job["short_names"] and "short_names" in inspect.signature(schemalink.Vocabulary.for_index).parameters
vocab = schemalink.Vocabulary.for_index(index, Warehouse(index.tables_path), **({"short_names": True} if short else {}))
routes = {}
for key, question in job["questions"].items():
    cues = schemalink.read_cues(question, vocab)
    routes[key] = [cues.route, cues.reason]
json.dump(routes, sys.stdout)
"""


@dataclass
class Routed:
    route: str
    reason: str


def routes_at(rev: str, index_dir: Path, questions: dict[str, str], short_names: bool) -> dict[str, Routed]:
    """Per question id, the route and reason the cue router of commit ``rev`` gives: its ``rag`` package exported
    to a temporary folder and imported there by a child process (first on its path, before the working tree)."""
    with tempfile.TemporaryDirectory(prefix=f"rules-{rev}-") as tree:
        archive = subprocess.run(["git", "archive", rev, "rag"], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        job = json.dumps({"index_dir": str(index_dir.resolve()), "questions": questions, "short_names": short_names})
        child = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {tree!r})\n{_CHILD}"],
                               input=job, capture_output=True, text=True, cwd=tree)
        if child.returncode:
            raise SystemExit(f"the rules at {rev} failed to route:\n{child.stderr[-2000:]}")
    return {key: Routed(*pair) for key, pair in json.loads(child.stdout).items()}


def module_at(rev: str, path: str) -> ModuleType:
    """The module at ``path`` (rag/data/sqlrepair.py) as committed at ``rev``, imported under its own name
    (``sqlrepair_<rev>``) beside today's."""
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
    parser.add_argument("--before-index", type=Path, help="the index the `before` rules read (default: --index-dir), "
                        "for a round that changed what the index holds (the demo's sidecars: rebuild the demo at "
                        "--before into another folder and index it)")
    parser.add_argument("--short-names", action="store_true", help="both vocabularies link names said short, as the "
                        "agent's short_names (on by default) has them; rules from before the setting read whole names")
    parser.add_argument("--also", nargs="*", default=[], help="kept for earlier command lines: every module is now "
                        "taken at --before (rag/data/shortnames.py was named here when only the rules' file was)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from rag.config import load_settings
    from rag.data import Warehouse
    from rag.data import schemalink as today
    from rag.eval.golden import load_golden
    from rag.index.store import Index

    index = Index.load(args.index_dir, load_settings({"index_dir": args.index_dir}))
    warehouse = Warehouse(index.tables_path)
    vocab = today.Vocabulary.for_index(index, warehouse, **_short(today, args.short_names))

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

    before = routes_at(args.before, args.before_index or args.index_dir, {i.id: i.question for i in pooled},
                       args.short_names)
    routes = {i.id: {"before": before[i.id], "today": today.read_cues(i.question, vocab)} for i in pooled}
    command = (f"python benchmarks/router_rounds.py --index-dir {shown_path(args.index_dir)} --before {args.before} "
               + (f"--before-index {shown_path(args.before_index)} " if args.before_index else "")
               + f"--report {' '.join(args.report)}" + (" --short-names" if args.short_names else "")
               + (f" --also {' '.join(args.also)}" if args.also else "")
               + (f" --out {shown_path(args.out)}" if args.out else ""))
    lines = ["# The cue router's rules before and after a round, on questions neither was written with", "",
             f"Command: `{command}`", "",
             f"`before`: the `rag` package at {args.before}"
             + (f", reading {shown_path(args.before_index)}" if args.before_index else "")
             + f"; `today`: the working tree's, reading {shown_path(args.index_dir)}. No model call.", "",
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
