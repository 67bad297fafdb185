"""The offline model's two voices (companion/models/voices.py): the same rules and decisions, other words. Each form is
checked on its own; the paraphrase voice never says "cannot see", keeps values as written, and the model reads its own
paraphrased summaries and extracted facts back."""

from __future__ import annotations

import json
import string

import pytest
from strands import Agent

from companion.models import facts
from companion.models.backends import make_model
from companion.models.offline_model import OfflineModel
from companion.models.voices import VOICES, pick, resolve_voice
from conftest import assistant, user

PROMPTS = ["My codename is ORION and my plan is pro.", "What is my codename?", "What is my favourite colour?",
           "Hello there.", "What is my plan and my shoe size?"]


def fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


@pytest.mark.parametrize("name", sorted(VOICES))
def test_every_form_fills_with_the_fields_the_model_gives(name):
    voice = VOICES[name]
    allowed = {"answer": {"answers_sentence", "answers", "asked"}, "missing": {"missing"}, "statement": {"facts"},
               "saved": {"entries"}, "from_memory": {"entry"}, "noted": set(), "save_failed": set(), "nothing": set(),
               "quoted": {"quotes"}, "unquoted": {"topic"}}
    for kind, names in allowed.items():
        forms = getattr(voice, kind)
        assert forms and all(fields(form) <= names for form in forms), kind
    assert fields(voice.summary_fact) == {"key", "value"} and fields(voice.extracted) == {"key", "value"}


def test_paraphrase_never_says_cannot_see_and_differs_from_plain():
    voice = VOICES["paraphrase"]
    every = [*voice.answer, *voice.missing, *voice.statement, *voice.noted, *voice.saved, *voice.save_failed,
             *voice.from_memory, *voice.nothing, *voice.quoted, *voice.unquoted, voice.no_message, voice.summary_title]
    assert not any("cannot see" in form.lower() for form in every)
    plain, para = Agent(model=OfflineModel(voice="plain"), callback_handler=None), Agent(
        model=OfflineModel(voice="paraphrase"), callback_handler=None)
    replies = [(str(plain(p)).strip(), str(para(p)).strip()) for p in PROMPTS]
    assert all(a != b for a, b in replies), replies
    assert "ORION" in replies[1][1], "values are kept as the user wrote them"
    assert "shoe size" in replies[4][1] and "pro" in replies[4][1]


def test_same_input_same_output():
    first = [str(Agent(model=OfflineModel(voice="paraphrase"), callback_handler=None)(p)) for p in PROMPTS]
    again = [str(Agent(model=OfflineModel(voice="paraphrase"), callback_handler=None)(p)) for p in PROMPTS]
    assert first == again
    assert pick(("a", "b", "c"), "same text") == pick(("a", "b", "c"), "same text")


def test_the_model_reads_its_own_paraphrased_summary_and_extraction():
    model = OfflineModel(voice="paraphrase")
    summary = model._summary(["My codename is ORION.", "My plan is pro.", "Noted."])
    assert summary.splitlines()[0] == VOICES["paraphrase"].summary_title
    assert summary.index("plan") < summary.index("codename"), "condensed and reordered: latest first"
    assert facts.latest_facts([summary]) == {"codename": "ORION", "plan": "pro"}
    extracted = json.loads(model._extraction("user: My codename is ORION.\nassistant: ok"))
    assert extracted == [{"content": "User's codename = ORION"}]
    assert facts.latest_facts([extracted[0]["content"]]) == {"codename": "ORION"}
    reply = model.respond([user(summary), assistant("Okay."), user("What is my codename?")])
    assert "ORION" in reply["text"]


def test_the_same_decisions_and_tool_calls_in_both_voices():
    offered = ["search_memory", "add_memory"]
    for messages in ([user("What is my codename?")], [user("Please remember that I never deploy on Fridays.")]):
        plain = OfflineModel(voice="plain").respond(messages, None, offered)
        para = OfflineModel(voice="paraphrase").respond(messages, None, offered)
        assert "tool" in plain and plain == para


def test_the_voice_comes_from_the_argument_or_the_environment(monkeypatch):
    assert resolve_voice(None) == "plain"
    monkeypatch.setenv("WORKBOOK_VOICE", "paraphrase")
    assert OfflineModel().get_config()["voice"] == "paraphrase"
    assert make_model("offline").get_config()["voice"] == "paraphrase"
    assert make_model("offline", voice="plain").get_config()["voice"] == "plain"
    with pytest.raises(ValueError, match="Unknown voice 'pirate'"):
        OfflineModel(voice="pirate")


def test_longer_replies_cost_more_tokens():
    plain, para = Agent(model=OfflineModel(voice="plain"), callback_handler=None), Agent(
        model=OfflineModel(voice="paraphrase"), callback_handler=None)
    for prompt in PROMPTS[:2]:
        plain(prompt), para(prompt)
    assert para.event_loop_metrics.accumulated_usage["outputTokens"] > plain.event_loop_metrics.accumulated_usage[
        "outputTokens"]
