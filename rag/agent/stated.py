"""What an answer states, read with no model call: its numbers, the quantity its question asks for, a citation
standing where a value belongs, and a query result's rows in words. The critic's text checks use these
(rag.agent.critique): ``numbers`` (:func:`unsupported_numbers`), ``citations`` (:func:`cited_for_values`), ``fill``
(:func:`written_rows`), ``empty`` (:func:`found_nothing`) and ``quantity`` (:func:`unstated`).

The quantity check. Asked for a figure the passages do not hold, the embedded model answers with the nearest
passage instead, and the answer states no figure at all, or only the question's own: "How much do we charge per day
to store a refused delivery?" answered with the return procedure; "What was the fuel surcharge before it was set at
12.5%?" answered "12.5%". When the question names the unit, a figure in another unit does not answer it either:
"How many hours of training does a forklift certificate take?" answered "the certificate is renewed every 3 years".
:func:`unstated` says why, or None:

- the question asks for a quantity: "how many X", "how much", "how long", "how often", "how far", "how heavy",
  "how soon"; "what is the maximum/minimum/highest/lowest X"; "what (is the) ... percentage/percent/rate/weight/
  speed/distance/fee/cost/price";
- the answer states no number (digits, or a number word up to twenty, and the tens) other than those the question
  states; years (1900 to 2099) and the digits of ids and citations are not figures;
- or the question names a unit (hours, days, kg, tonnes, km, euros, percent, ...; "what weight" and "how heavy" ask
  for kg or tonnes) and no number of the answer is followed by that unit.

The critic applies it only to an answer that cites no query result: a SQL result's figures are the other checks'.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                    "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split())}
WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "ninety": 90, "hundred": 100, "dozen": 12})
# the units a question may name, each with the spellings an answer may use after its number
UNITS = {
    "minute": ("minute", "minutes", "min", "mins"), "hour": ("hour", "hours", "h", "hr", "hrs"),
    "day": ("day", "days"), "week": ("week", "weeks"), "month": ("month", "months"), "year": ("year", "years"),
    "kg": ("kg", "kilogram", "kilograms", "kilo", "kilos", "tonne", "tonnes", "t", "ton", "tons"),
    "km": ("km", "kilometre", "kilometres", "kilometer", "kilometers"), "km/h": ("km/h", "kph", "kmh"),
    "eur": ("eur", "euro", "euros", "€"), "percent": ("%", "percent", "per cent"),
}
NAMED = {"minutes": "minute", "hours": "hour", "days": "day", "weeks": "week", "months": "month", "years": "year",
         "kg": "kg", "kilograms": "kg", "kilos": "kg", "tonnes": "kg", "tons": "kg", "km": "km", "kilometres": "km",
         "kilometers": "km", "euros": "eur", "eur": "eur", "percent": "percent", "percentage": "percent",
         "weight": "kg", "heavy": "kg", "speed": "km/h", "distance": "km", "far": "km"}
_ASKED = re.compile(
    r"\bhow (?:many|much|long|often|far|heavy|soon)\b(?: (\w+))?"
    r"|\bwhat(?:'s| is| was| are| were)?(?: the| our| a)? (?:max(?:imum)?|min(?:imum)?|highest|lowest|largest|"
    r"smallest) (\w+)"
    r"|\bwhat(?:'s| is| was| are| were)?(?: the| our| a)?(?: [\w-]+){0,3}? (percentage|percent|rate|weight|speed|"
    r"distance|fee|cost|price)\b", re.I)
_AFTER = r"(?=(?:[\s-]*(%|€|[a-z/]+(?:[ -][a-z/]+)?))?)"  # the two words after a number, read ahead, not consumed
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:[.,]\d+)*)" + _AFTER + r"|(?<![\w-])([a-z]+)\b" + _AFTER, re.I)
_SPELLED = {w for spellings in UNITS.values() for w in spellings}
# a citation right after a copula or a preposition (after a comma, a closing bracket or quote too: "..., was
# [sql:1].", "(Milan to Porto) is [sql:1]."), ending its clause: where the value the sentence promises belongs
CITED_VALUE = re.compile(r"\b(\w+)[)\"'\u2019]?,?\s+(?:is|are|was|were|be|on|of|in|at|by|to|for|as|since)\s+(\[[^\]\n]{1,80}\])"
                          r"(?=\s*(?:[.,;:)]|$|\band\b|\bwith\b))", re.I)
ATTRIBUTION = {"stated", "described", "given", "shown", "listed", "set", "defined", "found", "mentioned", "explained",
               "noted", "specified", "outlined", "according", "per", "see", "written", "laid", "detailed", "covered",
               "explains", "states", "says", "said", "documented", "recorded", "provided", "contained", "referenced"}
NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])\d+(?:\.\d+)?")
_CITATION = re.compile(r"\[[^\]\n]{1,80}\]")
_LIST_MARK = re.compile(r"(?m)^\s*\d{1,2}[.)]\s")


def unstated(question: str, answer: str) -> str | None:
    """Why ``answer`` does not state the quantity ``question`` asks for, or None (module docstring)."""
    asked = _ASKED.search(question)
    if asked is None:
        return None
    phrase = " ".join(asked.group(0).split())
    unit = _unit(question, asked)
    given = {value for value, _ in figures(question)}
    stated = [(value, after) for value, after in figures(_CITATION.sub(" ", answer)) if value not in given]
    if not stated:
        return (f"the question asks {phrase!r}, and the answer states no figure beyond the question's own: the "
                "passages may not hold it")
    if unit is not None and not any(set(after.split()) & set(UNITS[unit]) or after.startswith("%") and unit == "percent"
                                    for _, after in stated):
        return (f"the question asks {phrase!r}, and no figure the answer states is in {unit}: the passages may not "
                "hold it")
    return None


def figures(text: str) -> list[tuple[float, str]]:
    """(value, the two words after it, lower case) of each number ``text`` states, as digits or as a number word; years
    and digits inside words (ids: S00072) are left out."""
    found = []
    for m in _NUMBER.finditer(text.replace("\u2019", "'")):
        digits, word = m.group(1), (m.group(3) or "").lower()
        if digits:
            value, after = float(digits.replace(",", "")), (m.group(2) or "").lower()
            if digits.isdigit() and len(digits) == 4 and 1900 <= value <= 2099 and not set(after.split()) & _SPELLED:
                continue  # a year, not a figure
        elif word in WORDS:
            value, after = float(WORDS[word]), (m.group(4) or "").lower()
        else:
            continue
        found.append((value, after))
    return found


def _unit(question: str, asked: re.Match[str]) -> str | None:
    """The unit a quantity question names ("how many hours" -> hour, "what weight" -> kg), or None."""
    named = next((g.lower() for g in asked.groups() if g), "")
    word = asked.group(0).split()[1].lower() if asked.group(0).lower().startswith("how ") else ""
    return NAMED.get(named) or NAMED.get(word)


def written_rows(columns: list[str], rows: list[list[Any]]) -> str:
    """A query result's rows as words: one value alone ("40.0"); else per row its first value, then each other
    column's name and value ("damage: count 159, total amount eur 459507.13"), rows joined with "; ". Numbers to
    2 decimals (4 significant digits below 1), true/false as yes/no."""
    labels = [" ".join(w for w in re.findall(r"[a-z0-9]+", str(c).lower()) if w != "star") or str(c) for c in columns]
    labels += [""] * (max(map(len, rows)) - len(labels))
    if all(len(row) == 1 for row in rows):
        return "; ".join(_word(row[0]) for row in rows)
    written = []
    for row in rows:
        first = _word(row[0]) if isinstance(row[0], str) else f"{labels[0]} {_word(row[0])}".strip()
        written.append(f"{first}: " + ", ".join(f"{label} {_word(v)}".strip() for label, v in zip(labels[1:], row[1:])))
    return "; ".join(written)


def found_nothing(rows: list[list[Any]]) -> bool:
    """Whether a query's rows hold nothing: no row, every value NULL, or one row of zeros and NULLs (a count or a
    sum over no rows). False and an empty string are values."""
    if all(v is None for row in rows for v in row):
        return True
    return len(rows) == 1 and all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0)
                                  for v in rows[0])


def _word(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return str(round(value, 2)) if abs(value) >= 1 else f"{value:.4g}"
    return "none" if value is None else str(value)


def cited_for_values(answer: str) -> list[str]:
    """The spans of ``answer`` where a citation stands in for a value ("limit is [sql:1]"): a citation right after a
    copula or a preposition, ending its clause, unless the word before says where something is stated ("as
    described in [x]")."""
    return [f"{m.group(0).strip()}" for m in CITED_VALUE.finditer(answer) if m.group(1).lower() not in ATTRIBUTION]


def unsupported_numbers(answer: str, sources: Iterable[str]) -> list[str]:
    """The numbers of ``answer`` (as written) that no text of ``sources`` holds, exactly or rounded to the answer's
    precision, as a share (0.4 for 40) or as a percentage (40 for 0.4). Citation ids ``[...]`` and list numbering
    are not claims."""
    text = _LIST_MARK.sub(" ", _CITATION.sub(" ", answer))
    known = [_value(n) for source in sources for n in NUMBER.findall(_CITATION.sub(" ", source) if source else "")]
    missing = []
    for written in NUMBER.findall(text):
        value, places = _value(written), len(written.split(".")[1]) if "." in written else 0
        if not any(_same(value, k, places) or _same(value, k * 100, places) or _same(value, k / 100, places)
                   for k in known) and written not in missing:
            missing.append(written)
    return missing


def _value(written: str) -> float:
    return float(written.replace(",", ""))


def _same(value: float, known: float, places: int) -> bool:
    """``value`` is ``known`` written with ``places`` decimals (1234.57 for 1234.5678; 12 for 12.0 or 11.7)."""
    return abs(round(known, places) - value) < 10 ** -(places + 3) or abs(known - value) < 1e-9
