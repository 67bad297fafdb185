"""The offline model's two voices: the same rules, worded two ways.

A check that leans on the offline model's exact phrasing ("I cannot see", "The user's ... is", a summary's title)
would fail on a real model while CI stays green. The `paraphrase` voice answers with the same facts, at the same
decision points, with the same tool calls, but in other words: preambles, restated questions, refusals in several
wordings (none with "cannot see"), summaries condensed and in another order under another title, extracted facts in
another form. Every notebook's checks are meant to hold on both voices.

A voice is data (:data:`VOICES`), like the reading rules in `companion.models.facts`, so its forms are listed and tested one
by one. Where a voice has several forms for one kind of reply, the form is chosen from the text being answered
(:func:`pick`), so the same call always gets the same reply: both voices are deterministic.

Facts are restated only in forms the offline model itself reads back ("your X is V", "the user's X = V"), because it
reads its own earlier replies and summaries as a real model does. Values are kept as the user wrote them.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["VOICES", "VOICE_ENV", "Voice", "pick", "resolve_voice"]

VOICE_ENV = "WORKBOOK_VOICE"


@dataclass(frozen=True)
class Voice:
    """The wordings of one voice; `{...}` fields are filled by the offline model."""

    answer: tuple[str, ...]          # {answers}: "your codename is ORION and your plan is pro"; {asked}: "your codename"
    missing: tuple[str, ...]         # {missing}: "your codename" / "your codename or your plan"
    statement: tuple[str, ...]       # {facts}: the facts a message stated
    noted: tuple[str, ...]           # a message that states no fact
    saved: tuple[str, ...]           # {entries}: what add_memory stored
    save_failed: tuple[str, ...]
    from_memory: tuple[str, ...]     # {entry}: the first memory entry offered, when no asked key matched
    nothing: tuple[str, ...]         # a question with no key the model can read
    quoted: tuple[str, ...]          # {quotes}: the user's sentences about a topic, each in double quotes
    unquoted: tuple[str, ...]        # {topic}: "the team standup", when no sentence names it
    no_message: str                  # a call with no user text at all
    summary_title: str               # the first line of a summary
    summary_fact: str                # {key}, {value}: one fact of a summary
    summary_none: str
    summary_count: str               # {count}: messages summarized
    summary_reversed: bool           # facts listed latest first (condensed and reordered)
    summary_joiner: str              # between the fact lines
    extracted: str                   # {key}, {value}: one extracted fact


VOICES: dict[str, Voice] = {
    "plain": Voice(
        answer=("{answers_sentence}",),
        missing=("I cannot see {missing} in this conversation.",),
        statement=("Noted: {facts}.",),
        noted=("Noted.",),
        saved=("Saved to memory: {entries}",),
        save_failed=("I could not save that to memory: the memory tool reported an error.",),
        from_memory=("From memory: {entry}",),
        nothing=("I cannot see anything about that in this conversation.",),
        quoted=("You said: {quotes}",),
        unquoted=("I cannot see anything you said about {topic} in this conversation.",),
        no_message="I cannot see a question or a statement to respond to.",
        summary_title="## Conversation Summary",
        summary_fact="* The user's {key} is {value}.",
        summary_none="* No facts about the user were stated.",
        summary_count="* Messages summarized: {count}.",
        summary_reversed=False,
        summary_joiner="\n",
        extracted="The user's {key} is {value}.",
    ),
    "paraphrase": Voice(
        answer=(
            "Sure! Based on what you've told me, {answers}.",
            "You asked about {asked}. From our conversation: {answers}.",
            "Let me check what you shared earlier... {answers}.",
            "Good question. As far as I can tell, {answers}.",
        ),
        missing=(
            "You haven't told me {missing} yet.",
            "I don't have {missing} anywhere in what you've shared with me.",
            "Nothing in our conversation so far gives me {missing}.",
            "Sorry, I don't know {missing}: it hasn't come up between us.",
        ),
        statement=(
            "Got it, I'll keep that in mind: {facts}.",
            "Thanks for letting me know. So {facts}.",
            "Understood! To confirm, {facts}.",
        ),
        noted=("Okay, understood.", "Sure, thanks.", "All right."),
        saved=("Done. I've stored this in your memories: {entries}",
               "I added that to memory for next time: {entries}"),
        save_failed=("Something went wrong while storing that; the memory tool returned an error.",),
        from_memory=("Here's what your stored memories say: {entry}", "Your memories mention this: {entry}"),
        nothing=("I don't have anything on that in our conversation.",
                 "That hasn't come up between us, so I have nothing to go on."),
        quoted=("Here is what you told me: {quotes}", "Earlier you mentioned it: {quotes}"),
        unquoted=("You haven't mentioned {topic} to me.", "Nothing you've shared so far is about {topic}."),
        no_message="There is no question or statement here for me to answer.",
        summary_title="Recap of the earlier conversation",
        summary_fact="the user's {key} = {value}",
        summary_none="(no facts about the user came up)",
        summary_count="({count} earlier messages condensed)",
        summary_reversed=True,
        summary_joiner="; ",
        extracted="User's {key} = {value}",
    ),
}


def resolve_voice(voice: str | None = None) -> str:
    """The voice to use: the argument, else $WORKBOOK_VOICE, else "plain"."""
    name = (voice or os.environ.get(VOICE_ENV) or "plain").strip().lower()
    if name not in VOICES:
        raise ValueError(f"Unknown voice {name!r}. Choose one of: {', '.join(VOICES)}.")
    return name


def pick(forms: Sequence[str], text: str) -> str:
    """One of `forms`, chosen by a checksum of `text`: the same text always gets the same form."""
    return forms[zlib.crc32(text.encode("utf-8", "surrogatepass")) % len(forms)]
