"""How well people agree on a question's route, and where the cue router stands among them.

    python benchmarks/route_agreement.py --index-dir $SIEVE_HOME/demo/ops/index \
        --golden golden/ops_routes.jsonl --splits nineteenth,twentieth \
        --relabels golden/ops_route_relabels.jsonl --out benchmarks/results/route_agreement.md

No model call. Each question of ``--splits`` carries its writer's ``route``; ``--relabels`` holds, per question id
and labeller, the route another person gave it reading only the question and the sources (``{"id", "labeller",
"route"}`` per line). Reported, each with its Wilson interval: every pair of people's agreement (and Cohen's
kappa), the cue router as shipped (rag.data.schemalink, ``short_names`` on, as the agent routes) against each
person and against the majority of them, and the router on the questions every person labels alike. A routing goal
above what people agree on measures the labels, not the router.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit, share, shown_path  # noqa: E402

ROUTES = ("docs", "data", "both")


def read_relabels(path: Path, ids: set[str]) -> dict[str, dict[str, str]]:
    """Per labeller, question id -> route; every id of ``ids`` must be labelled once by each labeller."""
    found: dict[str, dict[str, str]] = collections.defaultdict(dict)
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("route") not in ROUTES or not row.get("labeller") or not row.get("id"):
            raise SystemExit(f"{path}:{n}: expected {{\"id\", \"labeller\", \"route\"}} with route one of {ROUTES}")
        if row["id"] in ids:
            found[row["labeller"]][row["id"]] = row["route"]
    for who, labels in found.items():
        if missing := ids - set(labels):
            raise SystemExit(f"{path}: labeller {who} did not label {len(missing)} of the questions, e.g. "
                             f"{sorted(missing)[0]}")
    return dict(found)


def kappa(a: list[str], b: list[str]) -> float | None:
    """Cohen's kappa of two raters over any number of labels: (p_o - p_e) / (1 - p_e); None when p_e is 1."""
    n = len(a)
    p_o = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = collections.Counter(a), collections.Counter(b)
    p_e = sum(ca[k] * cb[k] for k in ca) / n / n
    return None if p_e == 1 else (p_o - p_e) / (1 - p_e)


def majority(labels: list[str]) -> str | None:
    """The route most people gave, None on a tie."""
    top = collections.Counter(labels).most_common()
    return top[0][0] if len(top) == 1 or top[0][1] > top[1][1] else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index-dir", type=Path, required=True, help="the ops demo's index (rag demo ops)")
    parser.add_argument("--golden", type=Path, required=True, help="route-labelled questions (the writers' labels)")
    parser.add_argument("--splits", required=True, help="comma-separated splits of --golden that were relabelled")
    parser.add_argument("--relabels", type=Path, required=True, help="JSON lines {id, labeller, route}")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from rag.config import load_settings
    from rag.data import Warehouse
    from rag.data.schemalink import Vocabulary, read_cues
    from rag.eval.golden import load_golden
    from rag.index.store import Index

    splits = args.splits.split(",")
    items = [i for i in load_golden(args.golden) if i.split in splits and i.meta.get("route")]
    if not items:
        raise SystemExit(f"{args.golden}: no route-labelled items in {args.splits}")
    people = {"writer": {i.id: i.meta["route"] for i in items}}
    people |= read_relabels(args.relabels, {i.id for i in items})
    index = Index.load(args.index_dir, load_settings({"index_dir": args.index_dir}))
    vocab = Vocabulary.for_index(index, Warehouse(index.tables_path), short_names=True)
    router = {i.id: read_cues(i.question, vocab).route for i in items}
    ids = [i.id for i in items]
    votes = {q: majority([labels[q] for labels in people.values()]) for q in ids}
    unanimous = [q for q in ids if len({labels[q] for labels in people.values()}) == 1]

    def agree(a: dict[str, str], b: dict[str, str], over: list[str]) -> str:
        return share(sum(a[q] == b[q] for q in over), len(over))

    command = (f"python benchmarks/route_agreement.py --index-dir {shown_path(args.index_dir)} --golden "
               f"{shown_path(args.golden)} --splits {args.splits} --relabels {shown_path(args.relabels)}"
               + (f" --out {shown_path(args.out)}" if args.out else ""))
    lines = ["# Route labels: how people agree, and the cue router among them", "", f"Command: `{command}`", "",
             f"{len(ids)} questions of {', '.join(f'`{s}`' for s in splits)}; people: {', '.join(people)} (the "
             "writer wrote each question with its label; the others labelled it from the question and the sources "
             "alone). No model call.", "",
             "| pair | agree | Cohen's kappa |", "|---|---|---|"]
    for (a, la), (b, lb) in itertools.combinations(people.items(), 2):
        k = kappa([la[q] for q in ids], [lb[q] for q in ids])
        lines.append(f"| {a} / {b} | {agree(la, lb, ids)} | {k:.2f} |")
    for who, labels in people.items():
        k = kappa([router[q] for q in ids], [labels[q] for q in ids])
        lines.append(f"| cue router / {who} | {agree(router, labels, ids)} | {k:.2f} |")
    decided = [q for q in ids if votes[q]]
    lines += ["", "| reference | n | cue router right |", "|---|---|---|",
              f"| the majority of the {len(people)} people (no tie) | {len(decided)} | "
              f"{agree(router, votes, decided)} |",
              f"| questions every person labels alike | {len(unanimous)} | "
              f"{agree(router, people['writer'], unanimous)} |", ""]
    split_by = collections.Counter(tuple(sorted({labels[q] for labels in people.values()})) for q in ids
                                   if q not in unanimous)
    lines += [f"Where people differ ({len(ids) - len(unanimous)}): " + ", ".join(
        f"{' / '.join(k)} {v}" for k, v in split_by.most_common()) + ".", ""]
    by_id = {i.id: i for i in items}
    lines += ["Questions people label differently (writer's label first):", ""]
    lines += [f"- `{q}`: " + ", ".join(f"{who} {labels[q]}" for who, labels in people.items())
              + f"; router {router[q]}: {by_id[q].question}" for q in ids if q not in unanimous]
    missed = [q for q in unanimous if router[q] != people["writer"][q]]
    lines += ["", f"Questions every person labels alike that the router routes elsewhere ({len(missed)}):", ""]
    lines += [f"- `{q}` ({people['writer'][q]}, router {router[q]}): {by_id[q].question}" for q in missed]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
