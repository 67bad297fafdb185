"""The helpers that read a BeforeModelCallEvent hook's record and keep the SDK's log warnings out of stderr."""

from __future__ import annotations

import logging

from strands import Agent
from strands.agent.conversation_manager import SlidingWindowConversationManager

from companion import OfflineModel
from companion.models.model_calls import SLIDING_WINDOW_LOGGER, contains_message, is_pinned, mentions, sdk_warnings
from conftest import assistant, user


def test_contains_message_matches_role_and_whole_text():
    messages = [user("My codename is ORION."), assistant("Noted: your codename is ORION.")]
    assert contains_message(messages, "My codename is ORION.")
    assert not contains_message(messages, "My codename is ORION")  # a whole message, not a substring
    assert not contains_message(messages, "Noted: your codename is ORION.")  # said by the assistant
    assert contains_message(messages, "Noted: your codename is ORION.", role="assistant")


def test_mentions_reads_any_message():
    assert mentions([user("a"), assistant("ORION")], "ORION") and not mentions([user("a")], "ORION")


def test_sdk_warnings_catches_the_pin_first_warning_and_restores_the_logger(capsys):
    logger = logging.getLogger(SLIDING_WINDOW_LOGGER)
    before = (list(logger.handlers), logger.propagate)
    agent = Agent(model=OfflineModel(), conversation_manager=SlidingWindowConversationManager(window_size=2, pin_first=2),
                  callback_handler=None)
    with sdk_warnings() as caught:
        for prompt in ["My codename is ORION.", "The build finished.", "What is my codename?"]:
            result = agent(prompt)
    assert any("all messages in trim range are pinned" in message for message in caught)
    assert "pinned" not in capsys.readouterr().err
    assert (list(logger.handlers), logger.propagate) == before
    assert "ORION" in str(result)
    assert [is_pinned(m) for m in agent.messages] == [True, True, False, False]


def test_is_pinned_reads_only_the_pin_flag():
    assert not is_pinned({"role": "assistant", "content": [], "metadata": {"usage": {"inputTokens": 1}}})
    assert is_pinned({"role": "user", "content": [], "metadata": {"custom": {"pinned": True}}})
