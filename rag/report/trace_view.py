"""One eval record read by a person: its outcome, and its trace step by step with gold chunks marked.

``rag.report.analysis`` re-exports these for the notebooks; ``rag.report.compare`` uses ``outcome`` and ``is_right``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rag.agent.trace import Trace, with_page
from rag.eval.agent_metrics import step_latency
from rag.eval.decisions import used_ids
from rag.eval.diagnose import diagnose
from rag.eval.metrics import trace_hits, with_duplicates
from rag.ingest.chunking import page_label


def outcome(record: Mapping[str, Any]) -> str:
    """``error``, ``refused``, ``correct``, ``wrong``, ``answered (unjudged)``; an unanswerable item is right when refused."""
    if record.get("status") == "error":
        return "error"
    s = record["scores"]
    if s["refused"]:
        return "refused"
    if s["should_refuse"]:
        return "wrong"
    return {True: "correct", False: "wrong"}.get(s.get("judged_correct"), "answered (unjudged)")


def is_right(record: Mapping[str, Any]) -> bool | None:
    """Did the agent do the right thing? Refusing an unanswerable item, answering an answerable one correctly.
    None when an answer was not judged."""
    o = outcome(record)
    if record["should_refuse"]:
        return o == "refused"
    return None if o == "answered (unjudged)" else o == "correct"


def render_trace(record: Mapping[str, Any], *, max_answer_chars: int = 600) -> str:
    """One item step by step: query, retrieved ids with scores (``*`` = gold), verdict and reason (with the ids the
    grader listed and those the agent used: none after "not relevant", all shown after "relevant" without ids), rewrite,
    answer and citations, then the judge's verdict and the diagnosis. The totals line is rag.agent.trace's."""
    gold = set(record.get("gold_ids") or [])
    d = diagnose(record)
    lines = [f"[{record.get('config', '?')}] {record['id']} ({record['type']}): {record['question']}",
             f"reference: {record.get('reference_answer') or '-'}",
             f"gold chunks: {', '.join(sorted(gold)) or '(none)'}   outcome: {outcome(record)}"]
    if d:
        lines.append(f"diagnosis: {d['kind']}: {_short(d['detail'], max_answer_chars)}")
    pred = record.get("prediction")
    if not pred:
        lines.append(f"agent error: {_short(record.get('error'), max_answer_chars)}")
        return "\n".join(lines)
    trace = pred["trace"]
    pages = {h["chunk_id"]: page_label(h.get("meta")) for st in trace["steps"] for h in st.get("hits") or []}
    gold = with_duplicates(gold, trace_hits(trace["steps"]))
    for i, st in enumerate(trace["steps"], 1):
        cost = f"[{step_latency(st):.0f} ms, {st.get('tokens_in') or 0}+{st.get('tokens_out') or 0} tok" \
               f"{', cached' if st.get('cached') else ''}]"
        node = st["node"]
        if node == "retrieve":
            lines.append(f"{i}. retrieve  query={st.get('query')!r} {cost}")
            lines.extend(f"     also searched: {q!r}" for q in st.get("expansions") or [])
            if st.get("hyde"):
                lines.append(f"     hypothetical passage searched: {_short(st['hyde'], max_answer_chars)!r}")
            for h in st.get("hits") or []:
                mark = "*" if h["chunk_id"] in gold else " "
                score = h.get("score")
                lines.append(f"     {mark} #{h.get('rank', '?')} {with_page(h['chunk_id'], pages)}"
                             + (f"  score={score:.4f}" if isinstance(score, (int, float)) else "")
                             + (f"  (same words as {', '.join(h['duplicates'])})" if h.get("duplicates") else ""))
        elif node == "grade":
            verdict = "RELEVANT" if st.get("verdict") else "NOT RELEVANT"
            lines.append(f"{i}. grade     {verdict} {cost}")
            used = used_ids(bool(st.get("verdict")), st.get("shown_ids") or [], st.get("chosen_ids") or [])
            lines.append(f"     shown={_marked(st.get('shown_ids'), gold)} chosen={_marked(st.get('chosen_ids'), gold)}"
                         f" used={_marked(used, gold)}")
            lines.append(f"     reason: {_short(st.get('reason'), max_answer_chars)}")
        elif node == "rewrite":
            lines.append(f"{i}. rewrite   {st.get('query')!r} -> {st.get('rewrite')!r} {cost}")
        else:
            text = _short(st.get("answer"), max_answer_chars)
            lines.append(f"{i}. {node:<9} {cost}")
            if node == "answer":
                lines.append(f"     shown={_marked(st.get('shown_ids'), gold)} "
                             f"cited={_marked(st.get('chosen_ids'), gold, pages)}")
            elif st.get("reason"):
                lines.append(f"     reason: {_short(st.get('reason'), max_answer_chars)}")
            lines.append(f"     {text!r}")
        lines.extend(f"     note: {n}" for n in st.get("notes") or [])
    if pred.get("invalid_citations"):
        lines.append(f"invalid citations (dropped): {pred['invalid_citations']}")
    judge = record.get("judge")
    if judge:
        lines.append("judge: " + ", ".join(f"{k}={judge[k]}" for k in ("correct", "faithful") if k in judge)
                     + (f"; {_short(judge['reason'], max_answer_chars)}" if judge.get("reason") else "")
                     + (f"; error: {_short(judge['error'], max_answer_chars)}" if judge.get("error") else ""))
    lines.append(Trace.from_dict(trace).render().splitlines()[-1])
    return "\n".join(lines)


def _short(text: Any, limit: int) -> str:
    """One line of at most ``limit`` characters (LM parse errors quote whole responses)."""
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _marked(ids: Iterable[str] | None, gold: set[str], pages: dict[str, str] | None = None) -> str:
    return "[" + ", ".join(("*" if i in gold else "") + with_page(i, pages or {}) for i in ids or []) + "]"
