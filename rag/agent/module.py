"""The self-reflective agent: retrieve, grade, then answer, or rewrite and retry, or refuse.

    retrieve -> grade -> answer
                  \\-> rewrite -> retrieve -> grade ...   (at most ``max_rewrites`` times)
                  \\-> refuse                             (never answers from rejected context)

With ``use_reflection=False`` it is the baseline: retrieve, then answer from whatever came back.

Once the grader accepts, the answerer reads (``answer_context``) the very context the grader read ("graded", the
default: same text, so llama.cpp reuses its KV cache and the passages are read once per question) or only the
passages the grader listed ("accepted"). The grader and the answerer may name only the passages they were shown
(``id_choices``: the ids become an enum in the response schema, ``rag.lm.adapter.shown_ids``).

The grader names the question's subject, and a "relevant" verdict whose subject the accepted passages never mention
is overruled (the subject guard, ``rag.agent.context.missing_terms``). The subject belongs to the question, not to the
context, so after a rewrite a context that mentions it nowhere is rejected without asking the grader again
(``subject_shortcut``): the guard would overrule a "relevant" about the same subject, and a refusal costs two
grade calls less.

An index with tables adds the data route before this loop and the grounding critic after the answer
(``rag.agent.dataroute``, ``rag.agent.critique``); without tables the program is the loop above, unchanged.
"""

from __future__ import annotations

import re
import time
from typing import Any, NamedTuple

import dspy

from rag.agent.context import (
    clean_answer,
    extract_citations,
    format_context,
    missing_terms,
    split_citations,
    within_budget,
)
from rag.agent.conversation import context_query
from rag.agent.critique import flagged_by
from rag.agent.trace import Step, Trace
from rag.config import ANSWER_CONTEXTS
from rag.errors import InputError
from rag.lm.adapter import program_demos, shown_ids
from rag.lm.fit import token_counter
from rag.retrieval.expansion import Expansion, QueryExpander
from rag.usage.metering import CallStats, metered_call
from signatures import Answerer, Grader, Rewriter

REFUSAL = "I couldn't find this in the knowledge base."
_PLACEHOLDER = re.compile(r"\{\w+\}")  # a small model may echo the prompt's "{query}" instead of writing one
MAX_QUESTION_CHARS = 4000  # longer questions are cut for retrieval and prompts, and the trace says so
OVERRULED_NOTE = "the SQL writer reads the passages the subject guard overruled"  # the trace's note, then the ids


class Search(NamedTuple):
    """What the documents' loop found: the passages to answer from ([] to refuse), the last hits (the closest
    passages of a refusal), the grader's last reason, how much of each passage the answerer reads, and the
    passages of the first "relevant" verdict the subject guard overruled (empty when none was)."""
    passages: list[Any]
    closest: list[Any]
    reason: str
    max_chars: int | None = None
    overruled: tuple[Any, ...] = ()


class Sieve(dspy.Module):
    def __init__(self, retriever: Any, *, max_rewrites: int = 2, use_reflection: bool = True,
                 top_k: int | None = None, lms: dict[str, dspy.BaseLM] | None = None,
                 grade_passage_chars: int | None = None, answer_context: str = "graded", id_choices: bool = True,
                 subject_shortcut: bool = True, expander: QueryExpander | None = None, context_tokens: int = 0,
                 reranker: Any = None, router: Any = None, data: Any = None, critic: Any = None,
                 condenser: Any = None, lookalikes: Any = None):
        super().__init__()
        self.retriever = retriever
        self.max_rewrites = max_rewrites
        self.use_reflection = use_reflection
        self.top_k = top_k  # None: the retriever's own top_k
        self.grade_passage_chars = grade_passage_chars  # None: the grader sees whole passages
        if answer_context not in ANSWER_CONTEXTS:
            raise ValueError(f"answer_context must be one of {', '.join(ANSWER_CONTEXTS)}, got {answer_context!r}")
        self.answer_context = answer_context
        self.id_choices = id_choices  # the grader and answerer may name only the ids shown (rag.lm.adapter.shown_ids)
        self.subject_shortcut = subject_shortcut  # a context without the subject the grader named before is not graded again
        self.lms = dict(lms or {})  # role -> LM; a missing role uses the configured dspy LM
        self.context_tokens = context_tokens  # token budget of the passages in a grade or answer call; 0 = none
        self.expander = expander if expander is not None and expander.active else None  # rephrasings, HyDE
        # the LM reranker the retriever calls (rag.retrieval.rerank), held here too so it is one of the program's
        # predictors: compiled, saved and loaded with the others
        self.reranker = reranker
        self.router = router  # the category pre-filter the retriever calls (rag.retrieval.categories), held likewise
        self.data = data  # rag.agent.dataroute.DataRoute over the index's tables; None: documents only
        self.critic = critic  # rag.agent.critique.Critic after each answer; None: no critic
        self.condenser = condenser  # rag.agent.conversation.Condenser for follow-ups; None: history is ignored
        # rag.agent.lookalike.Lookalikes: an answer to a question like a labelled-unanswerable one is flagged; None: off
        self.lookalikes = lookalikes
        self.grade = dspy.Predict(Grader)
        self.rewrite = dspy.Predict(Rewriter)
        self.respond = dspy.Predict(Answerer)

    def forward(self, question: str, history: Any = None) -> dspy.Prediction:
        """``history``: earlier turns of a conversation (rag.agent.conversation.Turn, or {question, answer} dicts),
        oldest first; with them, the question is made standalone first and the rest of the run sees that."""
        question, notes = _check_question(question)
        trace = Trace(question=question)
        context = None
        if history and self.condenser is not None:
            context = context_query(question, history)  # searched beside the standalone question, first search only
            question = self.condenser.standalone(question, history, trace, self._call)
        source = self.data.route(question, trace, self._call) if self.data is not None else "docs"
        if source == "data":
            facts = self.data.query(question, trace, self._call)
            if facts:
                return self._answer(question, facts, trace)
        found = self._search(question, trace, notes, context)
        passages = found.passages
        if source == "both":
            passages = [*passages, *self.data.query(question, trace, self._call, documents=self._told(found, trace))]
        if passages:
            return self._answer(question, passages, trace, max_chars=found.max_chars)
        return self._refuse(found.closest, trace, found.reason)

    def _told(self, found: Search, trace: Trace) -> list[Any]:
        """The passages the SQL writer reads on the ``both`` route: those the answer rests on, or, with
        ``data.reads_overruled`` and none accepted, those the subject guard kept from the answer. A figure the query
        needs (a surcharge rate) is in a policy that never names the customer the question does; the guard is right
        to keep that passage from the answer, and the query still needs its figure."""
        if found.passages or not found.overruled or not self.data.reads_overruled:
            return found.passages
        trace.steps[-1].notes.append(f"{OVERRULED_NOTE}: {', '.join(h.chunk_id for h in found.overruled)}")
        return list(found.overruled)

    def _search(self, question: str, trace: Trace, notes: list[str], context: str | None = None) -> Search:
        """The documents' loop. ``context``: a follow-up's conversation as one more search text for the first
        search."""
        query, tried, overruled = question, [], ()
        for attempt in range(self.max_rewrites + 1):
            hits = self._retrieve(query, trace, notes if attempt == 0 else [], context if attempt == 0 else None)
            tried.append(query)
            if not self.use_reflection:
                return Search(hits, hits, "")
            relevant, reason, guarded = self._grade(question, hits, trace)
            overruled = overruled or guarded
            if relevant:
                if self.answer_context == "graded":
                    return Search(hits, hits, reason, self.grade_passage_chars)
                return Search(relevant, hits, reason)
            if attempt == self.max_rewrites:
                return Search([], hits, reason, overruled=tuple(overruled))
            query = self._rewrite(question, tried, reason, trace)
        raise AssertionError("unreachable: the loop always returns")

    # ------------------------------------------------------------------ nodes
    def _retrieve(self, query: str, trace: Trace, notes: list[str], context: str | None = None) -> list[Any]:
        step = trace.add(Step(node="retrieve", query=query, notes=list(notes)))
        start = time.perf_counter()
        expansion = self._expand(query, step)
        if context and context != query:  # a follow-up: the last question with it, one more list fused by RRF
            expansion = expansion or Expansion()
            expansion = Expansion(queries=[*expansion.queries, context], passage=expansion.passage,
                                  calls=expansion.calls, notes=expansion.notes)
            step.expansions = list(expansion.queries)
        with program_demos(self):
            found = self.retriever.retrieve(query, k=self.top_k, expansion=expansion)
        for stage in (found.routing, found.reranking):
            for stats in (stage.calls.values() if stage is not None else ()):
                _add_cost(step, stats)
        step.latency_ms = (time.perf_counter() - start) * 1000
        step.notes.extend(found.notes)
        step.hits = [{k: v for k, v in h.to_dict().items() if k != "text"} for h in found.hits]
        return found.hits

    def _expand(self, query: str, step: Step) -> Expansion | None:
        """The query stages' rephrasings and hypothetical passage for this search text (None when they are off); their LM
        calls are counted in the retrieve step's tokens and cost."""
        if self.expander is None:
            return None
        with program_demos(self):
            expansion = self.expander(query)
        step.expansions, step.hyde = list(expansion.queries), expansion.passage
        step.notes.extend(expansion.notes)
        for stats in expansion.calls.values():
            _add_cost(step, stats)
        return expansion

    def _grade(self, question: str, hits: list[Any], trace: Trace) -> tuple[list[Any], str, list[Any]]:
        """(the passages accepted, [] when none; the grader's reason; the passages of a "relevant" the subject
        guard overruled, else [])"""
        named = next((s.subject for s in reversed(trace.steps) if s.node == "grade" and s.subject), None)
        step = trace.add(Step(node="grade", query=question))
        hits = self._within_budget("grader", hits, step, self.grade_passage_chars)
        shown = step.shown_ids = [h.chunk_id for h in hits]
        if not hits:
            step.verdict, step.reason = False, "retrieval returned nothing"
            return [], step.reason, []
        missing = missing_terms(named, hits) if named and self.subject_shortcut else []
        if missing:  # the guard would overrule a "relevant" about this subject: no need to ask the grader again
            step.verdict, step.subject = False, named
            step.reason = f"the passages do not mention {', '.join(missing)}"
            step.notes.append(f"grade call skipped: the subject the grader named before, {named!r}, is in none of these "
                              f"passages (missing: {', '.join(missing)})")
            return [], step.reason, []
        context = format_context(hits, max_chars=self.grade_passage_chars)
        pred, stats = self._call("grader", self.grade, shown, question=question, context=context)
        step.record(stats)
        chosen, invalid = split_citations([str(i) for i in (pred.relevant_chunk_ids or [])], shown)
        if invalid:
            step.notes.append(f"grader named ids that were not shown, dropped: {invalid}")
        step.verdict, step.reason, step.chosen_ids = bool(pred.relevant), str(pred.reason or ""), chosen
        step.subject = " ".join(str(getattr(pred, "subject", "") or "").split()) or None
        if not step.verdict:
            return [], step.reason, []
        accepted = [h for h in hits if h.chunk_id in chosen]
        if not chosen:  # relevant, but no usable ids: the context as a whole was accepted
            step.notes.append("grader said relevant without valid ids; using all shown passages")
            accepted = list(hits)
        subject = step.subject or ""
        missing = missing_terms(subject, accepted)
        if missing:  # the grader's own subject is not in what it accepted: it cannot be the answer
            step.verdict, step.reason = False, f"the passages do not mention {', '.join(missing)}"
            step.notes.append(f"grader said relevant, but its subject {subject!r} is not in the accepted passages "
                              f"(missing: {', '.join(missing)}); verdict set to not relevant")
            return [], step.reason, accepted
        return accepted, step.reason, []

    def _rewrite(self, question: str, tried: list[str], reason: str, trace: Trace) -> str:
        step = trace.add(Step(node="rewrite", query=tried[-1]))
        pred, stats = self._call("rewriter", self.rewrite, [], question=question, tried_queries=tried, grader_reason=reason)
        step.record(stats)
        new = " ".join(str(pred.query or "").split())
        echoed = bool(_PLACEHOLDER.fullmatch(new))
        if not new or new in tried or echoed:
            what = "echoed a template placeholder" if echoed else "repeated a tried query"
            step.notes.append(f"rewriter {what}; appending the grader's reason")
            new = f"{question} {reason}".strip()
        step.rewrite = new[:MAX_QUESTION_CHARS]
        return step.rewrite

    def _answer(self, question: str, hits: list[Any], trace: Trace, max_chars: int | None = None) -> dspy.Prediction:
        """The answer, and, with a critic, checked against its evidence: written again with the critic's reason at
        most ``critic.retries`` times, then returned flagged ``low_confidence`` when still not grounded."""
        pred = self._write(question, hits, trace, max_chars)
        gap = (self.critic.uncovered(question, trace) if self.critic is not None else None) \
            or self._lookalike(question, trace)
        if gap:  # the question asks about what the index has no record of: flagged, not written again
            pred.low_confidence, pred.critic_reason = True, gap
            trace.steps[-1].notes.append("the answer is returned flagged low_confidence")
            return pred
        for attempt in range(self.critic.retries + 1 if self.critic is not None else 0):
            written, pred.answer = pred.answer, self.critic.fill(pred.answer, hits, trace)
            hollow = (self.critic.hollow(question, written, trace)  # filled or not, it did not state the value
                      or self.critic.off_target(question, pred.citations, hits, trace)
                      or self.critic.rowless(question, pred.citations, hits, trace)
                      or self.critic.empty(question, hits, trace)
                      or self.critic.unstated(question, pred.answer, pred.citations, hits, trace))
            if hollow:  # a citation where the value belongs, a column not asked about, no row: flagged, not written again
                pred.low_confidence, pred.critic_reason = True, hollow
                trace.steps[-1].notes.append("the answer is returned flagged low_confidence")
                break
            grounded, reason = self.critic.judge(question, pred.answer, pred.citations, hits, trace, self._call, max_chars)
            if grounded is not False:
                break
            if attempt == self.critic.retries:
                pred.low_confidence, pred.critic_reason = True, reason
                trace.steps[-1].notes.append("still not grounded: the answer is returned flagged low_confidence")
                break
            pred = self._write(question, hits, trace, max_chars, feedback=reason)
        return pred

    def _lookalike(self, question: str, trace: Trace) -> str | None:
        """Why ``question`` looks like one labelled unanswerable (a ``critique`` step says so), or None."""
        reason = self.lookalikes.like(question) if self.lookalikes is not None else None
        if reason:
            step = trace.add(Step(node="critique", query=question))
            step.notes.append("the question compared with the questions of unanswerable_labels (no model call)")
            step.verdict, step.reason, step.check = False, reason, "lookalike"
        return reason

    def _write(self, question: str, hits: list[Any], trace: Trace, max_chars: int | None = None,
               feedback: str | None = None) -> dspy.Prediction:
        step = trace.add(Step(node="answer"))
        hits = self._within_budget("answerer", hits, step, max_chars)
        shown = step.shown_ids = [h.chunk_id for h in hits]
        context = format_context(hits, max_chars=max_chars)
        if feedback is None:
            pred, stats = self._call("answerer", self.respond, shown, question=question, context=context)
        else:
            step.notes.append(f"written again after the critic: {feedback}")
            pred, stats = self._call("answerer", self.critic.revise, shown, question=question, context=context,
                                     feedback=feedback)
        step.record(stats)
        answer = str(pred.answer or "").strip()
        valid, invalid = split_citations(extract_citations(answer, pred.cited_ids), shown)
        if invalid:
            step.notes.append(f"dropped {len(invalid)} citation(s) of ids not in the context: {invalid}")
        answer = clean_answer(answer, shown, invalid)
        if not valid:
            step.notes.append("answer cites no passage")
        step.answer, step.chosen_ids = answer, valid
        trace.outcome = "answered"
        by_id = {h.chunk_id: h for h in hits}
        return dspy.Prediction(answer=answer, refused=False, citations=valid,
                               sources=[_source(by_id[c]) for c in valid], closest=[], trace=trace,
                               invalid_citations=invalid, low_confidence=False, critic_reason=None,
                               uncited=[_source(h) for h in hits if h.chunk_id not in valid])

    def _refuse(self, hits: list[Any], trace: Trace, reason: str) -> dspy.Prediction:
        trace.add(Step(node="refuse", answer=REFUSAL, reason=reason, shown_ids=[h.chunk_id for h in hits]))
        trace.outcome = "refused"
        return dspy.Prediction(answer=REFUSAL, refused=True, citations=[], sources=[],
                               closest=[_source(h) for h in hits], trace=trace, invalid_citations=[], uncited=[],
                               low_confidence=False, critic_reason=None)

    def _within_budget(self, role: str, hits: list[Any], step: Step, max_chars: int | None) -> list[Any]:
        """``hits`` cut from the lowest-ranked to ``context_tokens`` tokens of ``role``'s model; the step says what
        was cut, and whether the count was the model's own tokenizer or an estimate."""
        if not self.context_tokens or len(hits) < 2:
            return hits
        count, exact = token_counter(self.lms.get(role) or dspy.settings.lm)
        kept, cut = within_budget(hits, self.context_tokens, count, max_chars)
        if cut:
            how = "tokens" if exact else "tokens, estimated"
            step.notes.append(f"token budget: left out {len(cut)} lowest-ranked passage(s) to keep the passages within "
                              f"{self.context_tokens} {how}: {', '.join(h.chunk_id for h in cut)}")
        return kept

    def _call(self, role: str, predictor: dspy.Module, ids: list[str], **inputs: Any) -> tuple[dspy.Prediction, CallStats]:
        with shown_ids(ids if self.id_choices else ()), program_demos(self):  # program_demos: demo_position="shared"
            return metered_call(predictor, self.lms.get(role), **inputs)


def _add_cost(step: Step, stats: CallStats) -> None:
    """A query stage's LM call (expansion, HyDE, rerank) counted in the retrieve step it ran in."""
    step.tokens_in += stats.tokens_in
    step.tokens_out += stats.tokens_out
    step.cost += stats.cost
    step.model, step.cached = stats.model, stats.cached


def _source(hit: Any) -> dict[str, Any]:
    """A cited (or closest) passage: its id, heading path and file, and its pages when the file has pages (PDF,
    DOCX): ``page`` and, for a passage that runs onto later pages, ``page_end``."""
    meta = getattr(hit, "meta", None) or {}
    pages = {k: meta[k] for k in ("page", "page_end") if isinstance(meta.get(k), int)}
    sql = ({"sql": meta["sql"], "columns": meta.get("columns", []), "rows": meta.get("rows", []),
            "truncated": bool(meta.get("truncated"))} if "sql" in meta else {})
    return {"chunk_id": hit.chunk_id, "title": hit.title, "source": getattr(hit, "source", ""), **pages, **sql}


def _check_question(question: Any) -> tuple[str, list[str]]:
    if not isinstance(question, str) or not question.strip():
        raise InputError("the question is empty; ask something, e.g. rag ask \"What does the with statement do?\"")
    question = " ".join(question.split())
    if len(question) > MAX_QUESTION_CHARS:
        return question[:MAX_QUESTION_CHARS], [f"question cut from {len(question)} to {MAX_QUESTION_CHARS} characters"]
    return question, []


def prediction_to_dict(pred: dspy.Prediction) -> dict[str, Any]:
    """The full Prediction + Trace as plain JSON-ready data (``rag ask --json``, eval results)."""
    return {"answer": pred.answer, "refused": pred.refused, "citations": list(pred.citations),
            "invalid_citations": list(pred.invalid_citations), "sources": pred.sources,
            "closest": pred.closest, "uncited": list(getattr(pred, "uncited", None) or []),
            "low_confidence": bool(getattr(pred, "low_confidence", False)),
            "critic_reason": getattr(pred, "critic_reason", None),
            "flagged_by": flagged_by(pred.trace) if getattr(pred, "low_confidence", False) else None,
            "trace": pred.trace.to_dict()}
