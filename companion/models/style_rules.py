"""Style instructions the offline model follows when its system prompt carries them, as data.

Procedural memory (notebook 13) turns a user's correction ("answer in metric units") into an instruction that a hook
puts into the agent's system prompt. A real model follows such an instruction on its own; the offline model follows
the small, listed set of :data:`STYLE_RULES` below, so the effect of a learned procedure is visible offline, in both
voices. A rule applies only when the system prompt of the call carries its instruction (its `pattern` matches the
prompt), so a call without one gets the same reply as before, byte for byte.

Each rule is a row: an id, the instruction as a user would word it, the pattern that recognises it in a system prompt,
what it does to the reply, and an example reply before and after. The rules rewrite the text of a reply (not a tool
call, a summary or an extraction) in the order of the table: values first (units, times, dates), then the ticket
number in front. tests/test_style_rules.py runs every example through the offline model, in both voices.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["STYLE_RULES", "TICKET", "active_rules", "apply_style", "rule_rows"]

_NUMBER = r"(?P<n>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"

# unit words -> (metric unit, factor, offset): metric = imperial * factor + offset
_UNITS: list[tuple[str, str, float, float]] = [
    (r"miles? per hour|mph", "km/h", 1.609344, 0.0),
    (r"miles?|mi", "km", 1.609344, 0.0),
    (r"feet|foot|ft", "m", 0.3048, 0.0),
    (r"inch(?:es)?", "cm", 2.54, 0.0),
    (r"pounds?|lbs?", "kg", 0.45359237, 0.0),
    (r"ounces?|oz", "g", 28.349523125, 0.0),
    (r"gallons?|gal", "L", 3.785411784, 0.0),
    (r"°\s?F|degrees? Fahrenheit", "°C", 5 / 9, -32 * 5 / 9),
]
_IMPERIAL = re.compile(
    _NUMBER + r"[ \-]?(?P<unit>" + "|".join(f"(?:{u})" for u, *_ in _UNITS) + r")(?![\w°])", re.IGNORECASE
)
_UNIT_PATTERNS = [(re.compile(rf"^(?:{u})$", re.IGNORECASE), metric, factor, offset)
                  for u, metric, factor, offset in _UNITS]

_CLOCK = re.compile(r"\b(?P<h>1[0-2]|0?[1-9])(?::(?P<m>[0-5]\d))?\s?(?P<ap>[ap])(?:m|\.m\.?)(?!\w)", re.IGNORECASE)

_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december"]
_MONTH = r"(?P<month>" + "|".join(f"{m[:3]}(?:{m[3:]})?" for m in _MONTHS) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_DATES = [re.compile(rf"\b{_DAY} {_MONTH},? (?P<year>\d{{4}})\b", re.IGNORECASE),
          re.compile(rf"\b{_MONTH} {_DAY},? (?P<year>\d{{4}})\b", re.IGNORECASE)]

TICKET = re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d{1,7}\b")
"""A ticket number as the rule looks for it in the conversation: capitals, a hyphen, digits (OPS-4821)."""


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _shown(value: float) -> str:
    """A converted value with one decimal, without a trailing ".0" (9.144 -> "9.1", 20.0 -> "20")."""
    text = f"{value:,.1f}"
    return text[:-2] if text.endswith(".0") else text


def _metric(text: str, context: dict[str, Any]) -> str:
    def convert(match: re.Match[str]) -> str:
        unit = match.group("unit")
        for pattern, metric, factor, offset in _UNIT_PATTERNS:
            if pattern.match(unit):
                value = _number(match.group("n")) * factor + offset
                return f"{_shown(value)} {metric}"
        return match.group(0)

    return _IMPERIAL.sub(convert, text)


def _twenty_four_hour(text: str, context: dict[str, Any]) -> str:
    def convert(match: re.Match[str]) -> str:
        hour = int(match.group("h")) % 12 + (12 if match.group("ap").lower() == "p" else 0)
        time = f"{hour:02d}:{match.group('m') or '00'}"
        after = match.string[match.end():match.end() + 2]
        ends_sentence = match.group(0).endswith(".") and (after == "" or after[:1] == "\n" or after[1:].isupper())
        return time + "." if ends_sentence else time

    return _CLOCK.sub(convert, text)


def _iso_dates(text: str, context: dict[str, Any]) -> str:
    def convert(match: re.Match[str]) -> str:
        month = next(i for i, m in enumerate(_MONTHS, 1) if m.startswith(match.group("month").lower()[:3]))
        day = int(match.group("day"))
        if not 1 <= day <= 31:
            return match.group(0)
        return f"{match.group('year')}-{month:02d}-{day:02d}"

    for pattern in _DATES:
        text = pattern.sub(convert, text)
    return text


_TICKET_FORMS = {"plain": "Ticket {ticket}: {reply}", "paraphrase": "{reply} (ticket {ticket})"}
_NO_TICKET = {"plain": "No ticket number given. {reply}", "paraphrase": "{reply} (I don't have a ticket number yet)"}


def _ticket(text: str, context: dict[str, Any]) -> str:
    found = [t for message in context.get("messages", []) for t in TICKET.findall(message)]
    voice = context.get("voice") or "plain"
    if found and found[-1] in text:
        return text
    forms = _TICKET_FORMS if found else _NO_TICKET
    return forms.get(voice, forms["plain"]).format(ticket=found[-1] if found else "", reply=text)


STYLE_RULES: list[dict[str, Any]] = [
    {"id": "metric", "instruction": "Always answer in metric units.",
     "pattern": r"\bmetric units?\b|\bin metric\b|\bmetric system\b",
     "does": "miles, feet, inches, pounds, ounces, gallons, mph and °F become km, m, cm, kg, g, L, km/h and °C "
             "(one decimal)",
     "apply": _metric, "example": "My cable length is 30 feet. What is my cable length?",
     "before": "Your cable length is 30 feet.", "after": "Your cable length is 9.1 m.",
     "shows": "9.1 m", "gone": "30 feet"},
    {"id": "24-hour", "instruction": "Always use 24-hour time.",
     "pattern": r"\b24[ -]?hours? (?:time|clock|format)\b",
     "does": "3 pm, 9:30 a.m. become 15:00, 09:30",
     "apply": _twenty_four_hour, "example": "My install time is 3 pm. What is my install time?",
     "before": "Your install time is 3 pm.", "after": "Your install time is 15:00.",
     "shows": "15:00", "gone": "3 pm"},
    {"id": "iso-date", "instruction": "Always write dates as YYYY-MM-DD.",
     "pattern": r"\bYYYY-MM-DD\b|\bISO[ -]?(?:8601 )?dates?\b",
     "does": "5 March 2026, March 5, 2026 become 2026-03-05",
     "apply": _iso_dates, "example": "My renewal date is 5 March 2026. What is my renewal date?",
     "before": "Your renewal date is 5 March 2026.", "after": "Your renewal date is 2026-03-05.",
     "shows": "2026-03-05", "gone": "5 March 2026"},
    {"id": "ticket", "instruction": "Always include the ticket number.",
     "pattern": r"\b(?:include|mention|quote|give|add|put|start with|cite)\b[^.\n]{0,20}\bticket (?:number|id)s?\b",
     "does": "the latest ticket number in the conversation's messages (like OPS-4821) is added to a reply that "
             "lacks it",
     "apply": _ticket, "example": "My ticket number is OPS-4821 and my cable length is 30 feet. "
                                  "What is my cable length?",
     "before": "Your cable length is 30 feet.", "after": "Ticket OPS-4821: Your cable length is 30 feet.",
     "shows": "OPS-4821", "gone": None},
]
"""The style instructions the offline model follows, in the order it applies them (see the module docstring)."""

for _rule in STYLE_RULES:
    _rule["compiled"] = re.compile(_rule["pattern"], re.IGNORECASE)


def active_rules(system_prompt: str | None) -> list[dict[str, Any]]:
    """The rules whose instruction the system prompt carries, in table order (none for a prompt without one)."""
    if not system_prompt:
        return []
    return [rule for rule in STYLE_RULES if rule["compiled"].search(system_prompt)]


def apply_style(text: str, system_prompt: str | None, messages: Sequence[str] = (), voice: str = "plain") -> str:
    """A reply's text as the style instructions in `system_prompt` want it; unchanged when there are none.

    `messages` are the texts of the conversation's messages, oldest first (the ticket rule looks for the latest
    ticket number in them); `voice` picks the wording of what a rule adds (the ticket rule's form).
    """
    context = {"messages": list(messages), "voice": voice}
    for rule in active_rules(system_prompt):
        apply: Callable[[str, dict[str, Any]], str] = rule["apply"]
        text = apply(text, context)
    return text


def rule_rows() -> list[dict[str, str]]:
    """The rules as table rows (notebooks 00 and 12): the instruction, what it does, and its example, answered by the
    offline model's plain voice without and with the instruction in the system prompt."""
    return [{"rule": r["id"], "instruction": r["instruction"], "does": r["does"], "user says": r["example"],
             "reply without it": r["before"], "with it": r["after"]} for r in STYLE_RULES]
