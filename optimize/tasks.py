"""Build each role's train/dev/test examples from the golden set (and, for the judge, the human labels).

The ``agent`` task is the whole program end to end: every golden item, the Sieve module with its
bounded rewrite loop, scored by refusing exactly when it should and otherwise by the answerer's metric.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dspy

from optimize.roles import (
    AnswerStep,
    GradeStep,
    HydeStep,
    JudgeStep,
    RewriteStep,
    RoleTask,
    RouteStep,
    SQLStep,
    agent_example,
    answerer_example,
    grader_example,
    grader_metric,
    hyde_example,
    judge_example,
    judge_metric,
    label_item_id,
    make_agent_metric,
    make_answerer_metric,
    make_hyde_metric,
    make_rewriter_metric,
    make_sql_metric,
    rewriter_example,
    route_example,
    route_metric,
    sql_example,
)
from rag.agent.context import format_context
from rag.config import Settings
from rag.errors import InputError

SPLITS = ("train", "dev", "test")


def _by_split(examples: Sequence[tuple[str | None, dspy.Example]], role: str,
              missing: str | None = None) -> dict[str, list[dspy.Example]]:
    """Examples per split; ``missing`` (with ``{split}``) is the error when a split is empty."""
    out: dict[str, list[dspy.Example]] = {s: [] for s in SPLITS}
    for split, ex in examples:
        out[split if split in out else "train"].append(ex)
    for split in SPLITS:
        if not out[split]:
            raise InputError((missing or "the golden set has no '{split}' examples for the " + role + "; add items "
                              "with \"split\": \"{split}\" (about 40/20/40 train/dev/test)").format(split=split))
    return out


def build_tasks(roles: Sequence[str], items: Sequence[Any], retriever: Any, settings: Settings,
                lms: dict[str, dspy.BaseLM] | None = None, labels_path: Path | None = None,
                demo_chars: int | None = None) -> dict[str, RoleTask]:
    """``demo_chars``: the train examples, which demos are made from, show each passage cut to this many
    characters (a demo sits in every later prompt of its role); dev and test show them as the agent does."""
    from rag.eval.golden import gold_chunk_ids, interleave_types

    # round-robin over question types, so a split trimmed by --budget or --max-examples keeps every type
    # (the golden file is sorted by type: its first N items are all answerable)
    items = interleave_types(list(items))
    lms = lms or {}
    k = settings.top_k
    cut = settings.grade_passage_chars  # scored prompts show passages as the agent shows them

    def chars(item: Any) -> int | None:
        if item.split in ("dev", "test") or not demo_chars:
            return cut
        return min(cut, demo_chars) if cut else demo_chars
    retriever = _Memo(retriever)  # each role searches the same questions: retrieve each once
    chunks = retriever.index.chunks
    gold = {item.id: gold_chunk_ids(item, chunks) for item in items}
    answerable = [i for i in items if not i.should_refuse and gold[i.id]]
    tasks: dict[str, RoleTask] = {}

    if "grader" in roles:
        # only items whose gold is known (as rag eval scores the grader): an answerable item without gold
        # chunks would otherwise teach "not relevant" for a context that may well answer it
        known = [i for i in items if i.should_refuse or gold[i.id]]
        pairs = [(i.split, grader_example(i, retriever.search(i.question, k=k), gold[i.id], chars(i))) for i in known]
        splits = _by_split(pairs, "grader")
        kinds = {bool(ex.relevant) for ex in splits["train"]}
        if len(kinds) < 2:
            only = "relevant" if kinds == {True} else "not relevant"
            raise InputError("the grader needs both relevant and not-relevant examples in train, but every train "
                             f"item's first retrieval is {only}; add answerable and unanswerable items")
        tasks["grader"] = RoleTask("grader", GradeStep(settings.id_choices), grader_metric, **splits, calls_per_example=1)

    if "rewriter" in roles:
        missed = [i for i in answerable if i.type == "vague"
                  or not {h.chunk_id for h in retriever.search(i.question, k=k)} & gold[i.id]]
        pool = missed if len({i.split for i in missed}) == 3 else answerable
        splits = _by_split([(i.split, rewriter_example(i, gold[i.id])) for i in pool], "rewriter")
        step = GradeStep(settings.id_choices)
        grade = step if lms.get("grader") is None else _bound(step, lms["grader"])
        tasks["rewriter"] = RoleTask("rewriter", RewriteStep(), make_rewriter_metric(retriever, k, grade),
                                     **splits, calls_per_example=2)

    if "answerer" in roles:
        pairs = []
        for i in answerable:
            hits = _answer_passages(retriever, i, gold[i.id], k, settings)
            pairs.append((i.split, answerer_example(i, hits, chars(i), gold[i.id])))
        splits = _by_split(pairs, "answerer")
        judge = JudgeStep()
        tasks["answerer"] = RoleTask("answerer", AnswerStep(settings.id_choices), make_answerer_metric(judge, lms.get("judge")),
                                     **splits, calls_per_example=2)

    if "judge" in roles:
        from rag.paths import labels_path as default_labels

        path = default_labels(labels_path)
        if not Path(path).is_file():
            raise InputError(f"{path}: no judge labels; make them with: rag calibrate --run RUN_DIR")
        split_of = {i.id: i.split for i in items}
        labels = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
        # a label takes the split of the question it is about, so the judge is never tested on what it learnt from
        reference = {i.id: i.reference_answer for i in items}
        splits = _by_split([(split_of.get(label_item_id(lab)),
                             judge_example(lab, reference.get(label_item_id(lab), ""), _cited_context(retriever.index, lab)))
                            for lab in labels], "judge",
                           missing=f"{path}: no human labels for '{{split}}'-split questions; label some: "
                                   f"rag eval --config full --split {{split}} --limit 12, then rag calibrate --run RUN_DIR")
        tasks["judge"] = RoleTask("judge", JudgeStep(), judge_metric, **splits, calls_per_example=1)

    if "hyde" in roles:
        by_id = retriever.index.by_id
        pairs = [(i.split, hyde_example(i, gold[i.id], _start(by_id[sorted(gold[i.id])[0]].text, HYDE_DEMO_CHARS)))
                 for i in answerable]
        tasks["hyde"] = RoleTask("hyde", HydeStep(), make_hyde_metric(retriever, k), **_by_split(pairs, "hyde"),
                                 calls_per_example=1)

    if "router" in roles or "sql" in roles:
        tasks.update(_data_tasks(roles, items, retriever.index, gold, settings))

    if "agent" in roles:
        from rag.agent.module import Sieve

        usable = [i for i in items if i.should_refuse or gold[i.id]]
        splits = _by_split([(i.split, agent_example(i, gold[i.id])) for i in usable], "agent")
        agent = Sieve(retriever, max_rewrites=settings.max_rewrites, top_k=k)
        agent.lms = _Shared({r: lm for r, lm in lms.items() if r in ("grader", "rewriter", "answerer")})
        metric = make_agent_metric(JudgeStep(), lms.get("judge"), lambda ids: _as_hits(retriever.index, ids))
        # worst case per question: a grade per attempt, a rewrite between attempts, the answer, the judge
        calls = 2 * settings.max_rewrites + 3
        tasks["agent"] = RoleTask("agent", agent, metric, **splits, calls_per_example=calls)
    return tasks


def _data_tasks(roles: Sequence[str], items: Sequence[Any], index: Any, gold: dict[str, set[str]],
                settings: Settings) -> dict[str, RoleTask]:
    """The data route's router and SQL writer, over the index's tables; examples from the items that carry a
    ``route`` label (the router) and a ``gold_sql`` with its ``gold_result`` (the SQL writer)."""
    from rag.agent.dataroute import SOURCES, documents_text

    if not getattr(index, "tables_record", None) or getattr(index, "tables_path", None) is None:
        raise InputError(f"{index.dir}: the index has no tables, so it has no router or SQL writer to compile; index "
                         "a folder with table files (rag index FOLDER; try rag demo ops), or leave out --roles router,sql")
    from rag.data import Warehouse, schema_summary

    schema = schema_summary(index.tables_record)
    tasks: dict[str, RoleTask] = {}
    if "router" in roles and settings.router != "model":
        raise InputError(f"router = {settings.router}: the agent routes by the question's wording, with no model call, "
                         "so there is no router prompt to compile; compile it with --set router=model (and set "
                         "router = \"model\" where the compiled program runs), or leave out --roles router")
    if "router" in roles:
        labelled = [i for i in items if (i.meta or {}).get("route") in SOURCES]
        splits = _by_split([(i.split, route_example(i, schema)) for i in labelled], "router",
                           missing="the golden set has no '{split}' items with a \"route\" label (docs, data or "
                                   "both) for the router; add some (rag demo ops writes an example)")
        tasks["router"] = RoleTask("router", RouteStep(), route_metric, **splits, calls_per_example=1,
                                   demo_drops=("tables",))
    if "sql" in roles:
        queried = [i for i in items if (i.meta or {}).get("gold_sql") and (i.meta or {}).get("gold_result") is not None]
        pairs = [(i.split, sql_example(i, schema, documents_text(_as_hits(index, sorted(gold[i.id])))
                                       if i.meta.get("route") == "both" else "")) for i in queried]
        splits = _by_split(pairs, "sql", missing="the golden set has no '{split}' items with gold_sql and gold_result "
                                                 "for the SQL writer; add some (rag demo ops writes an example)")
        metric = make_sql_metric(Warehouse(index.tables_path), settings.sql_rows, settings.sql_timeout_s)
        tasks["sql"] = RoleTask("sql", SQLStep(text=settings.sql_output == "text"), metric, **splits,
                                calls_per_example=1, demo_drops=("tables",))
    return tasks


HYDE_DEMO_CHARS = 400  # a labelled HyDE demo shows this much of a gold chunk: the length the signature asks for


def _start(text: str, limit: int) -> str:
    text = " ".join(text.split())
    cut = text.rfind(" ", 0, limit)
    return text if len(text) <= limit else text[: cut if cut > limit // 2 else limit]


class _Shared(dict):
    """Shared, not copied, when an optimizer deep-copies the program (LMs are process-wide resources)."""

    def __deepcopy__(self, memo: dict) -> _Shared:
        return self


class _Memo:
    """The retriever with each (query, k) searched once; shared, not copied, by the optimizers' deep copies."""

    def __init__(self, retriever: Any):
        self.index, self._retriever, self._seen = retriever.index, retriever, {}

    def search(self, query: str, k: int | None = None) -> list[Any]:
        if (query, k) not in self._seen:
            self._seen[query, k] = self._retriever.search(query, k=k)
        return self._seen[query, k]

    def retrieve(self, query: str, k: int | None = None, expansion: Any = None, **filters: Any) -> Any:
        """As :meth:`Retriever.retrieve`; memoised only without query stages (their lists depend on the LM)."""
        if expansion is None and not filters:
            from rag.retrieval.retriever import Retrieval

            return Retrieval(hits=self.search(query, k=k))
        return self._retriever.retrieve(query, k=k, expansion=expansion, **filters)

    def __deepcopy__(self, memo: dict) -> _Memo:
        return self


def _answer_passages(retriever: Any, item: Any, gold: set[str], k: int, settings: Settings) -> list[Any]:
    """The passages the agent's answerer would read for ``item`` once its grader accepted the first retrieval:
    all of it with ``answer_context = "graded"`` (the default: the answerer must find the answer among passages
    on related topics, as it does in the agent), only the gold ones with ``"accepted"`` (a grader that lists
    exactly the passages that state the answer). A first retrieval without gold shows the gold passages."""
    hits = retriever.search(item.question, k=k)
    if not {h.chunk_id for h in hits} & gold:
        return _as_hits(retriever.index, sorted(gold)[:2])
    return list(hits) if settings.answer_context == "graded" else [h for h in hits if h.chunk_id in gold]


def _cited_context(index: Any, label: dict[str, Any]) -> str:
    """The passages a labelled answer cites, formatted as the judge sees passages in ``rag eval`` (ids no longer
    in the index are left out)."""
    return format_context(_as_hits(index, [c for c in label.get("citations") or [] if c in index.by_id]))


def _as_hits(index: Any, ids: Sequence[str]) -> list[Any]:
    """Chunks shown as if retrieved (rank order = id order): gold ones for answerer examples, cited ones for the judge's."""
    from rag.retrieval.retriever import Hit

    return [Hit(chunk_id=c.id, text=c.text, title=c.title, source=c.source, rank=r, score=0.0, stages={})
            for r, c in enumerate((index.by_id[i] for i in ids), 1)]


class _bound(dspy.Module):
    """Run a role program with its own LM, whatever LM the caller has configured."""

    def __init__(self, program: dspy.Module, lm: dspy.BaseLM):
        super().__init__()
        self.program, self._lm = program, lm

    def forward(self, **inputs: Any) -> dspy.Prediction:
        with dspy.context(lm=self._lm):
            return self.program(**inputs)
