"""The JSON grammar the embedded model decodes under, and reading what it wrote.

When DSPy asks for structured output, rag.lm.local constrains llama.cpp's decoding by a grammar compiled from the
output's JSON schema (:func:`json_grammar`), so the text always is JSON of that shape unless generation reaches
``max_tokens``. Three things make that work for a small model:

- :func:`bound_schema` gives every free string a ``maxLength`` and every array a ``maxItems``, sized so the whole
  object fits in the call's ``max_tokens``: the grammar closes a rambling string in time.
- :func:`open_last_string` lets the last string of the object hold raw double quotes (a model that writes
  ``"not 'foo'"`` unescaped would otherwise end the string there), and :func:`close_last_string` re-escapes it,
  closes it when generation stopped, and cuts it where the model began another key inside it.
- :func:`cut_fields` names the fields cut at their bound, and :func:`json_problem` says why a text is not the JSON
  object asked for; rag.lm.local counts both in its ``stats()``.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from typing import Any

_GRAMMARS: dict[str, Any] = {}
_LOCK = threading.Lock()


def json_grammar(schema: dict[str, Any] | None) -> Any:
    """A compiled llama.cpp grammar for a JSON schema (or for any JSON object), cached by schema."""
    from llama_cpp import LlamaGrammar
    from llama_cpp.llama_grammar import JSON_GBNF

    key = json.dumps(schema) if schema is not None else ""
    with _LOCK:
        if key not in _GRAMMARS:
            _GRAMMARS[key] = (LlamaGrammar.from_json_schema(key, verbose=False) if schema is not None
                              else LlamaGrammar.from_string(JSON_GBNF, verbose=False))
        return _GRAMMARS[key]


MAX_ITEMS = 6  # arrays without their own maxItems
MAX_ITEM_CHARS = 64  # strings inside arrays (chunk ids, short entries)
CHARS_PER_TOKEN = 3.0  # English prose runs 3-4 characters per token; ids and digits fewer
MAX_STRING_CHARS = 1000  # llama.cpp refuses grammars with much larger repetitions


def bound_schema(schema: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """A copy of ``schema`` whose unbounded strings get a ``maxLength`` and arrays a ``maxItems``,
    sized so the whole object fits in ``max_tokens``. A small model that rambles inside a string
    would otherwise hit ``max_tokens`` before closing the JSON; with these bounds the grammar
    closes it in time. Strings with an enum/const/pattern/format are left alone; no bound exceeds
    ``MAX_STRING_CHARS`` (so one free-text field holds at most ~1,000 characters)."""
    schema = copy.deepcopy(schema)
    strings: list[tuple[dict[str, Any], bool]] = []

    def walk(node: Any, in_array: bool) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, in_array)
        if not isinstance(node, dict):
            return
        if node.get("type") == "array" and "maxItems" not in node:
            node["maxItems"] = MAX_ITEMS
        if node.get("type") == "string" and not {"maxLength", "enum", "const", "pattern", "format"} & node.keys():
            strings.append((node, in_array))
        for key, value in node.items():
            walk(value, in_array or (key == "items" and node.get("type") == "array"))

    walk(schema, False)
    budget = int(max_tokens * CHARS_PER_TOKEN * 0.8)  # characters the strings may use, leaving room for structure
    items = [node for node, in_array in strings if in_array]
    for node in items:  # ids and short list entries
        node["maxLength"] = MAX_ITEM_CHARS
    free = [node for node, in_array in strings if not in_array]
    if free:
        per_string = min(MAX_STRING_CHARS, max(16, (budget - len(items) * MAX_ITEMS * MAX_ITEM_CHARS) // len(free)))
        for node in free:
            node["maxLength"] = per_string
    return schema


FREE_TEXT = "^[^\\x00-\\x08]{0,%d}$"  # any text but control characters: raw double quotes included


def open_last_string(schema: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The schema with its last property, when that is a free-text string, opened to raw double quotes.

    Under a JSON grammar a model that writes ``"not 'foo'"`` inside a string without escaping it ends
    the string at that quote: the field is cut short ("The ") and the grammar forces the next key. The
    last string of an object ends only at ``"`` + ``}``, so there any quote may stand inside it: the
    grammar admits both readings and the model's own ``"}`` closes it. :func:`close_last_string` then
    re-escapes the text. Signatures put free text last for this reason.
    """
    props = schema.get("properties") or {}
    if not props:
        return schema, None
    name = list(props)[-1]
    node = props[name]
    if not isinstance(node, dict) or node.get("type") != "string" or {"enum", "const", "pattern", "format"} & node.keys():
        return schema, None
    schema = copy.deepcopy(schema)
    schema["properties"][name] = {"type": "string",
                                  "pattern": FREE_TEXT % min(int(node.get("maxLength", MAX_STRING_CHARS)), MAX_STRING_CHARS)}
    return schema, name


# A quote, a comma and a new key: the model closing the free string and starting another field (a key the
# schema does not have, so the grammar read it as more text). Prose practically never contains this.
KEY_SPILL = re.compile(r'(?<!\\)"\s*,\s*"[A-Za-z_][A-Za-z0-9_ ]{0,40}"\s*:')


def close_last_string(text: str, name: str) -> tuple[str, bool, bool]:
    """(valid JSON text, whether the value was cut, whether it spilled): the raw last string re-escaped, closed if
    generation stopped, and cut where the model began another key inside it (``", "chunk_ids": [...``)."""
    start = re.search(r'"%s"\s*:\s*"' % re.escape(name), text)
    body = text[start.end():] if start else ""
    spill = KEY_SPILL.search(body)
    if not spill:
        try:
            json.loads(text, strict=False)
            return text, False, False
        except json.JSONDecodeError:
            pass
    if not start:
        return text, False, False
    end = re.search(r'"\s*}\s*$', body)
    raw = body[:spill.start()] if spill else body[:end.start()] if end else body
    for candidate in (raw, re.sub(r'(?<!\\)"', '\\"', raw)):
        try:
            value = json.loads(f'"{candidate}"', strict=False)
            break
        except json.JSONDecodeError:
            continue
    else:
        value = raw
    return text[:start.end() - 1] + json.dumps(value, ensure_ascii=False) + "}", end is None and not spill, bool(spill)


def cut_fields(text: str, bounded: dict[str, Any]) -> list[tuple[str, int]]:
    """Top-level string fields whose value reached the ``maxLength`` the grammar imposed: cut short, not finished."""
    try:
        value = json.loads(text, strict=False)
    except json.JSONDecodeError:
        return []
    out = []
    for name, prop in (bounded.get("properties") or {}).items():
        limit = prop.get("maxLength") if isinstance(prop, dict) else None
        if isinstance(prop, dict) and str(prop.get("pattern", "")).startswith(FREE_TEXT[:14]):
            limit = int(re.search(r"\{0,(\d+)\}", prop["pattern"]).group(1))
        if limit and isinstance(value, dict) and isinstance(value.get(name), str) and len(value[name]) >= limit:
            out.append((name, int(limit)))
    return out


def json_problem(text: str, schema: dict[str, Any] | None) -> str | None:
    """Why ``text`` is not the JSON object asked for, or None when it is."""
    try:  # strict=False: a raw newline inside a string is fine for DSPy's parser (json_repair) too
        value = json.loads(text, strict=False)
    except json.JSONDecodeError as exc:
        return f"invalid JSON ({exc.msg} at char {exc.pos})"
    if not isinstance(value, dict):
        return "JSON is not an object"
    missing = [key for key in (schema or {}).get("required", []) if key not in value]
    return f"missing required keys {missing}" if missing else None
