"""The SQL writer's statement as code: a ```sql block in free text, not a string inside JSON under a grammar.

Every other role answers in one JSON object whose schema constrains decoding (rag.lm.adapter). For the SQL
writer that means a coder model writes its query as a JSON string, escaping quotes and newlines, token by token
under the grammar. :class:`SQLTextAdapter` asks for the query the way such a model was trained to write it, as a
fenced block, with no grammar (no ``response_format``), and reads the statement back from the block (or the
whole reply when there is none). The inputs are laid out as the schema first, then the passages, the examples
(``sql_examples``, as question and block pairs), the failed query of a correction, and the question with the
signature's instruction last. ``sql_output = "text"`` turns it on (rag.agent.dataroute); the statement still goes
through the SQL guard. Results: benchmarks/results/sql_text.md.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

import dspy

SYSTEM = "You write DuckDB SQL."
ASK = "Write only the query, in one ```sql code block."
FENCE = re.compile(r"```(?:sql)?\s*(.*?)```", re.S | re.I)
CHAT_FIELD = re.compile(r"\[\[ ## sql ## \]\]\s*(.*?)\s*(?:\[\[ ## \w+ ## \]\]|$)", re.S)


class SQLTextAdapter(dspy.Adapter):
    """For signatures.SQLWriter: a plain prompt in, the fenced statement out as ``{"sql": ...}``."""

    def format(self, signature: type[dspy.Signature], demos: list[dict[str, Any]],
               inputs: dict[str, Any]) -> list[dict[str, Any]]:
        parts = [f"Tables:\n{inputs.get('tables', '')}"]
        if inputs.get("documents"):
            parts.append(f"Documents:\n{inputs['documents']}")
        shown = [d for d in demos if d.get("question") and d.get("sql")]
        if shown:
            parts.append("Examples:\n" + "\n\n".join(f"Question: {d['question']}\n```sql\n{d['sql']}\n```"
                                                     for d in shown))
        if inputs.get("previous"):
            parts.append(f"Previous query and why it was refused or failed:\n{inputs['previous']}")
        parts.append(f"Question: {inputs.get('question', '')}\n\n{signature.instructions}\n\n{ASK}")
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]

    def parse(self, signature: type[dspy.Signature], completion: str) -> dict[str, Any]:
        return {"sql": statement(completion)}

    def format_field_with_value(self, fields_with_values: dict[Any, Any], role: str = "user") -> str:
        """A scripted reply (dspy.utils.DummyLM) written as the model writes one: the statement in a ```sql block."""
        values = {getattr(f, "name", f): v for f, v in fields_with_values.items()}
        return f"```sql\n{values.get('sql', '')}\n```"


def writing(text: bool) -> contextlib.AbstractContextManager[Any]:
    """Where the SQL writer's call runs: under :class:`SQLTextAdapter` when ``text`` (``sql_output = "text"``), else
    under the caller's adapter (JSON)."""
    return dspy.context(adapter=SQLTextAdapter()) if text else contextlib.nullcontext()


def statement(reply: str) -> str:
    """The query in ``reply``, without a trailing semicolon: its first fenced block; else the ``sql`` field of a
    JSON object or of DSPy's ``[[ ## sql ## ]]`` layout (what a model used to DSPy's other adapters, or a scripted
    dspy.utils.DummyLM, answers); else the whole reply."""
    reply = reply or ""
    found = FENCE.search(reply) or CHAT_FIELD.search(reply)
    text = found.group(1) if found else reply
    if not found and reply.lstrip().startswith("{"):
        try:
            value = json.loads(reply)
        except ValueError:
            value = None
        text = str(value.get("sql") or "") if isinstance(value, dict) else reply
    return text.strip().rstrip(";")
