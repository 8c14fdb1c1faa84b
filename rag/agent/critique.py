"""The grounding critic: after an answer, is every claim in the evidence it cites?

    answer -> critique -> done                        grounded
                       -> answer (with the reason) -> critique ...   at most ``retries`` times
                       -> done, low_confidence        still not grounded

This is the second bounded loop, after the grader's: the grader decides before answering whether the context can
answer at all; the critic checks what was written. It reads the passages and SQL results the answer cites (all that
were shown when it cites none), so a claim from the model's own memory is caught. A critic output that cannot be
used leaves the answer as it is, with a note: the critic may flag an answer, never lose one.

Twelve checks, joined with "+" in ``checks`` (the ``critic_checks`` setting):

- ``numbers`` (no model call): every number the answer states is in the question or in the evidence it cites,
  as written or rounded (12.5 from 12.47; 40% from 0.4). A number found in neither is the commonest unfaithful
  claim of a small model (a count it never read); the reason names it, so the answer written again can drop it.
  A number the answer computes from the evidence (a sum of two rows) is flagged too: say it in words.
- ``citations`` (no model call): no citation stands where the answer's value belongs ("The credit limit is
  [sql:1].", "The account manager for Umber Pharma NV is [policies/weight_limits.md#000]."). The embedded model
  writes such sentences when the evidence lacks the value, and when it holds one it did not copy; either way the
  reader is told nothing. Such an answer is flagged at once (:meth:`Critic.hollow`, :func:`cited_for_values`):
  written again with the reason, on the ops demo's blind questions, none of 7 answers got its key facts right and
  3 echoed the reason into the answer (benchmarks/results/critic_citations.md).
- ``columns`` (no model call): the query the answer cites returns a column the question asks about
  (rag.data.coverage, :meth:`Critic.off_target`). Asked for what no column records (a driver, a distance), the
  writer reads the nearest column there is, and the answer states its value as the thing asked ("The driver was
  Baltic Line Transport", from ``carriers.name``). Flagged at once, like a hollow citation: written again, the
  answer could only restate the same result.
- ``filters`` (no model call): the query the answer cites keeps rows only by values the question or the passages
  shown beside it mention, or that the value links told the SQL writer for it (the key of a customer the question
  names, ``'CU054'``; rag.data.valuelinks) (rag.data.coverage, :meth:`Critic.off_target`). Asked for what no column records ("a
  temperature-controlled trailer"), the writer also invents a condition on a column there is
  (``service_level = 'express' AND hazardous = TRUE``), and the answer reports the count of another question.
  Flagged at once, like the columns check.
- ``absent`` (no model call; off by default): the query the answer cites asks nothing of the tables that no row
  can give: a value no row of its column holds (``reason = 'insufficient packaging'``), or the hour, minute or
  second of a DATE column (rag.data.unrecorded, :meth:`Critic.off_target`). Asked for what is finer than, or outside,
  what the tables record, the writer keeps rows by a value the column never has and the answer says "none", or
  reads the hour of a date and the answer says "0 o'clock". Flagged at once, like the columns check.
- ``period`` (no model call): the query the answer cites keeps no row because it compares a DATE column, its year or
  its month with one outside the span the column's rows hold (rag.data.unrecorded, :meth:`Critic.off_target`).
  Asked about a period the tables do not record ("claims filed in January 2025" when claims end in 2024), the
  writer keeps ``filed_on BETWEEN '2025-01-01' AND '2025-01-31'`` and the answer says "0". The question's own year
  is checked before answering (``coverage``, below), but only against the span of every date column together, which
  a promised date running into 2025 widens. Flagged at once, like the columns check. A default since its rule,
  written before it was replayed, held: on the recorded runs of 20 unanswerable splits it catches 6 questions
  answered unflagged, and flags none of 495 right answers or 604 right statements (benchmarks/results/critic_period.md).
- ``quantity`` (no model call; off by default): an answer that cites no query result states the quantity its
  question asks for ("how many", "how much", "what is the maximum ..."): a figure other than the question's own, in
  the unit the question names (rag.agent.stated, :meth:`Critic.unstated`). Asked for a figure the passages do not
  hold, the model answers with the nearest passage ("How much do we charge per day to store a refused delivery?"
  answered with the return procedure). Flagged at once: written again, it has no figure to state. Off: by the
  rule written before its replay it caught 17 unanswerable questions answered unflagged, but flagged 8 of 511 right
  answers ("every quarter" for "how often"; "how far in advance" read as a distance) where the bar was 1%
  (benchmarks/results/critic_quantity.md).
- ``counts`` (no model call; off by default): a question answered by a query that only counts rows asks about
  what one of the tables it reads records, by its name, aliases, columns, their descriptions or its text values:
  the thing "how many" counts, or what a yes/no question says happened (rag.data.coverage, :meth:`Critic.off_target`).
  Asked "how many pallets were on S01049?", the writer counts the shipment's one row, and the answer says "1
  pallet"; asked "was the loss reported to the police?", it counts the lost shipment, and the answer says "Yes".
  Flagged at once, like the columns check.
- ``records`` (no model call): an answer to a question about the data rests on a row of it. When
  the question names a record by an id of the tables' shape ("CL0036", "S00733"), or the router sent it to the data
  alone, and the answer cites no query result that returned a row, it was written from the passages or from nothing:
  "Which manager approved claim CL0036?" answered from the claims policy ("The claims handler approved it"), after
  the query failed or found nothing. Flagged at once (:meth:`Critic.rowless`): written again, it has no row to read.
- ``empty`` (no model call; off by default): an answer to a question whose query found nothing (no row, every value
  NULL, or one row of zeros: a count or a sum over no rows) is flagged at once, cited or not (:meth:`Critic.empty`,
  :func:`found_nothing`): asked for what no column records, the writer's conditions match no row ("0 pallets went
  onto S00241"); asked what the policies say about the data, the answer comes from the passages while the data said
  nothing. "None" can be the true answer, so it flags rather than refuses. Off: on questions written after it, it
  caught 2 more unanswerable questions of 80, within noise (benchmarks/results/critic_empty.md).
- ``fill`` (no model call): where the answer cites a query result of 1 to FILL_ROWS rows where its value belongs
  ("For each reason, the share rejected is [sql:1]."), the rows are written out in front of the citation
  (:meth:`Critic.fill`, :func:`written_rows`), so the reader is told the value; the answer stays flagged by the
  ``citations`` check, which judges it as the model wrote it: nothing checked that those rows answer the question
  (a hollow answer to a question the tables cannot answer cites a result too, "The CO2 emissions were [sql:1]").
- ``model``: the GroundingCritic signature reads the answer and the evidence, when the checks before it pass.

The default is ``numbers+citations+columns+filters+period+records+fill``: on the ops demo's hand labels the model's verdicts
agreed with them less than chance (benchmarks/results/critic_checks.md); what the columns, filters and records checks
and the fill step add: benchmarks/results/critic_columns.md, critic_filters.md, critic_records.md, critic_fill.md.

Before any of them, the question itself is checked (``coverage``, rag.data.coverage; no model call): when it names
something the index has no record of (a customer no table or passage mentions, a year outside every date column),
the answer is returned flagged at once, with that reason; writing it again could not help.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dspy

from rag.agent.context import format_context
from rag.agent.stated import (
    ATTRIBUTION,
    CITED_VALUE,
    cited_for_values,
    found_nothing,
    unstated,
    unsupported_numbers,
    written_rows,
)
from rag.agent.trace import Step, Trace
from rag.errors import DataError, SieveError
from signatures import Answerer, GroundingCritic

Revision = Answerer.append(
    "feedback", dspy.InputField(desc="what a reviewer found unsupported in your previous answer"), type_=str,
).with_instructions(Answerer.instructions + "\n\nA reviewer found a claim of your previous answer unsupported by "
                    "the passages (feedback). Write the answer again, stating only what the passages say.")


CHECKS = ("numbers", "citations", "columns", "filters", "absent", "period", "quantity", "counts", "records", "empty", "fill", "model")  # joined with "+"
FILL_ROWS = 10  # a query result of at most this many rows is written out where an answer cites it for its value

class Critic(dspy.Module):
    def __init__(self, retries: int = 1, checks: str = "numbers", coverage: Any = None):
        super().__init__()
        self.retries = retries  # answers written again after an ungrounded verdict; then the answer is flagged
        self.checks = set(checks.split("+"))  # of CHECKS: the checks with no model call, then the model
        self.coverage = coverage  # rag.data.coverage.Coverage of the index, or None: the question is not checked
        self.check = dspy.Predict(GroundingCritic)
        self.revise = dspy.Predict(Revision)

    def uncovered(self, question: str, trace: Trace) -> str | None:
        """Why the index cannot hold the answer to ``question`` (a ``critique`` step says so), or None."""
        gaps = self.coverage.gaps(question) if self.coverage is not None else []
        if not gaps:
            return None
        step = trace.add(Step(node="critique", query=question))
        step.notes.append("the question checked against the names and dates the index holds (no model call)")
        step.verdict, step.reason, step.check = False, "; ".join(gaps), "coverage"
        return step.reason

    def fill(self, answer: str, hits: list[Any], trace: Trace) -> str:
        """``answer`` with the rows of each query result it cites where the result's value belongs ("The share per
        reason is [sql:1]." -> "The share per reason is loss: share 40.0; damage: share 28.93 [sql:1]."), when the
        result has 1 to FILL_ROWS rows; only with the ``fill`` check (module docstring). The answer step keeps the
        answer as written, in a note."""
        if "fill" not in self.checks:
            return answer
        results = {h.chunk_id: h.meta for h in hits if (getattr(h, "meta", None) or {}).get("sql")}
        spans = [(m, meta) for m in CITED_VALUE.finditer(answer) if m.group(1).lower() not in ATTRIBUTION
                 and (meta := results.get(m.group(2)[1:-1].strip()))
                 and 0 < len(meta.get("rows") or []) <= FILL_ROWS and not meta.get("truncated")]
        if not spans:
            return answer
        written = answer
        for m, meta in reversed(spans):  # from the end: the earlier spans' offsets stay right
            rows = written_rows(meta.get("columns") or [], meta["rows"])
            written = f"{written[:m.start(2)]}{rows} {written[m.start(2):]}"
        step = next(s for s in reversed(trace.steps) if s.node == "answer")
        step.notes.append(f"{', '.join(dict.fromkeys(m.group(2) for m, _ in spans))} stood where the value belongs: "
                          f"written out from the result's rows (no model call); as the model wrote it: {answer}")
        step.answer = written
        return written

    def hollow(self, question: str, answer: str, trace: Trace) -> str | None:
        """Why ``answer`` tells the reader nothing (a citation where its value belongs; a ``critique`` step says
        so), or None; only with the ``citations`` check. Flagged, not written again: written again, it never stated
        the value (module docstring)."""
        spans = cited_for_values(answer) if "citations" in self.checks else []
        if not spans:
            return None
        step = trace.add(Step(node="critique", query=question))
        step.notes.append("the answer checked for a citation standing where its value belongs (no model call)")
        step.verdict, step.check = False, "citations"
        step.reason = f"it gives a citation where a value belongs ({'; '.join(spans)}), not the value"
        return step.reason

    def off_target(self, question: str, cited: list[str], hits: list[Any], trace: Trace) -> str | None:
        """Why the query results ``cited`` do not answer ``question`` (a ``critique`` step says so), or None: every
        cited query returns none of what it asks about (``columns``) or keeps rows by a value nobody gave
        (``filters``); only over an index with tables (module docstring)."""
        if not self.checks & {"columns", "filters", "absent", "period", "counts"} or self.coverage is None:
            return None
        queries = [(h.meta["sql"], h.meta.get("told") or []) for h in hits
                   if h.chunk_id in cited and (getattr(h, "meta", None) or {}).get("sql")]
        passages = " ".join(h.text for h in hits if not (getattr(h, "meta", None) or {}).get("sql"))
        found = [self._misread(question, sql, passages, told) for sql, told in queries]
        if not found or not all(found):
            return None
        step = trace.add(Step(node="critique", query=question))
        step.notes.append("the query the answer cites checked against the question's words (no model call)")
        step.verdict = False
        step.check = "+".join(dict.fromkeys(check for reasons in found for check, _ in reasons))
        step.reason = "; ".join(dict.fromkeys(reason for reasons in found for _, reason in reasons))
        return step.reason

    def rowless(self, question: str, cited: list[str], hits: list[Any], trace: Trace) -> str | None:
        """Why the answer to a question about records rests on none (a ``critique`` step says so), or None; only with
        the ``records`` check over an index with tables (module docstring)."""
        if "records" not in self.checks or self.coverage is None:
            return None
        if any((getattr(h, "meta", None) or {}).get("rows") for h in hits if h.chunk_id in cited):
            return None
        named = self.coverage.records(question)
        routed = [s.route for s in trace.steps if s.node == "route"][:1] == ["data"]
        if not named and not routed:
            return None
        step = trace.add(Step(node="critique", query=question))
        step.notes.append("the answer checked for a query result it rests on (no model call)")
        step.verdict, step.check = False, "records"
        about = f"the question names {', '.join(named)}" if named else "the question was routed to the data alone"
        step.reason = f"{about}, and the answer cites no query result that returned a row"
        return step.reason

    def unstated(self, question: str, answer: str, cited: list[str], hits: list[Any], trace: Trace) -> str | None:
        """Why an answer from the passages alone does not state the quantity its question asks for (a ``critique``
        step says so), or None; only with the ``quantity`` check (module docstring)."""
        if "quantity" not in self.checks or any((getattr(h, "meta", None) or {}).get("sql") for h in hits
                                                if h.chunk_id in cited):
            return None
        reason = unstated(question, answer)
        if reason is None:
            return None
        step = trace.add(Step(node="critique", query=question))
        step.notes.append("the answer checked for the quantity the question asks for (no model call)")
        step.verdict, step.check, step.reason = False, "quantity", reason
        return reason

    def empty(self, question: str, hits: list[Any], trace: Trace) -> str | None:
        """Why the answer rests on a query that found nothing (a ``critique`` step says so), or None; only with the
        ``empty`` check (module docstring)."""
        if "empty" not in self.checks:
            return None
        empty = [h.chunk_id for h in hits if (meta := getattr(h, "meta", None) or {}).get("sql")
                 and not meta.get("truncated") and found_nothing(meta.get("rows") or [])]
        if not empty:
            return None
        step = trace.add(Step(node="critique", query=question))
        step.notes.append("the query run for the question checked for rows (no model call)")
        step.verdict, step.check = False, "empty"
        step.reason = (f"the query run for it ({', '.join(empty)}) found nothing: no row, or only zeros and NULLs; the "
                       "tables may not record what it asks, or the query's conditions match no row")
        return step.reason

    def _misread(self, question: str, sql: str, passages: str, told: list[str]) -> list[tuple[str, str]]:
        """What ``sql`` does that ``question`` did not ask for, as (check, reason); [] when nothing. ``told``: the
        values the value links gave the writer for this question (the key of a customer it names), as given."""
        reasons = []
        if "columns" in self.checks and (columns := self.coverage.unasked(question, sql)):
            reasons.append(("columns", f"the query it rests on returns {'; '.join(columns)}, and the question asks "
                                       "about none of these: the tables may not record what it asks"))
        if "filters" in self.checks and (conditions := self.coverage.invented(question, sql, passages, told)):
            reasons.append(("filters", f"the query it rests on keeps only rows where {' and '.join(conditions)}, "
                                       "which neither the question nor the passages mention: it may answer another "
                                       "question"))
        if "absent" in self.checks and self.coverage.absent is not None and (gone := self.coverage.absent.find(sql)):
            reasons.append(("absent", f"the query it rests on asks what no row holds: {'; '.join(gone)}; the tables "
                                      "may not record what the question asks"))
        if "period" in self.checks and self.coverage.absent is not None and (gone := self.coverage.absent.outside(sql)):
            reasons.append(("period", f"the query it rests on asks for dates its tables do not hold: {'; '.join(gone)}; "
                                      "the tables may not record the period the question asks about"))
        if "counts" in self.checks and (thing := self.coverage.uncounted(question, sql)):
            reasons.append(("counts", f"the question counts something the tables may not record: {thing}"))
        return reasons

    def judge(self, question: str, answer: str, cited: list[str], hits: list[Any], trace: Trace,
              call: Callable[..., Any], max_chars: int | None = None) -> tuple[bool | None, str]:
        """(grounded, reason) for ``answer``, as a ``critique`` step; grounded is None when the critic's output could
        not be used."""
        step = trace.add(Step(node="critique", query=question))
        evidence = [h for h in hits if h.chunk_id in cited] or list(hits)
        step.shown_ids = [h.chunk_id for h in evidence]
        if "numbers" in self.checks:
            missing = unsupported_numbers(answer, [question, *(h.text for h in evidence)])
            step.notes.append("numbers checked against the question and the cited evidence (no model call)")
            if missing:
                step.verdict, step.check = False, "numbers"
                step.reason = (f"states {', '.join(missing)}, which neither the question nor the evidence it cites "
                               "holds")
                return False, step.reason
        if "model" not in self.checks:
            step.check = "numbers" if "numbers" in self.checks else None
            step.verdict, step.reason = True, ("every number it states is in the question or the evidence"
                                               if "numbers" in self.checks else "no check of its claims asked for")
            return True, step.reason
        try:
            pred, stats = call("grader", self.check, [], question=question, answer=answer,
                               evidence=format_context(evidence, max_chars=max_chars))
        except SieveError as exc:
            if not isinstance(exc, DataError):
                raise
            pred, stats, problem = None, None, str(exc)
        except Exception as exc:  # an output the adapter cannot parse
            pred, stats, problem = None, None, " ".join(str(exc).split())[:200]
        if pred is None:
            step.notes.append(f"critic output unusable ({problem}); the answer is returned unchecked")
            return None, ""
        step.record(stats)
        step.verdict, step.check = bool(pred.grounded), "model"
        step.reason = " ".join(str(pred.reason or "").split()) or None
        return step.verdict, step.reason or "the critic found a claim the evidence does not state"


def flagged_by(trace: Trace) -> str:
    """What flagged an answer low_confidence, in words, from the trace's last failed ``critique`` step: "the
    grounding critic" (its model, or a number it could not find, then written again), "the critic's period check",
    "the coverage check", "its likeness to a question labelled unanswerable" (rag.agent.lookalike)."""
    check = next((s.check for s in reversed(trace.steps) if s.node == "critique" and s.verdict is False), None) or "model"
    if check in ("model", "numbers"):
        return "the grounding critic"
    if check == "lookalike":
        return "its likeness to a question labelled unanswerable"
    if check == "coverage":
        return "the coverage check"
    names = check.split("+")
    return f"the critic's {' and '.join(names)} check{'s' if len(names) > 1 else ''}"
