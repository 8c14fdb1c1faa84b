"""One small DSPy program per role, its examples built from the golden set, and its metric.

Each role is compiled on its own (cheaper and clearer than end to end on a small model), then the
compiled predictor is put back into the agent. Each metric is a function of rag.eval.decisions, the definitions
``rag eval`` pools over a run (rag.eval.agent_metrics), so a role's compile score and its eval figure agree:

    role      inputs                                   metric (1.0 = perfect)             reported by rag eval as
    grader    question, context (first retrieval)      grader_score: 0.6 x set-level      grader score
                                                       agreement + 0.4 x chunk-level F1
                                                       of the passages the agent uses
    rewriter  question, tried queries, grader reason   rewrite_succeeded: a gold chunk is  rewrite success rate
                                                       in the top-k for the new query and
                                                       the grader then passes
    answerer  question, the agent's answer context     answer_score: judged correct,       answer score
                                                       judged faithful, citations valid
    judge     question, reference, candidate, context  agreement with the human labels (golden/)
    hyde      question                                 Recall@k of the first retrieval with  Recall@k (rag eval
                                                       the hypothetical passage searched     --retrieval-only,
                                                       too (no model scores it)              hyde=true)
    router    question, the tables' schema             the route chosen is the item's label  routing accuracy
                                                       (docs, data or both; no model)
    sql       question, schema, the gold passages      the statement, through the SQL guard, SQL execution
              (for a "both" item)                      returns the gold rows (no model)      accuracy
    agent     question (the whole program, end to end) refuses exactly when it should; else the
                                                       answerer's metric on its answer and cited passages
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import dspy

from rag.agent.context import context_ids, extract_citations, format_context, split_citations
from rag.agent.judging import NO_PASSAGES
from rag.eval.decisions import answer_score, grader_score, rewrite_succeeded
from rag.lm.adapter import shown_ids
from signatures import Answerer, Grader, HypotheticalPassage, Judge, Rewriter, SourceRouter, SQLWriter

ROLE_NAMES = ("grader", "rewriter", "answerer", "judge")
NOT_RELEVANT_REASON = "The passages do not state the answer to the question."


class _ContextStep(dspy.Module):
    """One role over (question, context), called as the agent calls it: with ``id_choices`` its ``*_ids`` outputs
    may name only the passages in the context (``rag.lm.adapter.shown_ids``)."""

    signature: type[dspy.Signature]

    def __init__(self, id_choices: bool = True):
        super().__init__()
        self.predict = dspy.Predict(self.signature)
        self.id_choices = id_choices

    def forward(self, question: str, context: str) -> dspy.Prediction:
        with shown_ids(context_ids(context) if self.id_choices else ()):
            return self.predict(question=question, context=context)


class GradeStep(_ContextStep):
    signature = Grader


class RewriteStep(dspy.Module):
    def __init__(self):
        super().__init__()
        self.predict = dspy.Predict(Rewriter)

    def forward(self, question: str, tried_queries: list[str], grader_reason: str) -> dspy.Prediction:
        return self.predict(question=question, tried_queries=tried_queries, grader_reason=grader_reason)


class AnswerStep(_ContextStep):
    signature = Answerer


class JudgeStep(dspy.Module):
    def __init__(self):
        super().__init__()
        self.predict = dspy.Predict(Judge)

    def forward(self, question: str, reference_answer: str, candidate_answer: str, context: str) -> dspy.Prediction:
        return self.predict(question=question, reference_answer=reference_answer,
                            candidate_answer=candidate_answer, context=context)


class HydeStep(dspy.Module):
    """The query stage's HyDE predictor alone (``Sieve.expander.hyde``)."""

    def __init__(self):
        super().__init__()
        self.predict = dspy.Predict(HypotheticalPassage)

    def forward(self, question: str) -> dspy.Prediction:
        return self.predict(question=question)


class RouteStep(dspy.Module):
    """The data route's router alone (``Sieve.data.choose``)."""

    def __init__(self):
        super().__init__()
        self.predict = dspy.Predict(SourceRouter)

    def forward(self, question: str, tables: str) -> dspy.Prediction:
        return self.predict(question=question, tables=tables)


class SQLStep(dspy.Module):
    """The data route's SQL writer alone (``Sieve.data.write``), on its first try (no previous statement), answering
    as the agent has it answer: a ```sql block (``sql_output = "text"``, rag.agent.sqltext) or JSON."""

    def __init__(self, text: bool = True):
        super().__init__()
        self.predict = dspy.Predict(SQLWriter)
        self.text = text

    def forward(self, question: str, tables: str, documents: str, previous: str = "") -> dspy.Prediction:
        from rag.agent.sqltext import writing

        with writing(self.text):
            return self.predict(question=question, tables=tables, documents=documents, previous=previous)


@dataclass
class RoleTask:
    """Everything an optimizer needs for one role."""

    role: str
    program: dspy.Module
    metric: Callable[..., float]
    train: list[dspy.Example]
    dev: list[dspy.Example]
    test: list[dspy.Example]
    calls_per_example: int  # LM calls per example: the role's own call plus the metric's
    # inputs that are the same in every call of the role (the tables' schema): a demo leaves them out, since the
    # prompt it sits in shows them already, so demos stay a few lines each
    demo_drops: tuple[str, ...] = ()


# ------------------------------------------------------------------ examples
def grader_example(item: Any, hits: Sequence[Any], gold: set[str], max_chars: int | None = None) -> dspy.Example:
    """``max_chars``: passages cut as the agent cuts them for its grader (the ``grade_passage_chars`` setting)."""
    shown = [h.chunk_id for h in hits]
    chosen = [c for c in shown if c in gold]
    return dspy.Example(question=item.question, context=format_context(hits, max_chars), relevant=bool(chosen),
                        reason="" if chosen else NOT_RELEVANT_REASON, relevant_chunk_ids=chosen,
                        shown_ids=shown, item_id=item.id).with_inputs("question", "context")


def rewriter_example(item: Any, gold: set[str]) -> dspy.Example:
    return dspy.Example(question=item.question, tried_queries=[item.question], grader_reason=NOT_RELEVANT_REASON,
                        gold_ids=sorted(gold), item_id=item.id).with_inputs("question", "tried_queries", "grader_reason")


def answerer_example(item: Any, hits: Sequence[Any], max_chars: int | None = None,
                     gold: set[str] | None = None) -> dspy.Example:
    """``gold``: the passages that state the answer, which a labelled demo cites (else every passage shown)."""
    ids = [h.chunk_id for h in hits]
    cited = [i for i in ids if i in gold] if gold else []
    return dspy.Example(question=item.question, context=format_context(hits, max_chars), answer=item.reference_answer,
                        cited_ids=cited or ids, reference_answer=item.reference_answer, shown_ids=ids,
                        item_id=item.id).with_inputs("question", "context")


def hyde_example(item: Any, gold: set[str], passage: str) -> dspy.Example:
    """``passage``: the start of a gold chunk, which a labelled demo shows as the passage to write (the corpus's
    own style and vocabulary)."""
    return dspy.Example(question=item.question, passage=passage, gold_ids=sorted(gold),
                        item_id=item.id).with_inputs("question")


# a labelled router demo's reason, by route (the model writes its own; a demo needs one)
ROUTE_REASONS = {"docs": "a rule or definition the documents state",
                 "data": "values stored in the table rows",
                 "both": "a number the documents set, applied to the table rows"}


def route_example(item: Any, schema: str) -> dspy.Example:
    route = item.meta["route"]
    return dspy.Example(question=item.question, tables=schema, reason=ROUTE_REASONS[route], source=route,
                        item_id=item.id).with_inputs("question", "tables")


def sql_example(item: Any, schema: str, documents: str) -> dspy.Example:
    """``documents``: the passages a "both" item's rule is stated in (what the agent hands the writer once the
    grader accepted them); empty for a data item."""
    return dspy.Example(question=item.question, tables=schema, documents=documents, previous="",
                        sql=item.meta["gold_sql"], gold_result=item.meta["gold_result"],
                        item_id=item.id).with_inputs("question", "tables", "documents", "previous")


def agent_example(item: Any, gold: set[str]) -> dspy.Example:
    return dspy.Example(question=item.question, should_refuse=bool(item.should_refuse), gold_ids=sorted(gold),
                        reference_answer=item.reference_answer, item_id=item.id).with_inputs("question")


def label_item_id(label: dict[str, Any]) -> str | None:
    """The golden item a human label is about: ``id`` as ``rag calibrate`` writes it (``item_id`` also read)."""
    return label.get("id") or label.get("item_id")


def judge_example(label: dict[str, Any], reference_answer: str = "", passages: str = "") -> dspy.Example:
    """``reference_answer``: the golden item's, for labels made interactively (they do not copy it). ``passages``:
    the context for a label that stores none, the passages its answer cites (what "faithful" was labelled against)."""
    return dspy.Example(question=label["question"], reference_answer=label.get("reference_answer") or reference_answer,
                        candidate_answer=label["answer"], context=label.get("context") or passages or NO_PASSAGES,
                        correct=bool(label["correct"]), faithful=bool(label["faithful"]),
                        reason=label.get("note", ""), item_id=label_item_id(label)
                        ).with_inputs("question", "reference_answer", "candidate_answer", "context")


# ------------------------------------------------------------------ metrics
def grader_metric(example: dspy.Example, pred: dspy.Prediction, trace: Any = None) -> float:
    """rag.eval.decisions.grader_score of this one grade step (rag eval's "grader score" is its mean over steps)."""
    score = grader_score(bool(pred.relevant), example.shown_ids, [str(i) for i in (pred.relevant_chunk_ids or [])],
                         set(example.relevant_chunk_ids))
    return score >= 0.8 if trace is not None else score


def make_rewriter_metric(retriever: Any, k: int, grade: dspy.Module | None) -> Callable[..., float]:
    """rag.eval.decisions.rewrite_succeeded for the new query: 1 when a gold chunk is in its top-k and ``grade`` then
    passes, else 0 (rag eval's rewrite success rate). ``grade=None`` scores the retrieval half alone (a probe)."""
    def rewriter_metric(example: dspy.Example, pred: dspy.Prediction, trace: Any = None) -> float:
        query = " ".join(str(pred.query or "").split())
        if not query:
            return 0.0
        hits = retriever.search(query, k=k)
        gold, ids = set(example.gold_ids), [h.chunk_id for h in hits]
        if grade is None or not gold & set(ids):
            return float(bool(gold & set(ids)))
        verdict = grade(question=example.question, context=format_context(hits))
        return float(rewrite_succeeded(bool(verdict.relevant), ids, gold))
    return rewriter_metric


def make_hyde_metric(retriever: Any, k: int) -> Callable[..., float]:
    """Recall@k of the gold chunks when the question is searched with the hypothetical passage (as the agent's
    first retrieval does with ``hyde=true``); bootstrapping keeps a demo whose passage found a gold chunk."""
    from rag.eval.metrics import hits_recall, with_duplicates
    from rag.retrieval.expansion import Expansion

    def hyde_metric(example: dspy.Example, pred: dspy.Prediction, trace: Any = None) -> float:
        passage = " ".join(str(getattr(pred, "passage", "") or "").split())
        hits = retriever.retrieve(example.question, k=k, expansion=Expansion(passage=passage or None)).hits
        recall = hits_recall(hits, with_duplicates(example.gold_ids, hits))  # as rag eval --retrieval-only scores
        return float(recall > 0) if trace is not None else recall
    return hyde_metric


def route_metric(example: dspy.Example, pred: dspy.Prediction, trace: Any = None) -> float:
    """1 when the router chose the item's route label (rag eval's routing accuracy is its mean)."""
    from rag.agent.dataroute import parse_route

    return float(parse_route(getattr(pred, "source", "")) == example.source)


def sql_outcome(warehouse: Any, text: Any, gold: Any, rows: int, timeout_s: float) -> tuple[bool, str, str]:
    """(the gold rows came back, the statement, the guard's or DuckDB's one-line reason when it did not run) for a
    writer's ``text``, run as the agent runs it: the SQL guard, read-only, ``rows`` and ``timeout_s``."""
    from rag.agent.dataroute import clean_sql
    from rag.errors import DataError
    from rag.eval.data_metrics import same_rows

    sql = clean_sql(text)
    if not sql:
        return False, "", ""
    try:
        result = warehouse.run(sql, time_limit_s=timeout_s, max_rows=rows)
    except DataError as exc:
        return False, sql, " ".join(str(exc).split())[:160]
    return same_rows(result.to_dict()["rows"], gold), sql, ""


def make_sql_metric(warehouse: Any, rows: int, timeout_s: float) -> Callable[..., float]:
    """1 when the statement returns the gold rows (:func:`sql_outcome`; rag.eval.data_metrics.same_rows, rag eval's
    SQL execution accuracy); a refused or failing statement scores 0."""
    def sql_metric(example: dspy.Example, pred: dspy.Prediction, trace: Any = None) -> float:
        return float(sql_outcome(warehouse, getattr(pred, "sql", ""), example.gold_result, rows, timeout_s)[0])
    return sql_metric


def make_answerer_metric(judge: dspy.Module, judge_lm: dspy.BaseLM | None) -> Callable[..., float]:
    def answerer_metric(example: dspy.Example, pred: dspy.Prediction, trace: Any = None) -> float:
        answer = str(pred.answer or "")
        valid, invalid = split_citations(extract_citations(answer, pred.cited_ids), example.shown_ids)
        with dspy.context(lm=judge_lm) if judge_lm is not None else nullcontext():
            verdict = judge(question=example.question, reference_answer=example.reference_answer,
                            candidate_answer=answer, context=example.context)
        score = answer_score(bool(verdict.correct), bool(verdict.faithful), len(valid), len(invalid))
        return score >= 1.0 if trace is not None else score
    return answerer_metric


def judge_metric(example: dspy.Example, pred: dspy.Prediction, trace: Any = None) -> float:
    score = (float(bool(pred.correct) == example.correct) + float(bool(pred.faithful) == example.faithful)) / 2
    return score >= 1.0 if trace is not None else score



def make_agent_metric(judge: dspy.Module, judge_lm: dspy.BaseLM | None,
                      passages: Callable[[Sequence[str]], list[Any]]) -> Callable[..., float]:
    """End to end: a refusal scores 1 exactly when the item should be refused; an answer is scored like
    the answerer's (judge-correct, faithful to the passages it cites, citations valid), and 0 if it should
    have been a refusal. ``passages(ids)`` returns the cited chunks as hits, for the judge's context."""
    answer_metric = make_answerer_metric(judge, judge_lm)

    def agent_metric(example: dspy.Example, pred: dspy.Prediction, trace: Any = None) -> float:
        if example.should_refuse or bool(pred.refused):
            score = float(bool(pred.refused) == bool(example.should_refuse))
            return score >= 1.0 if trace is not None else score
        cited = list(pred.citations or [])
        as_answer = dspy.Example(question=example.question, reference_answer=example.reference_answer,
                                 shown_ids=cited, context=format_context(passages(cited)))
        # the agent already split valid from invalid citations; hand both back so invalid ones still count
        return answer_metric(as_answer, dspy.Prediction(answer=pred.answer,
                                                        cited_ids=cited + list(pred.invalid_citations or [])), trace)
    return agent_metric
