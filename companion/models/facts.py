"""Reading facts and questions out of plain text.

The offline model knows only what these functions find in the text of a call. Keeping the rules
here, small and explicit, lets a learner predict exactly what the model can and cannot answer.
:data:`RULES` lists every form as data, with an example sentence and what the model stores from it;
docs/offline-model.md shows it as a table and the tests run every example through a real ``Agent``.

Statements it reads (case-insensitive), wherever they stand in a sentence:
  "My name is Pin"                              -> name = Pin
  "Please remember that my codename is VEGA."   -> codename = VEGA (a lead such as "note:", "FYI", "Hi!" is skipped)
  "Known facts: the user's codename is ORION."  -> codename = ORION (summaries and memory entries use this form)
  "Your codename is ORION"                      -> codename = ORION (an assistant restating a user fact)
  "My name is Ada and my plan is pro"           -> name = Ada, plan = pro (one statement per clause)
  {"codename": "ORION"} ... {"codename": "VEGA"} -> codename = VEGA (every JSON object, e.g. a state manifest)
A sentence ending in "?" states nothing. For a key stated more than once, the latest statement wins.
Questions it answers: a sentence ending in "?" that asks about "my X", "your X", "the user's X" or "the X".

Every function here runs in time linear in the length of its text: whitespace runs are squeezed first, and no
pattern can rescan a run of characters from each of its positions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import partial
from typing import NamedTuple

from companion.support import parameters

_OWNER = r"(?:the user's|the users'|user's|my|your)"
_KEY = r"[a-z][a-z0-9\-]*(?: [a-z0-9\-]+){0,5}?"  # one to six words, as few as the sentence allows
_VERB = r"(?:is|was|are|=)"

# Whitespace is squeezed before any other pattern runs: a run with a line break becomes one "\n", any other run one
# space. After that every \s in a pattern matches exactly one character, which keeps the patterns linear.
_BLANKS = re.compile(r"[^\S\n]{2,}|[^\S \n]")
_BREAKS = re.compile(r" ?\n\s*")

# A sentence that ends in "?" (a question) is removed before statements are read, so a question states nothing.
# Sentences end at ., !, ? or ; followed by whitespace or the end, or at a line break (as `sentences` splits them).
# _SENTENCES matches every sentence in turn, from its start: a question in the first branch, anything else in the
# second (group "kept"), so joining what findall returns (the "kept" group) drops the questions and keeps the rest.
# The atomic group (?>...) never gives characters back, so each sentence is scanned a bounded number of times.
_BODY = r"(?>(?:[^.!?;\n]+|[.!?;]+(?=\S))*)"
_SENTENCES = re.compile(rf"{_BODY}\?(?=\s|\Z)\s?|(?P<kept>{_BODY}[.!?;]?\s?)")
_QUESTION_SENTENCE = re.compile(rf"(?:\A|(?<=\n)|(?<=[.!?;] )){_BODY}\?(?=\s|\Z)")

# One statement: an owner word, a short key, a verb, then the value up to the end of its clause: the end of the
# sentence, a line break, or "and" followed by the next owner word ("my name is Ada and my plan is pro"). The value is
# an atomic group of runs of ordinary characters, so a long value is read in one pass.
_NEXT_CLAUSE = rf"\s?,?\s?and\s{_OWNER}\s"
_VALUE = rf"(?>(?:[^.!?;\n ,]+|[.!?;]+(?=\S)|(?!{_NEXT_CLAUSE})[ ,])+)"
_STATEMENT = re.compile(rf"\b{_OWNER} (?P<key>{_KEY}) {_VERB} (?P<value>{_VALUE})", re.IGNORECASE)  # on one line

_QUESTION_LEAD = re.compile(
    r"^(?:(?:so|and|now|ok|okay|hi|hey|hello|by the way|quick question|one more thing|also|then)\b[,:!]?\s?)*"
    r"(?:(?:what(?:'s| is| was| are| were)|which(?: is| was)?|who(?: is| was)|do you (?:remember|know)|"
    r"can you (?:tell me|remind me of)|tell me|remind me of)\s)?",
    re.IGNORECASE,
)
_ASKED = re.compile(
    rf"^(?:{_OWNER}|the)\s(?P<key>{_KEY})(?:\s(?:again|please|now|i (?:gave|told) you|you know))*$", re.IGNORECASE
)
_FRAGMENT_SPLIT = re.compile(r"\s?(?:,|\band\b|\bor\b)\s?", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s|\n")
_JSON_START = re.compile(r'\{\s?"(?:[^"\\\n]|\\.){0,200}"\s?:')
_KEY_SEPARATORS = re.compile(r"[\s_\-]+")
_VALUE_EDGES = " \n\"'`*"
_VALUE_TAIL = " \n\"'`*.,;:!"


class Fact(NamedTuple):
    """One attribute the text states, with the value of its statement."""

    key: str
    value: str


_new_fact = partial(tuple.__new__, Fact)  # Fact from a (key, value) pair, without a Python-level call per fact


def squeeze(text: str) -> str:
    """Text with every whitespace run made one character: a line break if the run had one, else a space."""
    # Each pattern runs only when str methods (much faster on long texts) find something for it to change.
    if "  " in text or not text.replace("\n", "").isprintable():
        text = _BLANKS.sub(" ", text)
    if "\n" in text and (" \n" in text or "\n " in text or "\n\n" in text):
        text = _BREAKS.sub("\n", text)
    return text


def _without_questions(text: str) -> str:
    """Squeezed text without its questions: every sentence that ends in "?"."""
    if "? " in text or "?\n" in text or text.endswith("?"):
        return "".join(_SENTENCES.findall(text))  # the "kept" group of each sentence: "" for a question
    return text


def normalise_key(key: str) -> str:
    """Lower-case, single-spaced, British/American spelling folded, so "Favourite  Number" == "favorite number"."""
    key = _KEY_SEPARATORS.sub(" ", key.strip().lower())
    return key.replace("favourite", "favorite").replace("colour", "color")


def _normalise_keys(keys: list[str]) -> list[str]:
    """normalise_key on many keys at once, in one pass over their joined text (keys hold no NUL character)."""
    if not keys:
        return []
    joined = _KEY_SEPARATORS.sub(" ", "\0".join(keys).lower())
    joined = joined.replace("favourite", "favorite").replace("colour", "color")
    return [key.strip(" ") for key in joined.split("\0")]


def sentences(text: str) -> list[str]:
    """Split text into sentences and lines, keeping the closing punctuation."""
    out = []
    for part in _SENTENCE_END.split(squeeze(text)):
        part = part.strip().lstrip("*-•#> ").strip()
        if part:
            out.append(part)
    return out


def _json_objects(text: str) -> tuple[list[dict], str]:
    """Every JSON object in the text, in order, and the text with those objects replaced by a space.

    Parsing starts only at a "{" followed by a quoted key and a colon. Each attempt parses a window of the text that
    grows (doubling) only while the object may go on past it, and a failed attempt resumes the search where parsing
    failed, so the work stays proportional to the length of the text.
    """
    objects: list[dict] = []
    pieces: list[str] = []
    done = 0  # end of the text already copied to pieces
    position = 0
    while True:
        match = _JSON_START.search(text, position)
        if match is None:
            break
        start = match.start()
        try:
            data, end = _decode_at(text, start)
        except _NotJson as failure:
            position = max(failure.at, start + 1)
            continue
        if isinstance(data, dict):
            objects.append(data)
            pieces += [text[done:start], " "]
            done = end
        position = end
    if not objects:
        return [], text
    pieces.append(text[done:])
    return objects, "".join(pieces)


class _NotJson(Exception):
    def __init__(self, at: int) -> None:
        self.at = at


_DECODER = json.JSONDecoder()


def _decode_at(text: str, start: int) -> tuple[object, int]:
    """The JSON value that starts at `start` and the index where it ends; _NotJson(where it failed) if none does."""
    size = 256
    while True:
        window = text[start : start + size]
        try:
            data, length = _DECODER.raw_decode(window)
            return data, start + length
        except json.JSONDecodeError as error:
            cut_short = start + size < len(text) and (
                error.pos >= len(window) - 8 or error.msg.startswith("Unterminated string")
            )
            if not cut_short:
                raise _NotJson(start + error.pos) from None
        except RecursionError:  # nested deeper than Python parses: not a manifest
            raise _NotJson(len(text)) from None
        size *= 2


def _flatten(data: dict, found: list[tuple[str, str]]) -> None:
    for key, value in data.items():
        if isinstance(value, dict):
            _flatten(value, found)
        elif isinstance(value, (str, int, float, bool)):
            found.append((str(key).replace("\0", " "), str(value)))


def _pairs(text: str) -> list[tuple[str, str]]:
    """(key, value) of every statement in one text, in order: JSON objects first, then the sentences."""
    text = squeeze(text)
    json_pairs: list[tuple[str, str]] = []
    if "{" in text:
        objects, text = _json_objects(text)
        for data in objects:
            _flatten(data, json_pairs)
    prose = _without_questions(text)
    stated = _STATEMENT.findall(prose)
    if not json_pairs and not stated:
        return []
    keys = _normalise_keys([key for key, _ in json_pairs] + [key for key, _ in stated])
    pairs = [(key, value) for key, (_, value) in zip(keys, json_pairs)]  # JSON values are taken as they are
    # a value without surrounding quotes or emphasis, nor closing punctuation: '"Pin".' -> Pin
    cleaned = [value.strip(_VALUE_EDGES).rstrip(_VALUE_TAIL) for _, value in stated]
    pairs += [(key, value) for key, value in zip(keys[len(json_pairs):], cleaned) if value]
    return pairs


def statements(text: str) -> list[Fact]:
    """Facts stated in one text, in the order they are stated. Questions state nothing."""
    return list(map(_new_fact, _pairs(text)))


def latest_facts(texts: Iterable[str]) -> dict[str, str]:
    """All facts visible across the texts; for a key stated more than once, the latest statement wins.

    The order of the result follows each key's latest statement.
    """
    pairs = [pair for text in texts for pair in _pairs(text)]
    values = dict(pairs)  # the latest value of each key
    order = list(dict.fromkeys(key for key, _ in reversed(pairs)))
    return {key: values[key] for key in reversed(order)}


def asked_keys(text: str) -> list[str]:
    """The attributes a question asks about, e.g. "What is my name and my favorite number?" -> [name, favorite number].

    Returns an empty list for text that is not such a question.
    """
    asked: list[str] = []
    read: dict[str, list[str]] = {}  # a question repeated word for word is read once
    for sentence in _QUESTION_SENTENCE.findall(squeeze(text)):
        if sentence not in read:
            read[sentence] = _asked_in(sentence)
        asked += read[sentence]
    return asked


def _asked_in(sentence: str) -> list[str]:
    """The keys one question sentence asks about."""
    keys = []
    sentence = sentence.strip().lstrip("*-•#> ").rstrip("?").strip()
    for fragment in _FRAGMENT_SPLIT.split(sentence):
        fragment = _QUESTION_LEAD.sub("", fragment.strip(), count=1)
        match = _ASKED.match(fragment)
        if match:
            keys.append(normalise_key(match.group("key")))
    return keys


_SAID_ABOUT = re.compile(
    r"^what did i (?:say|tell you) about (?P<owner>the |my |our )?(?P<topic>[a-z0-9][a-z0-9\- ]{0,60}?)\s?\?$",
    re.IGNORECASE,
)


def said_about(question: str) -> str | None:
    """The topic of "What did I say about the X?" ("the X"; "my X" becomes "your X"), or None for other text."""
    match = _SAID_ABOUT.match(squeeze(question).strip())
    if match is None:
        return None
    owner = (match.group("owner") or "").strip().lower()
    owner = {"my": "your"}.get(owner, owner)
    return f"{owner} {match.group('topic').strip()}".strip()


def sentences_about(topic: str, texts: Iterable[str]) -> list[str]:
    """The sentences of these texts, questions left out, that hold every word of the topic (case ignored)."""
    words = [w for w in re.findall(r"[a-z0-9\-]+", topic.lower()) if w not in {"the", "your", "our"}]
    found = []
    for text in texts:
        for sentence in sentences(text):
            said = set(re.findall(r"[a-z0-9\-]+", sentence.lower()))
            if words and not sentence.endswith("?") and all(w in said for w in words):
                found.append(sentence)
    return list(dict.fromkeys(found))


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


_REMEMBER = re.compile(r"^(?:please\s)?remember(?:\sthat|\sthis)?\s?[:,]?\s(?P<rest>.+)$", re.IGNORECASE | re.DOTALL)
_FIRST_PERSON = [
    (re.compile(r"^(?:i am|i'm)\b", re.IGNORECASE), "The user is"),
    (re.compile(r"^(?:i have|i've)\b", re.IGNORECASE), "The user has"),
    (re.compile(r"^(?:i do not|i don't)\b", re.IGNORECASE), "The user does not"),
    (re.compile(r"^my\b", re.IGNORECASE), "The user's"),
]


_ADVERBS = ("never", "always", "usually", "often", "also", "just", "really", "still", "only", "sometimes", "rarely",
            "mostly", "now", "even", "already", "seldom")
# Verbs that do not take an -s after "the user": modals and past forms ("I was" -> "the user was"); "am" -> "is".
_UNCHANGED_AFTER_I = {"am": "is", "was": "was", "were": "was", "can": "can", "could": "could", "will": "will",
                      "would": "would", "should": "should", "must": "must", "might": "might", "may": "may",
                      "had": "had", "did": "did", "used": "used"}


_PRESENT_ENDING_IN_ED = {"need", "feed", "speed", "breed", "bleed", "heed", "seed", "shed", "exceed", "proceed", "succeed"}
_IRREGULAR_PAST = {"went", "made", "wrote", "got", "took", "began", "left", "bought", "brought", "thought", "said",
                   "told", "found", "gave", "came", "knew", "saw", "ran", "sold", "built", "sent", "spent", "met", "set"}


def _third_person_verb(verb: str) -> str:
    """Present tense, third person singular; a past form ("moved", "went") is kept as it is."""
    if verb in _IRREGULAR_PAST or (verb.endswith("ed") and len(verb) > 3 and verb not in _PRESENT_ENDING_IN_ED):
        return verb
    if re.search(r"(?:s|sh|ch|x|z|o)$", verb):
        return verb + "es"
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    return verb + "s"


def third_person(text: str) -> str:
    """Restate a first-person sentence about the user in the third person, as memories are stored.

    "I prefer deployments on Tuesday mornings." -> "The user prefers deployments on Tuesday mornings."
    """
    sentence = squeeze(text).strip()
    for pattern, replacement in _FIRST_PERSON:
        if pattern.match(sentence):
            sentence = pattern.sub(replacement, sentence, count=1)
            break
    else:
        # "I [adverbs] verb ...": adverbs stay, the verb takes the third person, and a modal or past form stays as it is.
        match = re.match(r"^i((?:\s+(?:" + "|".join(_ADVERBS) + r"))*)\s+(\w+)\b", sentence, re.IGNORECASE)
        if match:
            adverbs, verb = match.group(1).lower(), match.group(2).lower()
            verb = _UNCHANGED_AFTER_I.get(verb, verb if verb in _UNCHANGED_AFTER_I.values() else _third_person_verb(verb))
            sentence = f"The user{adverbs} {verb}{sentence[match.end():]}"
    sentence = re.sub(r"\bmy\b", "the user's", sentence, flags=re.IGNORECASE)
    sentence = re.sub(r"\bme\b", "the user", sentence, flags=re.IGNORECASE)
    sentence = sentence[:1].upper() + sentence[1:]
    return sentence if sentence.endswith((".", "!", "?")) else sentence + "."


def remember_request(text: str) -> list[str]:
    """The memories a "Please remember that ..." message asks to keep, in the third person; [] for other text."""
    match = _REMEMBER.match(squeeze(text).strip())
    if not match:
        return []
    return [third_person(sentence) for sentence in sentences(match.group("rest"))]


# ---------------------------------------------------------------------------------------------------------------------
# The rules as data. Each dict is one form the offline model reads or answers; `example` is a text that shows it and
# `stores` (statements) or `answer` / `tool` (questions, requests) what the model makes of it. tests/test_offline_model.py
# runs every entry through a real Agent, so an entry whose example does not work fails the suite.

RULES: list[dict] = [
    # statements: where the text stands, the example, and the facts it stores
    {"kind": "statement", "form": "my X is Y", "where": "user message",
     "example": "My codename is VEGA.", "stores": {"codename": "VEGA"}},
    {"kind": "statement", "form": "the user's X is Y (summaries, memory entries)", "where": "user message",
     "example": "The user's plan is pro.", "stores": {"plan": "pro"}},
    {"kind": "statement", "form": "your X is Y (an assistant restating a fact)", "where": "user message",
     "example": "Your home city is Lima.", "stores": {"home city": "Lima"}},
    {"kind": "statement", "form": "X was Y, X are Y, X = Y", "where": "user message",
     "example": "My plan = team.", "stores": {"plan": "team"}},
    {"kind": "statement", "form": "a statement after a lead (please remember that, note:, FYI, by the way, ...)",
     "where": "user message", "example": "Please remember that my codename is VEGA.", "stores": {"codename": "VEGA"}},
    {"kind": "statement", "form": "a statement after a greeting", "where": "user message",
     "example": "Hi! FYI my name is Ada.", "stores": {"name": "Ada"}},
    {"kind": "statement", "form": "a statement in the system prompt", "where": "system prompt",
     "example": "Known facts: the user's codename is ORION.", "stores": {"codename": "ORION"}},
    {"kind": "statement", "form": "several clauses joined by and", "where": "user message",
     "example": "My name is Ada and my favorite number is 7.", "stores": {"name": "Ada", "favorite number": "7"}},
    {"kind": "statement", "form": "a later statement wins", "where": "user message",
     "example": "My codename is VEGA. Actually, my codename is ORION.", "stores": {"codename": "ORION"}},
    {"kind": "statement", "form": "British and American spellings are one key", "where": "user message",
     "example": "My favourite colour is teal.", "stores": {"favorite color": "teal"}},
    {"kind": "statement", "form": "a JSON object (nested keys count by their last name)", "where": "system prompt",
     "example": 'State manifest: {"codename": "ORION", "user": {"plan": "pro"}}',
     "stores": {"codename": "ORION", "plan": "pro"}},
    {"kind": "statement", "form": "several JSON objects in one text (the latest wins)", "where": "system prompt",
     "example": 'Manifest: {"codename": "ORION"}\nManifest: {"codename": "VEGA"}', "stores": {"codename": "VEGA"}},
    {"kind": "statement", "form": "a memory entry injected in a <memory> block", "where": "user message",
     "example": "<memory><entry>The user's deploy day is Tuesday.</entry></memory> Thanks.",
     "stores": {"deploy day": "Tuesday"}},
    # questions: asked after `given`, answered with `answer`
    {"kind": "question", "form": "What is my X? (or what's, which, who is, do you remember, tell me, remind me of)",
     "given": "My codename is VEGA.", "example": "Do you remember my codename?", "answer": "Your codename is VEGA."},
    {"kind": "question", "form": "several keys in one question", "given": "My name is Ada and my plan is pro.",
     "example": "What is my name and my plan?", "answer": "Your name is Ada and your plan is pro."},
    {"kind": "question", "form": "a question after a lead", "given": "My codename is VEGA.",
     "example": "Hi! By the way, what is my codename again?", "answer": "Your codename is VEGA."},
    {"kind": "question", "form": "a fact it cannot see", "given": "My name is Ada.",
     "example": "What is my codename?", "answer": "I cannot see your codename in this conversation."},
    {"kind": "question", "form": "a question states nothing (asking “Is my codename VEGA?” stores no codename)",
     "given": "Is my codename VEGA?",
     "example": "What is my codename?", "answer": "I cannot see your codename in this conversation."},
    {"kind": "question", "form": "What did I say about the X? (quotes the user's sentences that name X)",
     "given": "We moved the team standup to half past nine.", "example": "What did I say about the team standup?",
     "answer": 'You said: "We moved the team standup to half past nine."'},
    {"kind": "question", "form": "What did I say about the X, with no such sentence in sight",
     "given": "My name is Ada.", "example": "What did I say about the team standup?",
     "answer": "I cannot see anything you said about the team standup in this conversation."},
    # requests and tools
    {"kind": "request", "form": "Please summarize this conversation. (the SDK's summarizing manager)",
     "given": "My codename is VEGA.", "example": "Please summarize this conversation.",
     "answer": "## Conversation Summary\n* The user's codename is VEGA.\n* Messages summarized: 2."},
    {"kind": "request", "form": "Extract facts from the following transcript: (the SDK's memory extraction)",
     "example": "Extract facts from the following transcript:\n\nuser: My codename is VEGA.",
     "answer": '[{"content": "The user\'s codename is VEGA."}]'},
    {"kind": "request", "form": "<content> ... </content> (the summary request of context_manager=\"auto\")",
     "example": "<content> [user] My codename is VEGA. </content>",
     "blocks": ["<content>", "\n---\n[user]", "My codename is VEGA.", "</content>"],
     "answer": "## Conversation Summary\n* The user's codename is VEGA.\n* Messages summarized: 1."},
    {"kind": "tool", "form": "<context-status> shows 85% or more used while summarize_context is offered "
     "(context_manager=\"agentic\")",
     "example": "My codename is VEGA.", "tool": "summarize_context", "input": {},
     "context_manager": "agentic", "context_window_limit": 2500},
    {"kind": "tool", "form": "a question it cannot answer while search_memory is offered",
     "example": "What is my codename?", "tool": "search_memory", "input": {"query": "What is my codename?"}},
    {"kind": "tool", "form": "Please remember that I ... while add_memory is offered",
     "example": "Please remember that I prefer tea.", "tool": "add_memory",
     "input": {"entries": ["The user prefers tea."]}},
]
"""Every form the offline model reads or answers, with an example; docs/offline-model.md shows this list as a table."""


def _one_line(text: str) -> str:
    """A table cell on one line: line breaks shown as " / " (blank lines dropped), not as escapes."""
    return " / ".join(line.strip() for line in text.splitlines() if line.strip())


def rule_rows() -> list[dict[str, str]]:
    """RULES as table rows: kind, form, example and what the model makes of it."""
    rows = []
    for rule in RULES:
        if "stores" in rule:
            result = ", ".join(f"{key} = {value}" for key, value in rule["stores"].items())
        elif "tool" in rule:
            result = f"calls {rule['tool']} with {json.dumps(rule['input'])}"
        else:
            result = rule["answer"]
        example = rule["example"]
        if rule.get("where") == "system prompt":
            example = f"(system prompt) {example}"
        elif rule.get("given"):
            example = f"(after “{rule['given']}”) {example}"
        rows.append({"kind": rule["kind"], "form": rule["form"], "example": _one_line(example), "the model": _one_line(result)})
    return rows


def check_name(parameter: str, value: object) -> str:
    """A notebook parameter holding a name the offline model reads back whole from "My name is <value>."; stops with
    a ParameterError naming the parameter, the value and what is accepted (notebook 00's `user_name`)."""
    name = parameters.text(parameter, value, why="the name the agent is told")
    if statements(f"My name is {name}.") != [("name", name.strip())]:
        raise parameters.ParameterError(
            f"{parameter} must be a name the offline model reads back whole (no sentence end or ' and my ...' "
            f"inside); got {parameters.shown(value)}. Change it in the parameters cell (or papermill -p)."
        )
    return name
