"""The data route: where a question's answer is (documents, tables or both), and guarded SQL as cited evidence.

    route -> docs            the documents' loop alone (retrieve, grade, rewrite, answer or refuse)
          -> data            sql (one bounded correction) -> answer from the result; nothing usable: the documents
          -> both            the documents' loop, then sql told what the accepted passages say; answer from both

The router is the question's wording read against the tables' own words (``cues``, rag.data.schemalink: no model
call; the default), a classifier fitted from labelled questions (``learned``, rag.data.labelled: no model call), the
cues overruled by that classifier where it is sure of another route (``cues+learned``), or
the SourceRouter signature, which reads the question and the schema summary; for the model, "both" is the safe
choice, taken on doubt and on any output it cannot use. The SQLWriter's statement is never trusted:
:class:`rag.data.Warehouse` passes it through the SQL guard and runs it read-only with a time limit and a row cap.
With ``sql_examples``, the writer is shown the labelled queries most like the question (rag.data.labelled); with
``sql_links``, the table values and record ids the question names, as the tables spell them (rag.data.valuelinks); with
``sql_output = "text"`` it writes the query as a ```sql block instead of a JSON string (rag.agent.sqltext). A
refused or failing statement goes back to the writer with the guard's or DuckDB's one-line reason ``corrections``
times (default once); after that the route reports that it found nothing usable. Before that correction, a
statement DuckDB refuses for a mistake about where a column is (``T1.region`` when ``region`` is in ``T2``, a table
never joined, a date written as a string) is fixed from the schema and run once more (rag.data.sqlrepair), with the
fix noted in the trace. A result becomes a passage-like piece of evidence with the id ``sql:1``, so the answerer
cites it as it cites a passage, and the trace's ``sql`` step keeps the statement and its rows.

Nothing that goes wrong here (an unusable model output, a refused statement, a database error) stops the question:
the documents' route runs as if the index had no tables. Only a model that cannot be reached at all stops it, as
it would stop the grader.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import dspy

from rag.agent.sqltext import writing
from rag.agent.sqlvote import agreed
from rag.agent.trace import Step, Trace
from rag.data.schemalink import read_cues
from rag.data.sqlrepair import repair_sql
from rag.data.valuelinks import section, told_values
from rag.errors import DataError, SieveError, SQLRejected
from rag.retrieval.retriever import Hit
from signatures import SourceRouter, SQLWriter

SOURCES = ("docs", "data", "both")
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
DOCUMENT_CHARS = 1500  # what the SQL writer reads of the accepted passages (a number the query needs)


class DataRoute(dspy.Module):
    def __init__(self, warehouse: Any, schema: str, *, cues: Any = None, learned: Any = None, examples: Any = None,
                 columns: dict | None = None, rows: int = 50, timeout_s: float = 5.0, corrections: int = 1,
                 text_sql: bool = False, reads_overruled: bool = False, samples: int = 1, temperature: float = 0.7,
                 links: Any = None, overrule: float = 1.0):
        super().__init__()
        self.warehouse = warehouse  # rag.data.Warehouse over the index's tables.duckdb
        self.schema = schema  # rag.data.schema_summary of the index's tables
        self.cues = cues  # rag.data.schemalink.Vocabulary: route by the question's wording; None: by the SourceRouter
        self.learned = learned  # rag.data.labelled.LearnedRouter: route by the labelled questions it is like
        # with cues too: the learned route replaces the cues' where it is at least this sure (1.0: never)
        self.overrule = overrule
        self.examples = examples  # rag.data.labelled.SQLExamples: the SQLWriter's demos, the labelled queries nearest
        self.columns = columns or {}  # rag.data.sqlrepair.columns_of: {table: {column: type}}; {}: no schema repairs
        self.rows, self.timeout_s, self.corrections = rows, timeout_s, corrections
        self.text_sql = text_sql  # the writer answers with a ```sql block, not JSON (rag.agent.sqltext)
        # on "both", with no passage accepted, the writer reads those the subject guard kept from the answer
        # (rag.agent.module.Sieve._told)
        self.reads_overruled = reads_overruled
        # statements drafted on the first try, the first greedy, the rest sampled at ``temperature``; the result most
        # of them return is used (rag.agent.sqlvote); 1: the greedy statement alone
        self.samples, self.temperature = samples, temperature
        self.links = links  # rag.data.valuelinks.ValueLinks: the values the question names, shown beside the schema
        self.choose = dspy.Predict(SourceRouter)
        self.write = dspy.Predict(SQLWriter)

    def route(self, question: str, trace: Trace, call: Callable[..., Any]) -> str:
        """docs, data or both, as a ``route`` step with the router's reason."""
        step = trace.add(Step(node="route", query=question))
        if self.cues is not None:
            read = read_cues(question, self.cues)
            step.route, step.reason = read.route, read.reason
            step.notes.append("routed by the question's wording (router = cues): no model call")
            if self.learned is not None and self.overrule < 1.0:
                self._overrule(question, step)
            return step.route
        if self.learned is not None:
            step.route, step.reason = self.learned.route(question)
            step.notes.append("routed by the labelled questions it is like (router = learned): no model call")
            return step.route
        try:
            pred, stats = call("grader", self.choose, [], question=question, tables=self.schema)
        except SieveError as exc:
            if not isinstance(exc, DataError):
                raise
            pred, stats = None, None
        except Exception as exc:  # an output the adapter cannot parse: the safe choice
            step.notes.append(f"router output unusable ({_one_line(exc)}); searching both")
            pred, stats = None, None
        if stats is not None:
            step.record(stats)
        source = parse_route(getattr(pred, "source", ""))
        if source not in SOURCES:
            if pred is not None:
                step.notes.append(f"router answered {source!r}, not one of {', '.join(SOURCES)}; searching both")
            source = "both"
        step.route, step.reason = source, " ".join(str(getattr(pred, "reason", "") or "").split()) or None
        return source

    def _overrule(self, question: str, step: Step) -> None:
        """router = cues+learned: the learned router's route replaces the cues' where it differs and the classifier is
        at least ``overrule`` sure of it; the cues' reason stays in the notes."""
        route, reason, sure = self.learned.read(question)
        if route == step.route or sure < self.overrule:
            return
        step.notes.append(f"the cues said {step.route} ({step.reason}); overruled by the labelled questions "
                          f"(router = cues+learned, p >= {self.overrule:g})")
        step.route, step.reason = route, reason

    def query(self, question: str, trace: Trace, call: Callable[..., Any], documents: Sequence[Any] = ()) -> list[Hit]:
        """The SQL evidence for ``question`` (one Hit, ``sql:1``), or [] when the tables gave nothing usable."""
        shown = documents_text(documents)
        previous = ""
        example_ids, demos = self.examples.similar(question) if self.examples is not None else ([], None)
        named = self.links.lines(question) if self.links is not None else []
        tables = self.schema + section(named)
        for attempt in range(self.corrections + 1):
            step = trace.add(Step(node="sql", query=question))
            if attempt:
                step.notes.append(f"correction {attempt} of {self.corrections}: {previous.splitlines()[-1]}")
            try:
                with writing(self.text_sql):
                    pred, stats = call("answerer", self.write, [], question=question, tables=tables,
                                       documents=shown, previous=previous, **({"demos": demos} if demos else {}))
            except SieveError as exc:
                if not isinstance(exc, DataError):
                    raise
                step.reason = _one_line(exc)
                continue
            except Exception as exc:  # the writer's output could not be parsed
                step.reason = f"SQL writer output unusable: {_one_line(exc)}"
                previous = f"(no query)\nerror: {step.reason}"
                continue
            step.record(stats)
            if example_ids:
                step.notes.append(f"shown the {len(example_ids)} example queries most like it: {', '.join(example_ids)}")
            if named:
                step.notes.append(f"told the values the question names (no model call): {'; '.join(named)}")
            sql = step.sql = clean_sql(pred.sql)
            if not sql:
                step.reason = "the SQL writer found no query over these tables that answers the question"
                break
            failed = None
            try:
                result = self._run(sql, step)
            except DataError as exc:  # "guard: ..." refused before it ran; "duckdb: ..." failed or ran too long
                result, failed = None, exc
            if not attempt and self.samples > 1:
                result = self._agree(result, step, call, dict(question=question, tables=tables, documents=shown,
                                                             previous=previous, **({"demos": demos} if demos else {})))
            if result is None:
                step.verdict = False
                step.reason = f"{'guard' if isinstance(failed, SQLRejected) else 'duckdb'}: {_one_line(failed)}"
                previous = f"{sql}\nerror: {_one_line(failed)}"
                continue
            step.verdict = True
            hit = evidence(result, 1)
            if named:  # what the links told the writer: the critic's filters check counts them as given
                hit.meta["told"] = told_values(named)
            step.result = {"id": hit.chunk_id, **result.to_dict(), "text": result.as_text()}
            step.chosen_ids = [hit.chunk_id]
            return [hit]
        trace.steps[-1].notes.append("the data route found nothing usable; the answer rests on the documents")
        return []

    def _agree(self, first: Any, step: Step, call: Callable[..., Any], inputs: dict[str, Any]) -> Any:
        """The result most of ``samples`` drafts return (rag.agent.sqlvote): ``first``, the greedy draft's result
        (None: it failed), and ``samples - 1`` more drafted at ``temperature``; ``step`` takes the chosen statement,
        the drafts' tokens and a note. None when no draft ran."""
        results, steps = [first], [step]
        for seed in range(1, self.samples):
            draft = Step(node="sql")
            steps.append(draft)
            try:
                with writing(self.text_sql):
                    pred, stats = call("answerer", self.write, [],
                                       config={"temperature": self.temperature, "seed": seed}, **inputs)
            except SieveError as exc:
                if not isinstance(exc, DataError):
                    raise
                results.append(None)
                continue
            except Exception:  # an output that could not be parsed: one vote fewer
                results.append(None)
                continue
            step.add_call(stats)
            draft.sql = clean_sql(pred.sql)
            try:
                results.append(self._run(draft.sql, draft) if draft.sql else None)
            except DataError:
                results.append(None)
        chosen, votes = agreed(results)
        ran = sum(r is not None for r in results)
        step.notes.append(f"{self.samples} statements drafted (the first greedy, the rest at temperature "
                          f"{self.temperature:g}); {ran} ran; the result used was returned by {votes} of them")
        if chosen > 0:
            step.notes.append(f"draft {chosen + 1}'s result used: {steps[chosen].sql}")
            step.notes.extend(steps[chosen].notes)
            step.sql = steps[chosen].sql
        return results[chosen] if chosen >= 0 else None

    def _run(self, sql: str, step: Step) -> Any:
        """Run ``sql``; when it fails, once more as rag.data.sqlrepair fixes it from the schema (a column moved to
        the table that has it, a missing join, a date literal), noted in the step. Raises the first error when
        there is nothing to fix or the fixed statement fails too."""
        try:
            return self.warehouse.run(sql, time_limit_s=self.timeout_s, max_rows=self.rows)
        except DataError as first:
            fixed = repair_sql(sql, self.columns) if self.columns else None
            if fixed is None:
                raise
            try:
                result = self.warehouse.run(fixed.sql, time_limit_s=self.timeout_s, max_rows=self.rows)
            except DataError:
                raise first from None
            step.notes.append(f"repaired from the schema after \"{_one_line(first)[:120]}\": {'; '.join(fixed.changes)}")
            step.sql = fixed.sql
            return result


def parse_route(value: Any) -> str:
    """The router's ``source`` as written, normalised (quotes, case, spaces); not checked against SOURCES."""
    return str(value or "").strip().strip("\"'").lower()


def clean_sql(text: Any) -> str:
    """The writer's statement without a Markdown code fence around it."""
    return _FENCE.sub("", str(text or "").strip()).strip()


def documents_text(documents: Sequence[Any]) -> str:
    """What the SQL writer reads of the passages: each headed by its id, cut to ``DOCUMENT_CHARS`` in all."""
    return "\n\n".join(f"[{h.chunk_id}] {h.text}" for h in documents)[:DOCUMENT_CHARS]


def evidence(result: Any, n: int) -> Hit:
    """A query result as a passage the answerer and the critic read, cited as ``[sql:n]``."""
    text = f"SQL: {result.sql}\nResult:\n{result.as_text()}"
    return Hit(chunk_id=f"sql:{n}", text=text, title="SQL result", source="tables", rank=0, score=0.0, stages={},
               meta={"sql": result.sql, "columns": list(result.columns), "rows": result.to_dict()["rows"],
                     "truncated": result.truncated})


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:240]
