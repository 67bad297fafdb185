"""Reading facts and questions out of plain text.

The offline model knows only what these functions find in the text of a call. Keeping the rules
here, small and explicit, lets a learner predict exactly what the model can and cannot answer.

Statements it reads (case-insensitive), one per clause:
  "My name is Pin"            -> name = Pin
  "Actually, my name is Ada"  -> name = Ada (a later statement wins)
  "Your codename is ORION"    -> codename = ORION (an assistant restating a user fact)
  "The user's plan is pro"    -> plan = pro (summaries and memory entries use this form)
  {"codename": "ORION"}       -> codename = ORION (JSON objects, e.g. a state manifest)
Questions it answers: a sentence ending in "?" that asks about "my X", "your X", "the user's X" or "the X".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Iterable

_OWNER = r"(?:my|your|the user's|the users'|user's)"
_CLAUSE_SPLIT = re.compile(rf"\s*(?:,\s*)?\band\s+(?={_OWNER}\s)", re.IGNORECASE)
_STATEMENT = re.compile(
    rf"^(?:(?:actually|also|remember|note|by the way|oh|ok|okay|and|so)\b[,:]?\s*)*"
    rf"{_OWNER}\s+(?P<key>[a-z][a-z0-9 \-]{{0,40}}?)\s+(?:is|was|are|=)\s+(?P<value>.+)$",
    re.IGNORECASE,
)
_QUESTION_LEAD = re.compile(
    r"^(?:(?:so|and|now|ok|okay|quick question)\b[,:]?\s*)*"
    r"(?:what(?:'s| is| was| are| were)|which(?: is| was)?|who(?: is| was)|do you (?:remember|know)|"
    r"can you (?:tell me|remind me of)|tell me|remind me of)\s+",
    re.IGNORECASE,
)
_ASKED = re.compile(rf"^(?:{_OWNER}|the)\s+(?P<key>[a-z][a-z0-9 \-]{{0,40}})$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
_TRAILING = re.compile(r"(?:\s+(?:again|please|now|i (?:gave|told) you|you know))+$", re.IGNORECASE)
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


@dataclass(frozen=True)
class Fact:
    """One attribute the text states, with the value of its latest statement."""

    key: str
    value: str


def normalise_key(key: str) -> str:
    """Lower-case, single-spaced, British/American spelling folded, so "Favourite  Number" == "favorite number"."""
    key = re.sub(r"[\s_\-]+", " ", key.strip().lower())
    return key.replace("favourite", "favorite").replace("colour", "color")


def _clean_value(value: str) -> str:
    value = value.strip().strip("\"'`*").strip()
    return re.sub(r"[\s.,;:!]+$", "", value)


def sentences(text: str) -> list[str]:
    """Split text into sentences and lines, keeping the closing punctuation."""
    out = []
    for part in _SENTENCE_END.split(text):
        part = part.strip().lstrip("*-•#> ").strip()
        if part:
            out.append(part)
    return out


def _json_facts(text: str) -> list[Fact]:
    """Flatten JSON objects found in the text into facts ("user.name" is read as "name" too)."""
    found: list[Fact] = []
    for match in _JSON_OBJECT.finditer(text):
        try:
            data = json.loads(match.group(0))
        except ValueError:
            continue
        if isinstance(data, dict):
            _flatten(data, found)
    return found


def _flatten(data: dict, found: list[Fact]) -> None:
    for key, value in data.items():
        if isinstance(value, dict):
            _flatten(value, found)
        elif isinstance(value, (str, int, float, bool)):
            found.append(Fact(normalise_key(str(key)), str(value)))


def statements(text: str) -> list[Fact]:
    """Facts stated in one text, in the order they are stated. Questions state nothing."""
    found = _json_facts(text)
    for sentence in sentences(_JSON_OBJECT.sub(" ", text)):
        if sentence.endswith("?"):
            continue
        for clause in _CLAUSE_SPLIT.split(sentence):
            match = _STATEMENT.match(clause.strip())
            if match:
                value = _clean_value(match.group("value"))
                if value:
                    found.append(Fact(normalise_key(match.group("key")), value))
    return found


def latest_facts(texts: Iterable[str]) -> dict[str, str]:
    """All facts visible across the texts; for a key stated more than once, the latest statement wins."""
    facts: dict[str, str] = {}
    for text in texts:
        for fact in statements(text):
            facts.pop(fact.key, None)  # re-insert so the dict order follows the latest statement
            facts[fact.key] = fact.value
    return facts


def asked_keys(text: str) -> list[str]:
    """The attributes a question asks about, e.g. "What is my name and my favorite number?" -> [name, favorite number].

    Returns an empty list for text that is not such a question.
    """
    asked: list[str] = []
    for sentence in sentences(text):
        if not sentence.endswith("?"):
            continue
        body = _QUESTION_LEAD.sub("", sentence.rstrip("?").strip(), count=1)
        for fragment in re.split(r"\s*(?:,|\band\b|\bor\b)\s*", body):
            fragment = _TRAILING.sub("", fragment.strip())
            match = _ASKED.match(fragment)
            if match:
                asked.append(normalise_key(match.group("key")))
    return asked


def match_key(asked: str, known: Iterable[str]) -> str | None:
    """The known key an asked key refers to: exact, else the known key the question spells out in full.

    "favorite number" matches "favorite number"; "number" alone does not guess which number was meant.
    """
    known = list(known)
    if asked in known:
        return asked
    words = f" {asked} "
    candidates = [key for key in known if f" {key} " in words]
    return max(candidates, key=len) if candidates else None


_REMEMBER = re.compile(r"^(?:please\s+)?remember(?:\s+that|\s+this)?\s*[:,]?\s+(?P<rest>.+)$", re.IGNORECASE | re.DOTALL)
_FIRST_PERSON = [
    (re.compile(r"^(?:i am|i'm)\b", re.IGNORECASE), "The user is"),
    (re.compile(r"^(?:i have|i've)\b", re.IGNORECASE), "The user has"),
    (re.compile(r"^(?:i do not|i don't)\b", re.IGNORECASE), "The user does not"),
    (re.compile(r"^my\b", re.IGNORECASE), "The user's"),
]


def _third_person_verb(verb: str) -> str:
    if re.search(r"(?:s|sh|ch|x|z|o)$", verb):
        return verb + "es"
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    return verb + "s"


def third_person(text: str) -> str:
    """Restate a first-person sentence about the user in the third person, as memories are stored.

    "I prefer deployments on Tuesday mornings." -> "The user prefers deployments on Tuesday mornings."
    """
    sentence = text.strip()
    for pattern, replacement in _FIRST_PERSON:
        if pattern.match(sentence):
            sentence = pattern.sub(replacement, sentence, count=1)
            break
    else:
        match = re.match(r"^i\s+(\w+)\b", sentence, re.IGNORECASE)
        if match:
            sentence = f"The user {_third_person_verb(match.group(1).lower())}{sentence[match.end():]}"
    sentence = re.sub(r"\bmy\b", "the user's", sentence, flags=re.IGNORECASE)
    sentence = re.sub(r"\bme\b", "the user", sentence, flags=re.IGNORECASE)
    sentence = sentence[:1].upper() + sentence[1:]
    return sentence if sentence.endswith((".", "!", "?")) else sentence + "."


def remember_request(text: str) -> list[str]:
    """The memories a "Please remember that ..." message asks to keep, in the third person; [] for other text."""
    match = _REMEMBER.match(text.strip())
    if not match:
        return []
    return [third_person(sentence) for sentence in sentences(match.group("rest"))]
