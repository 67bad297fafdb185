"""The offline model's rules, driven through the SDK's own Agent, managers and memory tools."""

from __future__ import annotations

import asyncio
import socket

import pytest
from pydantic import BaseModel
from strands import Agent
from strands.agent.conversation_manager import SlidingWindowConversationManager, SummarizingConversationManager
from strands.memory import MemoryManager
from strands.models.model import _estimate_tokens_with_heuristic
from strands.types.exceptions import ContextWindowOverflowException
from strands.vended_memory_stores.test_memory_store import TestMemoryStore

from companion.models.backends import NOVA_PRO_CONTEXT_WINDOW
from companion.models.offline_model import OfflineModel
from conftest import assistant, user


def ask(agent: Agent, prompt: str) -> str:
    return str(agent(prompt)).strip()


def test_recalls_name_and_number_from_the_conversation():
    agent = Agent(model=OfflineModel(), callback_handler=None)
    ask(agent, "My name is Pin and my favorite number is 42.")
    assert ask(agent, "What is my name and my favorite number?") == "Your name is Pin and your favorite number is 42."


def test_a_later_statement_wins():
    agent = Agent(model=OfflineModel(), callback_handler=None)
    ask(agent, "My favorite number is 42.")
    ask(agent, "Actually, my favorite number is 7.")
    assert ask(agent, "What is my favorite number?") == "Your favorite number is 7."


def test_says_plainly_what_it_cannot_see_and_never_guesses():
    agent = Agent(model=OfflineModel(), callback_handler=None)
    ask(agent, "My name is Pin.")
    answer = ask(agent, "What is my name and my codename?")
    assert answer == "Your name is Pin. I cannot see your codename in this conversation."
    fresh = Agent(model=OfflineModel(), callback_handler=None)
    assert ask(fresh, "What is my name?") == "I cannot see your name in this conversation."


def test_is_deterministic():
    replies = []
    for _ in range(2):
        agent = Agent(model=OfflineModel(), callback_handler=None)
        replies.append([ask(agent, p) for p in ["My codename is ORION.", "Rain is wet.", "What is my codename?"]])
    assert replies[0] == replies[1]


def test_reads_system_prompt_json_manifest_and_spelling_variants():
    model = OfflineModel()
    manifest = 'You are concise.\n<manifest>\n{"codename": "ORION", "user": {"plan": "pro"}}\n</manifest>'
    reply = model.respond([user("What is my codename and my plan?")], system_prompt=manifest)
    assert reply == {"text": "Your codename is ORION and your plan is pro."}
    assert model.respond([user("My favourite colour is teal."), user("What is my favorite color?")]) == {
        "text": "Your favorite color is teal."
    }


def test_does_not_match_a_vague_key_to_a_specific_fact():
    model = OfflineModel()
    reply = model.respond([user("My favorite number is 42."), user("What is my number?")])
    assert reply == {"text": "I cannot see your number in this conversation."}


def test_forgets_what_leaves_the_sliding_window():
    agent = Agent(
        model=OfflineModel(), callback_handler=None, conversation_manager=SlidingWindowConversationManager(window_size=4)
    )
    ask(agent, "My codename is ORION.")
    ask(agent, "The weather is mild.")
    assert ask(agent, "What is my codename?") == "Your codename is ORION."  # trimmed only after this turn
    ask(agent, "Tea is hot.")
    ask(agent, "Rain is wet.")  # the window now holds only the last two turns
    assert ask(agent, "What is my codename?") == "I cannot see your codename in this conversation."


def test_summary_keeps_the_facts_of_the_summarized_messages():
    manager = SummarizingConversationManager(
        summary_ratio=0.3, preserve_recent_messages=2, proactive_compression={"compression_threshold": 0.00005}
    )
    agent = Agent(model=OfflineModel(), callback_handler=None, conversation_manager=manager)
    for prompt in ["My codename is ORION.", "The weather is mild.", "Tea is hot.", "Trains are fast."]:
        ask(agent, prompt)
    summary = agent.messages[0]
    assert summary["role"] == "user"
    assert summary["content"][0]["text"].startswith("## Conversation Summary")
    assert "The user's codename is ORION." in summary["content"][0]["text"]
    assert not any("My codename is ORION." in str(m) for m in agent.messages)
    assert ask(agent, "What is my codename?") == "Your codename is ORION."


def test_summary_of_messages_without_the_fact_does_not_invent_it():
    model = OfflineModel()
    text = model.respond([user("Tea is hot."), assistant("Noted."), user("Please summarize this conversation.")])["text"]
    assert "codename" not in text and "No facts about the user were stated." in text


def test_calls_the_memory_search_tool_then_answers_from_its_result(tmp_path):
    store = TestMemoryStore(name="notes", path=str(tmp_path / "memory.json"), writable=True)
    asyncio.run(store.add("The user's codename is ORION."))
    manager = MemoryManager(stores=[store], search_tool_config=True, injection=False)
    agent = Agent(model=OfflineModel(), callback_handler=None, memory_manager=manager)
    assert ask(agent, "What is my codename?") == "Your codename is ORION."
    tool_use = agent.messages[1]["content"][0]["toolUse"]
    assert tool_use["name"] == "search_memory" and tool_use["input"] == {"query": "What is my codename?"}
    assert "toolResult" in agent.messages[2]["content"][0]


def test_searches_once_and_admits_a_miss(tmp_path):
    store = TestMemoryStore(name="notes", path=str(tmp_path / "memory.json"), writable=True)
    manager = MemoryManager(stores=[store], search_tool_config=True, injection=False)
    agent = Agent(model=OfflineModel(), callback_handler=None, memory_manager=manager)
    assert ask(agent, "What is my codename?") == "I cannot see your codename in this conversation."
    assert len(agent.messages) == 4  # question, one tool call, its result, the answer


def test_answers_from_an_injected_memory_block(tmp_path):
    store = TestMemoryStore(name="notes", path=str(tmp_path / "memory.json"), writable=True)
    asyncio.run(store.add("The user prefers deployments to happen on Tuesday mornings."))
    manager = MemoryManager(stores=[store], search_tool_config=False, injection=True)
    agent = Agent(model=OfflineModel(), callback_handler=None, memory_manager=manager)
    answer = ask(agent, "When do deployments happen?")
    assert answer == "From memory: The user prefers deployments to happen on Tuesday mornings."


def test_reports_usage_by_the_sdk_estimate():
    agent = Agent(model=OfflineModel(), callback_handler=None, system_prompt="Be brief.")
    result = agent("My name is Pin.")
    usage = result.metrics.latest_agent_invocation.usage
    expected_input = _estimate_tokens_with_heuristic([user("My name is Pin.")], None, "Be brief.")
    assert usage["inputTokens"] == expected_input
    assert usage["outputTokens"] == -(-len("Noted: your name is Pin.") // 4)
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
    assert agent.messages[-1]["metadata"]["usage"] == usage


def test_context_window_default_and_configurable():
    assert OfflineModel().context_window_limit == NOVA_PRO_CONTEXT_WINDOW == 300_000
    model = OfflineModel(context_window_limit=1_000)
    assert model.context_window_limit == 1_000
    assert model.estimate_utilization(15) == pytest.approx(0.015)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"context_window_limit": 0}, "context_window_limit"),
        ({"overflow_at_tokens": -5}, "overflow_at_tokens"),
        ({"temperature": 0.2}, "has no setting"),
    ],
)
def test_bad_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        OfflineModel(**settings)


def test_raises_context_overflow_above_the_configured_size():
    model = OfflineModel(overflow_at_tokens=10)

    async def call(text):
        return [event async for event in model.stream([user(text)])]

    asyncio.run(call("Hi."))
    with pytest.raises(ContextWindowOverflowException, match="overflow_at_tokens=10"):
        asyncio.run(call("This sentence is long enough to pass ten estimated tokens on its own."))


def test_reactive_summary_after_an_overflow():
    model = OfflineModel()
    manager = SummarizingConversationManager(
        summary_ratio=0.5, preserve_recent_messages=2, summarization_system_prompt="Summarize."
    )
    agent = Agent(model=model, callback_handler=None, conversation_manager=manager)
    filler = "The committee discussed the quarterly schedule at length and agreed to revisit it later. " * 2
    ask(agent, "My codename is ORION. " + filler)
    for _ in range(3):
        ask(agent, filler)
    assert manager.removed_message_count == 0
    model.update_config(overflow_at_tokens=150)  # the next call (about 213 tokens) overflows
    assert ask(agent, "What is my codename?") == "Your codename is ORION."
    assert manager.removed_message_count == 4
    assert agent.messages[0]["role"] == "user"
    assert "The user's codename is ORION." in agent.messages[0]["content"][0]["text"]


def test_insufficient_messages_to_summarize_is_the_sdk_error():
    model = OfflineModel(overflow_at_tokens=5)
    agent = Agent(
        model=model,
        callback_handler=None,
        conversation_manager=SummarizingConversationManager(preserve_recent_messages=2),
    )
    with pytest.raises(ContextWindowOverflowException, match="insufficient messages for summarization"):
        agent("My codename is ORION and this message alone is over the limit.")


def test_structured_output_fills_fields_it_can_see_and_refuses_others():
    class Profile(BaseModel):
        name: str
        favorite_number: str

    model = OfflineModel()
    agent = Agent(model=model, callback_handler=None)
    ask(agent, "My name is Pin and my favorite number is 42.")

    async def collect(messages):
        return [event async for event in model.structured_output(Profile, messages)]

    events = asyncio.run(collect(agent.messages))
    assert events[-1]["output"] == Profile(name="Pin", favorite_number="42")
    with pytest.raises(ValueError, match="cannot see name, favorite_number"):
        asyncio.run(collect([user("Hello.")]))


def test_never_opens_a_network_connection(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the offline model tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    agent = Agent(model=OfflineModel(), callback_handler=None)
    ask(agent, "My name is Pin.")
    assert ask(agent, "What is my name?") == "Your name is Pin."


def test_latency_is_reported_as_zero_so_message_files_do_not_depend_on_load():
    agent = Agent(model=OfflineModel(), callback_handler=None)
    agent("My name is Pin.")
    assert agent.messages[-1]["metadata"]["metrics"]["latencyMs"] == 0


def test_remember_requests_become_third_person_memories():
    from companion.models.facts import remember_request, third_person

    assert third_person("I prefer deployments on Tuesday mornings.") == "The user prefers deployments on Tuesday mornings."
    assert third_person("I'm allergic to peanuts") == "The user is allergic to peanuts."
    assert third_person("I fly kites with my daughter.") == "The user flies kites with the user's daughter."
    assert remember_request("Please remember that I watch films on Fridays.") == ["The user watches films on Fridays."]
    assert remember_request("My codename is ORION. Please remember it.") == []
    model = OfflineModel()
    call = model.respond([user("Please remember that I dislike meetings before 10am.")], tool_names=["add_memory"])
    assert call == {"tool": "add_memory", "input": {"entries": ["The user dislikes meetings before 10am."]}}
    assert model.respond([user("Please remember that I dislike meetings.")]) == {"text": "Noted."}, "no tool, no call"


def test_answers_the_sdk_extraction_request():
    import json

    request = (
        "Extract facts from the following transcript:\n\n"
        "user: My codename is ORION and my home city is Lima.\n"
        "assistant: Noted: your codename is ORION.\n"
        "user: Please remember that I prefer tea."
    )
    reply = OfflineModel().respond([user(request)], system_prompt="You extract durable facts.")
    assert json.loads(reply["text"]) == [
        {"content": "The user's codename is ORION."},
        {"content": "The user's home city is Lima."},
        {"content": "The user prefers tea."},
    ]


def test_a_failed_memory_write_is_not_reported_as_saved():
    request = user("Please remember that I prefer tea.")
    call = {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "add_memory", "input": {}}}]}
    failed = {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "status": "error", "content": [{"text": "disk full"}]}}]}
    reply = OfflineModel().respond([request, call, failed], tool_names=["add_memory"])
    assert reply == {"text": "I could not save that to memory: the memory tool reported an error."}


# ---------------------------------------------------------------------------------------------------------------------
# Issue 7: statements wherever they stand, several JSON objects, linear time; issue 8: messages module, one rule a method


def test_reads_a_statement_after_please_remember_that_when_no_memory_tool_is_offered():
    agent = Agent(model=OfflineModel(), callback_handler=None)
    assert ask(agent, "Please remember that my codename is VEGA.") == "Noted: your codename is VEGA."
    assert ask(agent, "What is my codename?") == "Your codename is VEGA."


def test_please_remember_that_still_calls_add_memory_when_it_is_offered(tmp_path):
    store = TestMemoryStore(name="notes", path=str(tmp_path / "memory.json"), writable=True)
    manager = MemoryManager(stores=[store], search_tool_config=False, add_tool_config=True, injection=False)
    agent = Agent(model=OfflineModel(), callback_handler=None, memory_manager=manager)
    reply = ask(agent, "Please remember that my codename is VEGA.")
    tool_use = agent.messages[1]["content"][0]["toolUse"]
    assert tool_use["name"] == "add_memory" and tool_use["input"] == {"entries": ["The user's codename is VEGA."]}
    assert reply == "Saved to memory: The user's codename is VEGA."


def test_reads_known_facts_in_the_system_prompt():
    agent = Agent(model=OfflineModel(), callback_handler=None, system_prompt="Known facts: the user's codename is ORION.")
    assert ask(agent, "What is my codename?") == "Your codename is ORION."


@pytest.mark.parametrize(
    "statement",
    [
        "Note: my codename is VEGA.",
        "FYI my codename is VEGA.",
        "Hi! My codename is VEGA.",
        "Hello, by the way my codename is VEGA, nice to meet you.",
        "I think my codename is VEGA.",
        "Ok so, the user's codename = VEGA.",
        "My name is Ada and my codename is VEGA.",
    ],
)
def test_reads_a_statement_wherever_it_stands_in_a_clause(statement):
    agent = Agent(model=OfflineModel(), callback_handler=None)
    ask(agent, statement)
    assert ask(agent, "What is my codename?").startswith("Your codename is VEGA")


@pytest.mark.parametrize(
    "question", ["what is my codename?", "Is my codename VEGA?", "Hi! Do you know if my codename is VEGA?"]
)
def test_a_question_states_nothing(question):
    from companion.models.facts import statements

    assert statements(question) == []
    agent = Agent(model=OfflineModel(), callback_handler=None)
    ask(agent, question)
    assert ask(agent, "What is my codename?") == "I cannot see your codename in this conversation."


def test_statements_next_to_a_question_are_still_read():
    from companion.models.facts import statements

    assert statements("My codename is VEGA. What is my plan? My plan is pro.") == [("codename", "VEGA"), ("plan", "pro")]


def test_every_json_object_in_a_text_is_read_and_the_latest_wins():
    manifest = 'You are concise.\n<manifest>{"codename": "ORION", "plan": "free"}</manifest>'
    system_prompt = manifest + '\n<manifest>{"codename": "VEGA"}</manifest> {not json} {"user": {"city": "Lima"}}'
    agent = Agent(model=OfflineModel(), callback_handler=None, system_prompt=system_prompt)
    assert ask(agent, "What is my codename, my plan and my city?") == (
        "Your codename is VEGA, your plan is free and your city is Lima."
    )


def test_a_message_with_a_long_whitespace_run_is_answered():
    """Quadratic before issue 7 (200k spaces never returned); the alarm fails the test instead of hanging CI."""
    import signal

    def too_slow(signum, frame):
        raise TimeoutError("the offline model took over 20 s on a 200k-space message")

    previous = signal.signal(signal.SIGALRM, too_slow)
    signal.alarm(20)
    try:
        agent = Agent(model=OfflineModel(), callback_handler=None)
        assert ask(agent, "My name is" + " " * 200_000 + "Pin.") == "Noted: your name is Pin."
        assert ask(agent, "What is" + " " * 200_000 + "my name?") == "Your name is Pin."
        model = OfflineModel()
        for text in ["{" * 200_000, '{"a":' * 40_000, "<entry>" * 30_000, "my " * 70_000, "." * 200_000 + "?"]:
            assert model.respond([user(text)])["text"]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_message_helpers_live_in_the_messages_module():
    from companion.models import offline_model
    from companion.support import messages

    assert offline_model.message_text is messages.message_text
    assert offline_model.is_summary_request is messages.is_summary_request
    assert offline_model.SUMMARY_TITLE == messages.SUMMARY_TITLE == "## Conversation Summary"
    assert offline_model.SUMMARY_REQUEST == messages.SUMMARY_REQUEST == "Please summarize this conversation."
    assert messages.is_summary(user("## Conversation Summary\n* The user's codename is ORION."))
    assert not messages.is_summary(assistant("## Conversation Summary"))
    assert messages.is_summary_request([user("Tea."), user("Please summarize this conversation.")])
    tool_result = {"role": "user", "content": [{"toolResult": {"content": [{"text": "x"}, {"json": {"a": 1}}]}}, {"text": "y"}]}
    assert messages.message_text(tool_result) == 'x {"a": 1} y'


def test_each_rule_is_one_method_with_a_docstring_stating_it():
    rules = ["_summary_rule", "_extraction_rule", "_remember_rule", "_statement_rule", "_question_rule"]
    for number, name in enumerate(rules, start=1):
        doc = getattr(OfflineModel, name).__doc__
        assert doc and doc.startswith(f"Rule {number}:"), name


def _rule_agent(rule, tmp_path):
    if rule.get("context_manager"):
        model = OfflineModel(context_window_limit=rule["context_window_limit"])
        return Agent(model=model, callback_handler=None, context_manager=rule["context_manager"])
    if rule["kind"] == "tool":
        store = TestMemoryStore(name="notes", path=str(tmp_path / "memory.json"), writable=True)
        add = rule["tool"] == "add_memory"
        manager = MemoryManager(stores=[store], search_tool_config=not add, add_tool_config=add, injection=False)
        return Agent(model=OfflineModel(), callback_handler=None, memory_manager=manager)
    system_prompt = rule["example"] if rule.get("where") == "system prompt" else None
    return Agent(model=OfflineModel(), callback_handler=None, system_prompt=system_prompt)


def _rule_ids():
    from companion.models.facts import RULES

    return [f"{rule['kind']}: {rule['form'][:50]}" for rule in RULES]


def _rules():
    from companion.models.facts import RULES

    return RULES


@pytest.mark.parametrize("rule", _rules(), ids=_rule_ids())
def test_every_listed_rule_works_through_an_agent(rule, tmp_path):
    """facts.RULES is what notebook 00 shows; a rule added there without a working example fails here."""
    assert rule["kind"] in {"statement", "question", "request", "tool"} and rule["form"] and rule["example"]
    agent = _rule_agent(rule, tmp_path)
    if rule["kind"] == "statement":
        fresh = _rule_agent({**rule, "where": "user message"}, tmp_path)
        if rule.get("where") != "system prompt":
            ask(agent, rule["example"])
        for key, value in rule["stores"].items():
            assert ask(agent, f"What is my {key}?") == f"Your {key} is {value}."
            assert ask(fresh, f"What is my {key}?") == f"I cannot see your {key} in this conversation."
    elif rule["kind"] in {"question", "request"}:
        if rule.get("given"):
            ask(agent, rule["given"])
        prompt = [{"text": text} for text in rule["blocks"]] if rule.get("blocks") else rule["example"]
        assert ask(agent, prompt) == rule["answer"]
    else:
        agent(rule["example"])
        tool_use = agent.messages[1]["content"][0]["toolUse"]
        assert tool_use["name"] == rule["tool"] and tool_use["input"] == rule["input"]


def test_rules_table_rows_cover_every_rule():
    from companion.models.facts import RULES, rule_rows

    rows = rule_rows()
    assert len(rows) == len(RULES) and all(set(row) == {"kind", "form", "example", "the model"} for row in rows)
    assert {rule["kind"] for rule in RULES} == {"statement", "question", "request", "tool"}


@pytest.mark.parametrize(
    "first_person, stored",
    [
        ("I never deploy on Fridays.", "The user never deploys on Fridays."),
        ("I was born in Lima.", "The user was born in Lima."),
        ("I moved the team to Go.", "The user moved the team to Go."),
        ("I also use Go.", "The user also uses Go."),
        ("I can swim.", "The user can swim."),
        ("I need coffee.", "The user needs coffee."),
        ("I went home early.", "The user went home early."),
    ],
)
def test_third_person_keeps_adverbs_modals_and_past_forms(first_person, stored):
    from companion.models.facts import third_person

    assert third_person(first_person) == stored


def test_what_did_i_say_quotes_the_users_sentences_summaries_included_and_nothing_else():
    """Rule 4b reads user text only (a summary is user text: the model cannot tell it from what the user wrote);
    a question naming the topic is not quoted, nor is the assistant's or a tool's text."""
    from conftest import assistant, user

    model = OfflineModel()
    question = "What did I say about the team standup?"
    said = [user("We moved the team standup to half past nine. The chairs arrived."), assistant("Noted.")]
    assert model.respond([*said, user(question)]) == {
        "text": 'You said: "We moved the team standup to half past nine."'}
    summary = [user("## Conversation Summary\n* The team standup is at half past nine."), assistant("Okay.")]
    assert model.respond([*summary, user(question)])["text"] == 'You said: "The team standup is at half past nine."'
    elsewhere = [user("Is the team standup late?"), assistant("The team standup moved to ten."), user(question)]
    assert model.respond(elsewhere)["text"] == (
        "I cannot see anything you said about the team standup in this conversation.")
    assert model.respond([user("My plan is pro."), assistant("Noted."), user("What did I say about my plan?")])[
        "text"] == 'You said: "My plan is pro."'
    assert model.respond([*said, user("What is the team standup?")])["text"] != model.respond(
        [*said, user(question)])["text"], "only the 'What did I say about' form quotes"
