"""Scripts, counters, tables, pruning, metering and cost arithmetic behind notebooks 03-07."""

from __future__ import annotations

import asyncio
import json

import pytest
from strands import Agent
from strands.agent.conversation_manager import (
    NullConversationManager,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
)
from strands.session import FileSessionManager

from companion.measure.cost import (
    NOVA_PRO_ON_DEMAND,
    Price,
    call_dollars,
    cost_row,
    curve_shape,
    dollars_by_turn,
    facts_kept,
    payoff_turn,
    r_squared,
    running_total,
    slope,
    tokens_by_turn,
)
from companion.memory.pruning import STRATEGIES, JsonHistoryStore, count_tokens, prune
from companion.models.metering import MeteredModel
from companion.models.offline_model import OfflineModel
from companion.sessions.counters import turn_counters
from companion.support.conversations import load_script, scripted_turns
from companion.support.display import text_table
from companion.support.messages import SUMMARY_REQUEST, is_summary, message_text
from companion.support.workspace import UnsafePathError
from conftest import assistant, user


def test_scripted_turns_plant_filler_question():
    prompts = scripted_turns("codename", 7, codename="ORION")
    assert prompts[0] == "My codename is ORION. Please remember it."
    assert prompts[-1] == "What is my codename?"
    assert len(prompts) == 7 and len(set(prompts[1:-1])) == 5
    long = scripted_turns("long_chat", 30, codename="X", favorite_number=1, home_city="Y")
    assert len(long) == 30 and long[1] == "My favorite number is 1. Keep that in mind."


def test_scripted_turns_errors():
    with pytest.raises(ValueError, match="at least 2 turns"):
        scripted_turns("codename", 1, codename="ORION")
    with pytest.raises(ValueError, match="needs a value for 'codename'"):
        scripted_turns("codename", 5)
    with pytest.raises(ValueError, match=r"the scripts are: codename, .*long_chat"):
        load_script("nope")


def test_filler_states_no_facts_and_asks_nothing():
    from companion.models.facts import asked_keys, statements

    for name in ["codename", "long_chat"]:
        for line in load_script(name)["filler"]:
            assert statements(line) == [] and asked_keys(line) == [] and not line.endswith("?")


def test_turn_counters_follow_the_window(tmp_path):
    agent = Agent(
        model=OfflineModel(),
        session_manager=FileSessionManager(session_id="w", storage_dir=str(tmp_path)),
        conversation_manager=SlidingWindowConversationManager(window_size=4),
        callback_handler=None,
    )
    rows = []
    for prompt in scripted_turns("codename", 4, codename="ORION"):
        agent(prompt)
        rows.append(turn_counters(agent, tmp_path, "w", "ORION"))
    assert [(r["visible"], r["stored"], r["removed"], r["fact_visible"]) for r in rows] == [
        (2, 2, 0, True),
        (4, 4, 0, True),
        (4, 6, 2, False),
        (4, 8, 4, False),
    ]


def test_summary_detection():
    assert is_summary(user("## Conversation Summary\n* The user's codename is ORION."))
    assert not is_summary(assistant("## Conversation Summary"))
    assert message_text({"role": "user", "content": [{"toolResult": {"content": [{"text": "x"}]}}, {"text": "y"}]}) == "x y"


def test_table_alignment_and_cutting():
    text = text_table([{"turn": 1, "ok": True, "reply": "a" * 80}, {"turn": 10, "ok": False, "reply": "b"}], width=10)
    lines = text.splitlines()
    assert lines[0] == "turn  ok   reply"
    assert lines[2] == "   1  yes  aaaaaaaaa…"
    assert lines[3] == "  10  no   b"
    assert text_table([]) == "(no rows)"


def history(turns: int) -> list[dict]:
    messages = []
    for index in range(turns):
        messages += [user(f"Turn {index} says something of moderate length here."), assistant("Noted.")]
    return messages


def test_count_tokens_matches_the_sdk_heuristic():
    from strands.models.model import _estimate_tokens_with_heuristic

    messages = history(5)
    assert count_tokens(messages) == _estimate_tokens_with_heuristic(messages)


def test_prune_within_budget_is_free_and_a_copy():
    messages = history(3)
    view = prune(messages, max_tokens=10_000)
    assert view == messages and view is not messages


def test_prune_truncate_keeps_the_newest_from_a_user_message():
    messages = history(10)
    view = prune(messages, strategy="truncate", max_tokens=50)
    assert count_tokens(view) <= 50 and view[0]["role"] == "user"
    assert view == messages[-len(view):]
    assert len(messages) == 20, "the input is not modified"


def test_prune_summarize_calls_the_summarizer_once_with_the_older_messages():
    messages = history(10)
    seen = []

    def summarizer(older):
        seen.append(older)
        return "  ## Conversation Summary\n* ten turns  "

    view = prune(messages, strategy="summarize", max_tokens=50, summarizer=summarizer, preserve_recent=4)
    assert len(seen) == 1 and seen[0] == messages[:-4]
    assert view[0] == {"role": "user", "content": [{"text": "## Conversation Summary\n* ten turns"}]}
    assert view[1:] == messages[-4:]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"strategy": "drop"}, "Unknown pruning strategy 'drop'; choose one of: truncate, summarize"),
        ({"max_tokens": 0}, "max_tokens must be positive"),
        ({"strategy": "summarize", "max_tokens": 5}, "needs a summarizer"),
    ],
)
def test_prune_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        prune(history(5), **kwargs)


def test_json_history_store_round_trip_and_safety(tmp_path):
    store = JsonHistoryStore(tmp_path)
    assert store.load("s") == []
    store.save("s", history(2))
    assert store.load("s") == history(2)
    assert json.loads((tmp_path / "session_s" / "messages.json").read_text()) == history(2)
    assert [p.name for p in (tmp_path / "session_s").iterdir()] == ["messages.json"], "no temporary file left"
    with pytest.raises(UnsafePathError):
        store.save("../escape", [])


def test_metered_model_records_turns_and_summaries():
    metered = MeteredModel(OfflineModel())
    manager = SummarizingConversationManager(
        summary_ratio=0.3, preserve_recent_messages=2, proactive_compression={"compression_threshold": 0.00005}
    )
    agent = Agent(model=metered, conversation_manager=manager, callback_handler=None)
    for prompt in scripted_turns("codename", 4, codename="ORION"):
        result = agent(prompt)
    kinds = [c["kind"] for c in metered.calls]
    assert kinds.count("turn") == 4 and kinds.count("summary") >= 1
    assert metered.calls[-1]["input"] == result.metrics.latest_agent_invocation.usage["inputTokens"]
    assert metered.context_window_limit == 300_000
    assert asyncio.run(metered.count_tokens([user("abcd")])) == 1


def test_metered_model_passes_settings_through():
    inner = OfflineModel()
    metered = MeteredModel(inner)
    metered.update_config(context_window_limit=1_000)
    assert inner.context_window_limit == 1_000 == metered.context_window_limit


def test_metered_model_labels_turns_and_keeps_what_each_call_received():
    import math

    from companion.support.messages import is_summary_request

    metered = MeteredModel(OfflineModel())
    manager = SummarizingConversationManager(
        summary_ratio=0.3, preserve_recent_messages=2, proactive_compression={"compression_threshold": 0.00005}
    )
    agent = Agent(model=metered, conversation_manager=manager, callback_handler=None)
    for number, prompt in enumerate(scripted_turns("codename", 5, codename="ORION"), start=1):
        metered.turn = number
        agent(prompt)
    assert [c["turn"] for c in metered.calls if c["kind"] == "turn"] == [1, 2, 3, 4, 5]
    assert len(metered.exchanges) == len(metered.calls)
    for call, exchange in zip(metered.calls, metered.exchanges):
        assert call["kind"] == ("summary" if is_summary_request(exchange["messages"]) else "turn")
        system = math.ceil(len(exchange["system_prompt"] or "") / 4)  # the SDK sends its summarization prompt here
        assert call["input"] == count_tokens(exchange["messages"]) + system, "the offline model reports the SDK's estimate"
        assert call["output"] == math.ceil(len(exchange["reply"]) / 4)
    assert MeteredModel(OfflineModel()).turn == 0, "unlabelled calls stay at turn 0"


def test_a_new_pruning_strategy_is_one_entry(monkeypatch):
    def newest_only(messages, *, max_tokens, summarizer, preserve_recent):
        return messages[-1:]

    monkeypatch.setitem(STRATEGIES, "newest", newest_only)
    assert prune(history(5), strategy="newest", max_tokens=10) == history(5)[-1:]
    assert prune(history(1), strategy="newest", max_tokens=10_000) == history(1), "within budget: untouched"


def test_slope_and_r_squared():
    assert slope([1, 3, 5, 7]) == pytest.approx(2)
    assert r_squared([1, 3, 5, 7]) == pytest.approx(1)
    assert r_squared([5, 5, 5]) == 1.0
    assert slope([4]) == 0.0
    assert r_squared([1, 9, 1, 9, 1, 9]) < 0.2


def test_curve_shape():
    assert curve_shape([10 * i for i in range(20)], growing_slope=10) == "grows linearly"
    assert curve_shape([10 * min(i, 5) for i in range(20)], growing_slope=10) == "flat"


def test_cost_row_is_computed_from_calls():
    calls = [
        {"kind": "turn", "input": 10, "output": 2, "turn": 1},
        {"kind": "summary", "input": 30, "output": 8, "turn": 2},
        {"kind": "turn", "input": 20, "output": 3, "turn": 2},
    ]
    row = cost_row("demo", calls, "Your codename is ORION.", {"codename": "ORION", "city": "Lima"}, growing_slope=10)
    assert row["last turn tokens"] == 61, "the last turn counts its summary call too"
    assert row["summary calls"] == 1 and row["summary tokens"] == 38 and row["all tokens"] == 73
    assert row["USD"] == round((60 * 0.0008 + 13 * 0.0032) / 1000, 5)
    assert row["facts kept"] == "1/2"
    assert facts_kept("nothing", {"a": 1}) == []


def test_tokens_and_dollars_by_turn_count_every_call():
    calls = [
        {"kind": "turn", "input": 10, "output": 2, "turn": 1},
        {"kind": "summary", "input": 30, "output": 8, "turn": 2},
        {"kind": "turn", "input": 20, "output": 3, "turn": 2},
    ]
    assert tokens_by_turn(calls, 3) == [12, 61, 0]
    assert running_total([12, 61, 0]) == [12, 73, 73]
    assert dollars_by_turn(calls, 2) == pytest.approx([call_dollars(calls[:1]), call_dollars(calls[1:])])
    with pytest.raises(ValueError, match="no turn label"):
        tokens_by_turn([{"kind": "turn", "input": 1, "output": 1}], 1)


def test_price_constant_and_dollars():
    assert (NOVA_PRO_ON_DEMAND.input_per_1k, NOVA_PRO_ON_DEMAND.output_per_1k) == (0.0008, 0.0032)
    assert NOVA_PRO_ON_DEMAND.as_of and NOVA_PRO_ON_DEMAND.source and NOVA_PRO_ON_DEMAND.region == "us-east-1"
    assert NOVA_PRO_ON_DEMAND.dollars(1000, 1000) == pytest.approx(0.004)
    free = Price("m", "r", 0.0, 0.0, "s", "d")
    assert call_dollars([{"input": 5, "output": 5}], free) == 0.0


@pytest.mark.parametrize(
    "strategy, baseline, expected",
    [
        ([5, 20, 30, 35, 40], [5, 15, 30, 50, 75], 4),  # equal or above until turn 3, below from turn 4 on
        ([5, 10, 40, 80], [5, 15, 30, 50], None),  # below once, then above again: not paid off
        ([1, 2], [5, 6], 1),
        ([5, 6], [5, 6], None),  # equal is not cheaper
    ],
)
def test_payoff_turn_is_the_first_turn_from_which_it_stays_below(strategy, baseline, expected):
    assert payoff_turn(strategy, baseline) == expected


def test_no_pruning_grows_linearly_on_the_offline_model():
    metered = MeteredModel(OfflineModel())
    agent = Agent(model=metered, conversation_manager=NullConversationManager(), callback_handler=None)
    for prompt in scripted_turns("long_chat", 12, codename="X", favorite_number=7, home_city="Y"):
        agent(prompt)
    inputs = [c["input"] for c in metered.calls]
    assert r_squared(inputs) > 0.98 and slope(inputs) > 10


def test_hand_built_summary_uses_the_offline_summary_rule():
    model = OfflineModel()

    def summarizer(older):
        helper = Agent(model=model, messages=[dict(m) for m in older], callback_handler=None)
        return str(helper(SUMMARY_REQUEST))

    messages = [user("My codename is ORION."), assistant("Noted: your codename is ORION.")] + history(8)
    view = prune(messages, strategy="summarize", max_tokens=40, summarizer=summarizer, preserve_recent=2)
    assert "The user's codename is ORION." in view[0]["content"][0]["text"]
