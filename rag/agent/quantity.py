"""Whether an answer states the quantity its question asks for: the critic's ``quantity`` check (no model call).

Asked for a figure the passages do not hold, the embedded model answers with the nearest passage instead, and the
answer states no figure at all, or only the question's own: "How much do we charge per day to store a refused
delivery?" answered with the return procedure; "What was the fuel surcharge before it was set at 12.5%?" answered
"12.5%". When the question names the unit, a figure in another unit does not answer it either: "How many hours of
training does a forklift certificate take?" answered "the certificate is renewed every 3 years".

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
_CITATION = re.compile(r"\[[^\]\n]{1,80}\]")


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
