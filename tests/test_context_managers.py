"""The SDK's context managers (Agent(context_manager="auto" | "agentic")) driving the offline model through a real Agent,
and the companion's reading of them (companion.memory.context_managers, the <content> and <context-status> helpers)."""

from __future__ import annotations

import math
import warnings

from strands import Agent
from strands.agent.conversation_manager import NullConversationManager, SummarizingConversationManager
from strands.hooks import BeforeModelCallEvent, HookOrder

from companion.memory.context_managers import auto_selection, injected_tools, preset_strategies, summary_blocks, summary_utilization
from companion.models.metering import MeteredModel
from companion.models.offline_model import CONTEXT_SUMMARIZE_AT, OfflineModel
from companion.models.summary_calls import CallLog
from companion.support.conversations import scripted_turns
from companion.support.messages import (
    content_summary_parts,
    context_status,
    is_content_summary_request,
    message_text,
    summary_request_kind,
    without_context_status,
)

STATUS = "\n\n<context-status>\n<used>1,700 / 2,000 tokens (85.0%)</used>\n<remaining>~300 tokens</remaining>\n</context-status>"


def test_the_presets_as_the_sdk_builds_them():
    auto = {row["strategy"]: row for row in preset_strategies("auto")}
    assert auto["offload:truncate"]["tokens per block over"] == 1500 and auto["offload:truncate"]["target"] == "tool_results"
    assert auto["offload:summarize"]["utilization at least"] == 0.85 and auto["offload:summarize"]["keeps newest messages"] == 4
    assert "offload:emergency-truncate" in auto
    assert summary_utilization("auto") == 0.85 and summary_utilization("agentic") == 1.0
    tools = injected_tools("agentic", OfflineModel())
    assert set(tools) == {"summarize_context", "truncate_context", "pin_context", "retrieve_context"}
    assert set(injected_tools("auto", OfflineModel())) == {"retrieve_context"} and all(t > 100 for t in tools.values())


def test_a_conversation_manager_passed_beside_a_context_manager_is_ignored_with_a_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        agent = Agent(model=OfflineModel(), context_manager="auto", callback_handler=None,
                      conversation_manager=SummarizingConversationManager())
    assert any("ignoring co-provided conversation_manager" in str(w.message) for w in caught)
    assert isinstance(agent.conversation_manager, NullConversationManager)


def test_content_request_helpers():
    request = {"role": "user", "content": [{"text": "<content>"}, {"text": "\n---\n[user]"}, {"text": "My plan is pro."},
                                            {"text": "\n---\n[assistant]"}, {"text": "Noted."}, {"text": "</content>"}]}
    assert is_content_summary_request([request]) and summary_request_kind([request]) == "context"
    assert content_summary_parts(request) == [("user", "My plan is pro."), ("assistant", "Noted.")]
    plain = {"role": "user", "content": [{"text": "<content> My plan is pro. </content>"}]}
    assert not is_content_summary_request([plain]) and summary_request_kind([plain]) is None
    assert without_context_status("What is my plan?" + STATUS) == "What is my plan?"
    assert context_status("x" + STATUS) == (1700, 2000) and context_status("x") is None
    assert auto_selection(7) == 2 and auto_selection(5) == 0


def test_auto_summarizes_at_85_percent_keeps_the_first_and_the_newest_four_messages():
    window = 900
    witness = CallLog(OfflineModel(context_window_limit=window))
    meter = MeteredModel(witness)
    agent = Agent(model=meter, context_manager="auto", callback_handler=None)
    starts = []
    agent.add_hook(lambda e: starts.append((e.projected_input_tokens, len(e.agent.messages))), BeforeModelCallEvent,
                   order=HookOrder.SDK_FIRST)
    prompts = scripted_turns("codename", 7, codename="ORION")
    acted = []
    for turn, prompt in enumerate(prompts, start=1):
        seen = len(witness.calls)
        reply = str(agent(prompt)).strip()
        summaries = [c for c in witness.calls[seen:] if c["kind"] == "summary"]
        projected, held = starts[-1]
        expected = auto_selection(held) if projected / window >= 0.85 else 0
        assert [c["messages"] for c in summaries] == ([expected] if expected else []), turn
        assert all(c["request"] == "context" and c["tools"] == [] for c in summaries)
        acted += [turn] * len(summaries)
    assert acted, "a 900-token window makes auto act within seven turns"
    assert reply == "Your codename is ORION."
    assert message_text(agent.messages[0]) == prompts[0], "the first message is never summarized"
    blocks = summary_blocks(agent.messages)
    assert blocks and all(role == "assistant" for _, role, _ in blocks)
    assert "The user's codename is ORION." in blocks[-1][2]
    assert sum(c["kind"] == "summary" for c in meter.calls) == len(acted)
    assert all(c["tools"] == ["retrieve_context"] for c in witness.calls if c["kind"] == "turn")


def test_agentic_calls_summarize_context_once_per_message_at_85_percent_and_answers():
    tools = sum(injected_tools("agentic", OfflineModel()).values())
    window = math.ceil((tools + 100) / CONTEXT_SUMMARIZE_AT)
    meter = MeteredModel(OfflineModel(context_window_limit=window))
    agent = Agent(model=meter, context_manager="agentic", callback_handler=None)
    prompts = scripted_turns("long_chat", 20, codename="ORION", favorite_number=42, home_city="Lima")
    for turn, prompt in enumerate(prompts, start=1):
        meter.turn = turn
        reply = str(agent(prompt)).strip()
    tool_calls = [b["toolUse"] for m in agent.messages for b in m["content"] if "toolUse" in b]
    assert tool_calls and all(t["name"] == "summarize_context" and t["input"] == {} for t in tool_calls)
    for exchange in meter.exchanges:
        last = message_text(exchange["messages"][-1])
        status = context_status(last)
        if exchange["tool_specs"] and status and status[0] >= CONTEXT_SUMMARIZE_AT * status[1]:
            asked = "toolResult" not in str(exchange["messages"][-1])
            assert (exchange["reply"] == "") == asked, "a tool call (no text) exactly when the status is over, once"
    assert any(c["kind"] == "summary" and c["request"] == "manager" for c in meter.calls), "summarize_context's summary"
    assert reply == "Your codename is ORION, your favorite number is 42 and your home city is Lima."
    assert max(sum(c["turn"] == t for c in meter.calls) for t in range(1, 21)) <= 3, "tool call, summary, answer"


def test_a_question_with_a_context_status_block_is_still_a_question():
    agent = Agent(model=OfflineModel(), context_manager="agentic", callback_handler=None)
    assert str(agent("My codename is VEGA.")).strip() == "Noted: your codename is VEGA."
    assert str(agent("What is my codename?")).strip() == "Your codename is VEGA."
    assert not [b for m in agent.messages for b in m["content"] if "toolUse" in b], "far below 85%: no tool call"
