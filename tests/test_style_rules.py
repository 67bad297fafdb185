"""The offline model's style instructions (companion/models/style_rules.py): every rule of the table does what its
row says, in both voices, through a real Agent, and only when the system prompt carries its instruction."""

from __future__ import annotations

import json

import pytest
from strands import Agent
from strands.agent.conversation_manager.summarizing_conversation_manager import DEFAULT_SUMMARIZATION_PROMPT

from companion import OfflineModel
from companion.memory.write_policy import DATA_PREAMBLE
from companion.models.style_rules import STYLE_RULES, active_rules, apply_style, rule_rows

IDS = [rule["id"] for rule in STYLE_RULES]
VOICES = ["plain", "paraphrase"]


def user(text: str) -> dict:
    return {"role": "user", "content": [{"text": text}]}


@pytest.mark.parametrize("rule", STYLE_RULES, ids=IDS)
def test_plain_voice_gives_the_rows_replies_without_and_with_the_instruction(rule):
    model = OfflineModel(voice="plain")
    assert model.respond([user(rule["example"])])["text"] == rule["before"]
    assert model.respond([user(rule["example"])], rule["instruction"])["text"] == rule["after"]


@pytest.mark.parametrize("voice", VOICES)
@pytest.mark.parametrize("rule", STYLE_RULES, ids=IDS)
def test_both_voices_follow_every_instruction_through_an_agent(rule, voice):
    plain = Agent(model=OfflineModel(voice=voice), callback_handler=None)
    styled = Agent(model=OfflineModel(voice=voice), system_prompt=f"You help.\n- {rule['instruction']}",
                   callback_handler=None)
    before, after = str(plain(rule["example"])).strip(), str(styled(rule["example"])).strip()
    assert rule["shows"] not in before
    assert rule["shows"] in after
    if rule["gone"]:
        assert rule["gone"] in before and rule["gone"] not in after


@pytest.mark.parametrize("rule", STYLE_RULES, ids=IDS)
def test_each_instruction_activates_its_own_rule_only(rule):
    assert [r["id"] for r in active_rules(rule["instruction"])] == [rule["id"]]


@pytest.mark.parametrize("prompt", [
    None, "", "You are a concise assistant.", "You are a pirate.", "A check.", "Another prompt.",
    "Summarize the conversation.", DEFAULT_SUMMARIZATION_PROMPT, DATA_PREAMBLE,
    "You are a helpful assistant. Known facts are listed in the manifest below.",
])
def test_prompts_the_other_notebooks_use_activate_no_rule(prompt):
    assert active_rules(prompt) == []
    assert apply_style("Your cable length is 30 feet at 3 pm on 5 March 2026.", prompt) == (
        "Your cable length is 30 feet at 3 pm on 5 March 2026.")


def test_every_notebooks_system_prompt_literal_activates_no_rule():
    """The system prompts written in the other notebooks' code, read from the committed files."""
    import re
    from pathlib import Path

    found = []
    for path in sorted(Path(__file__).resolve().parent.parent.joinpath("notebooks").glob("[01][0-9]_*.ipynb")):
        if path.name.startswith("12_"):
            continue
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"])
            found += re.findall(r"(?:system_prompt|base_prompt)\s*=\s*\(?\s*\"([^\"]+)\"", source)
    assert found, "the notebooks' prompts were read"
    assert [p for p in found if active_rules(p)] == []


@pytest.mark.parametrize("voice", VOICES)
def test_rules_combine_in_table_order(voice):
    prompt = "\n".join(rule["instruction"] for rule in STYLE_RULES)
    said = ("My ticket number is OPS-7002 and my cable length is 15 feet and my install time is 11 am "
            "and my renewal date is March 5, 2026. What is my cable length and my install time and my renewal date?")
    reply = OfflineModel(voice=voice).respond([user(said)], prompt)["text"]
    for shown in ("4.6 m", "11:00", "2026-03-05", "OPS-7002"):
        assert shown in reply
    for gone in ("feet", "11 am", "March 5"):
        assert gone not in reply


def test_ticket_rule_says_so_when_no_ticket_number_is_in_sight():
    reply = OfflineModel().respond([user("My cable length is 30 feet. What is my cable length?")],
                                   "Always include the ticket number.")["text"]
    assert reply == "No ticket number given. Your cable length is 30 feet."


def test_ticket_rule_leaves_a_reply_that_already_names_the_ticket():
    reply = OfflineModel().respond([user("My ticket number is OPS-1. What is my ticket number?")],
                                   "Always include the ticket number.")["text"]
    assert reply == "Your ticket number is OPS-1."


def test_summaries_extractions_and_tool_calls_are_not_styled():
    model = OfflineModel()
    prompt = "\n".join(rule["instruction"] for rule in STYLE_RULES)
    messages = [user("My cable length is 30 feet."), {"role": "assistant", "content": [{"text": "Noted."}]},
                user("Please summarize this conversation.")]
    assert model.respond(messages, prompt) == model.respond(messages)
    extraction = [user("Extract facts from the following transcript:\n\nuser: My cable length is 30 feet.")]
    assert model.respond(extraction, prompt) == model.respond(extraction)
    assert json.loads(model.respond(extraction, prompt)["text"])
    question = [user("What is my cable length?")]
    assert model.respond(question, prompt, ["search_memory"]) == {
        "tool": "search_memory", "input": {"query": "What is my cable length?"}}


@pytest.mark.parametrize("text, metric", [
    ("5 miles", "8 km"), ("68°F", "20 °C"), ("10 lbs", "4.5 kg"), ("1,200 feet", "365.8 m"), ("12 ft.", "3.7 m."),
    ("20 mph", "32.2 km/h"), ("2 gallons", "7.6 L"), ("6 inches", "15.2 cm"), ("in 5 minutes", "in 5 minutes"),
])
def test_metric_conversions(text, metric):
    assert apply_style(text, "Answer in metric units.") == metric


@pytest.mark.parametrize("text, clock", [
    ("3 pm.", "15:00."), ("at 3 p.m. today", "at 15:00 today"), ("9:30 a.m. Then", "09:30. Then"),
    ("12 am", "00:00"), ("12pm, ok", "12:00, ok"), ("11 PM", "23:00"),
])
def test_twenty_four_hour_conversions(text, clock):
    assert apply_style(text, "Use 24-hour time.") == clock


def test_rule_rows_list_every_rule_with_its_instruction():
    rows = rule_rows()
    assert [r["rule"] for r in rows] == IDS
    assert all(r["instruction"] and r["does"] and r["with it"] != r["reply without it"] for r in rows)
