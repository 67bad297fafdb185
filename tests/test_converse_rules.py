"""What Bedrock's Converse API refuses, as data (companion/models/converse_rules.py): each rule on its own example, with
Bedrock's own message; valid conversations (tool pairs included) pass every rule."""

from __future__ import annotations

import pytest

from companion.models.converse_rules import RULES, ConverseValidationError, check_request, rule_rows, violations
from conftest import assistant, user

USE = {"role": "assistant", "content": [{"toolUse": {"toolUseId": "tooluse_1", "name": "search_memory",
                                                     "input": {"query": "codename"}}}]}
RESULT = {"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_1", "status": "success",
                                                      "content": [{"text": "[]"}]}}]}


@pytest.mark.parametrize("rule", RULES, ids=[r["id"] for r in RULES])
def test_each_rule_refuses_its_own_example_and_only_for_its_reason(rule):
    found = violations(rule["example"])
    assert found and found[0][0] == rule["id"], found
    with pytest.raises(ConverseValidationError) as raised:
        check_request(rule["example"])
    assert raised.value.rule == rule["id"]


def test_bedrocks_messages_with_positions():
    texts = {row["rule"]: row["Bedrock says"] for row in rule_rows()}
    assert texts["tool-use-answered"] == "Expected toolResult blocks at messages.2.content for the following Ids: tooluse_1"
    assert texts["tool-result-matched"] == ("The number of toolResult blocks at messages.2.content exceeds the number of "
                                            "toolUse blocks of previous turn.")
    assert texts["blank-text"].startswith("The text field in the ContentBlock object at messages.0.content.0 is blank.")
    assert texts["alternating-roles"].startswith("A conversation must alternate between user and assistant roles.")
    assert texts["first-user"].startswith("A conversation must start with a user message.")


def test_valid_conversations_pass():
    assert violations([user("Hi."), assistant("Hello."), user("Bye?")]) == []
    assert violations([user("What is my codename?"), USE, RESULT, assistant("I cannot see it.")]) == []
    check_request([user("Only one message.")])


def test_a_crash_between_tool_use_and_result_is_refused_on_the_next_call():
    crashed = [user("What is my codename?"), USE, user("Are you there?")]
    assert violations(crashed)[0] == (
        "tool-use-answered", "Expected toolResult blocks at messages.2.content for the following Ids: tooluse_1")


def test_a_result_for_another_call_is_refused():
    other = {"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_2", "status": "success",
                                                         "content": [{"text": "x"}]}}]}
    found = dict(violations([user("Look."), USE, other]))
    assert "tool-result-matched" in found and "tool-use-answered" in found


@pytest.mark.parametrize("turns", [3, 4, 5, 6, 7, 8])
def test_the_sdks_summarizing_manager_can_put_two_user_messages_in_a_row_and_the_alternating_one_never(turns):
    """strands-agents 1.62: the summary (a user message) goes before the kept messages; an even split keeps a user
    message first, a request Bedrock refuses. The subclass moves the split by one message."""
    from strands import Agent
    from strands.agent.conversation_manager import SummarizingConversationManager

    from companion.models.converse_rules import ConverseSummarizingConversationManager
    from companion.models.offline_model import OfflineModel

    results = {}
    seen: list = []

    class Recording(OfflineModel):
        async def stream(self, messages, *args, **kwargs):
            seen.append(list(messages))
            async for event in super().stream(messages, *args, **kwargs):
                yield event

    for manager in (SummarizingConversationManager, ConverseSummarizingConversationManager):
        seen.clear()
        agent = Agent(model=Recording(), callback_handler=None,
                      conversation_manager=manager(summary_ratio=0.3, preserve_recent_messages=2))
        for i in range(turns):
            agent(f"My item {i} is thing{i}.")
        agent.conversation_manager.reduce_context(agent)
        results[manager.__name__] = [rule for rule, _ in violations(agent.messages)]
        if manager is ConverseSummarizingConversationManager:
            assert all(not violations(call) for call in seen), "the summary call itself alternates too"
        if manager is ConverseSummarizingConversationManager:
            assert agent.messages[0]["content"][0]["text"].startswith("## Conversation Summary")
    assert results["ConverseSummarizingConversationManager"] == []
    split = max(1, int(2 * turns * 0.3))
    assert results["SummarizingConversationManager"] == (["alternating-roles"] if split % 2 == 0 else [])


def test_the_offline_model_refuses_what_bedrock_refuses_when_asked_to():
    import asyncio

    from companion.models.converse_rules import ValidationException
    from companion.models.offline_model import OfflineModel

    crashed = [user("What is my codename?"), USE, user("Are you there?")]

    async def call(model):
        return [event async for event in model.stream(crashed)]

    with pytest.raises(ValidationException) as raised:
        asyncio.run(call(OfflineModel(validate_requests=True)))
    assert str(raised.value) == ("An error occurred (ValidationException) when calling the ConverseStream operation: "
                                 "Expected toolResult blocks at messages.2.content for the following Ids: tooluse_1")
    assert asyncio.run(call(OfflineModel(validate_requests=False)))
