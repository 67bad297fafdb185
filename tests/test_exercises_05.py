"""Notebook 05 (summarization): the call-counting helpers, and every exercise replayed with its solution's parameters."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from pathlib import Path

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import checks_held, ledger_text, printed
from strands import Agent
from strands.agent.conversation_manager import SummarizingConversationManager

from companion import OfflineModel
from companion.models.summary_calls import CallLog, captured_log, sdk_selection, summary_calls_per_turn, turn_of_calls
from conftest import assistant, user

NOTEBOOK = "05_summarization.ipynb"


# ---------------------------------------------------------------- the helpers


def conversation(n: int) -> list[dict]:
    return [user(f"prompt {i}") if i % 2 == 0 else assistant(f"reply {i}") for i in range(n)]


@pytest.mark.parametrize("ratio", [0.05, 0.1, 0.3, 0.5, 0.8, 1.0])
@pytest.mark.parametrize("preserve", [0, 1, 2, 6])
def test_sdk_selection_matches_the_sdk(ratio, preserve):
    """The restated rule agrees with what SummarizingConversationManager really hands to the model."""
    for n in range(1, 14, 2):  # odd: the last message is the user's prompt, as before a model call
        log = CallLog(OfflineModel())
        agent = Agent(model=log, callback_handler=None, messages=conversation(n))
        manager = SummarizingConversationManager(summary_ratio=ratio, preserve_recent_messages=preserve)
        expected = sdk_selection(n, ratio, preserve)
        if expected == 0:
            with pytest.raises(Exception, match="insufficient messages for summarization"):
                manager.reduce_context(agent, e=RuntimeError("overflow"))
            assert log.calls == []
        else:
            manager.reduce_context(agent, e=RuntimeError("overflow"))
            assert [c["messages"] for c in log.calls] == [expected], (n, ratio, preserve)
            assert len(agent.messages) == n - expected + 1


def test_call_log_marks_summary_calls_and_a_previous_summary():
    log = CallLog(OfflineModel())
    agent = Agent(model=log, callback_handler=None, messages=conversation(5))
    manager = SummarizingConversationManager(summary_ratio=0.3, preserve_recent_messages=2)
    manager.reduce_context(agent, e=RuntimeError("overflow"))  # folds 1 message
    manager.reduce_context(agent, e=RuntimeError("overflow"))  # selects 1: the summary it just wrote
    assert [(c["kind"], c["messages"], c["previous_summary"], c["outcome"]) for c in log.calls] == [
        ("summary", 1, False, "ok"),
        ("summary", 1, True, "ok"),
    ]
    assert manager.removed_message_count == 1, "the second call folded no conversation message"
    assert len(log.calls[1]["texts"]) == 1 and log.calls[1]["texts"][0].startswith("## Conversation Summary")


def test_call_log_marks_errors_and_delegates_config():
    inner = OfflineModel(overflow_at_tokens=3)
    log = CallLog(inner)
    assert log.get_config() == inner.get_config()
    assert log.context_window_limit == inner.context_window_limit

    async def consume():
        async for _ in log.stream([user("this message is longer than three tokens")]):
            pass

    with pytest.raises(Exception, match="too long"):
        asyncio.run(consume())
    assert log.calls == [{"kind": "turn", "request": None, "messages": 1, "previous_summary": False, "texts": [], "tools": [],
                          "roles": ["user"], "refused": [], "reply": "", "outcome": "error"}]


def test_a_previous_summary_is_known_by_the_managers_record_not_by_its_wording():
    """On the paraphrase voice the summary has another title: the plain voice's title misses it, the manager's
    `_summary_message` does not (the summary in agent.messages, counted by turn_counters too)."""
    from companion.support.messages import is_summary

    for known in (False, True):
        manager = SummarizingConversationManager(summary_ratio=0.3, preserve_recent_messages=2)
        log = CallLog(OfflineModel(voice="paraphrase"), summaries=(lambda m=manager: [m._summary_message]) if known else None)
        agent = Agent(model=log, callback_handler=None, messages=conversation(5))
        manager.reduce_context(agent, e=RuntimeError("overflow"))
        manager.reduce_context(agent, e=RuntimeError("overflow"))  # selects the summary it just wrote
        assert [c["previous_summary"] for c in log.calls] == [False, known]
        assert log.calls[1]["texts"] == [log.calls[0]["reply"]] and not log.calls[0]["reply"].startswith("## ")
    assert is_summary(agent.messages[0], [manager._summary_message]) and not is_summary(agent.messages[0])
    assert not is_summary(agent.messages[1], [manager._summary_message])


def test_turn_counters_count_the_summary_the_sdk_recorded(tmp_path):
    from strands.session import FileSessionManager

    from companion.sessions.counters import turn_counters

    manager = SummarizingConversationManager(summary_ratio=0.3, preserve_recent_messages=2,
                                             proactive_compression={"compression_threshold": 0.00005})
    agent = Agent(model=OfflineModel(voice="paraphrase"), callback_handler=None, conversation_manager=manager,
                  session_manager=FileSessionManager(session_id="s", storage_dir=str(tmp_path)))
    for prompt in ("My codename is ORION.", "Hello.", "Hello again."):
        agent(prompt)
    assert turn_counters(agent, tmp_path, "s", "ORION")["summaries"] == 0  # by the plain title: missed
    assert turn_counters(agent, tmp_path, "s", "ORION", summaries=[manager._summary_message])["summaries"] == 1


@pytest.mark.parametrize("turns", [3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("voice", ["plain", "paraphrase"])
def test_the_converse_manager_sends_only_requests_bedrock_accepts_and_the_sdks_does_not(turns, voice):
    """Every request (summary calls included) checked with the Converse rules: the SDK's manager sends refused ones
    (its summary call after a folded user message, or the summary before a kept user message); the Converse manager,
    same settings, none, and still folds every turn over the threshold; its summary keeps the facts it folds."""
    from companion.models.converse_rules import ConverseSummarizingConversationManager

    refused = {}
    for manager_class in (SummarizingConversationManager, ConverseSummarizingConversationManager):
        manager = manager_class(summary_ratio=0.3, preserve_recent_messages=2,
                                proactive_compression={"compression_threshold": 0.00005})
        log = CallLog(OfflineModel(voice=voice), summaries=lambda m=manager: [m._summary_message])
        agent = Agent(model=log, callback_handler=None, conversation_manager=manager)
        agent("My codename is ORION.")
        for i in range(1, turns):
            agent(f"My item{i} is thing{i}.")
        refused[manager_class] = [(t, c["kind"]) for t, c in zip(turn_of_calls(log.calls), log.calls) if c["refused"]]
        assert [c["kind"] for c in log.calls].count("summary") == turns - 1
    assert refused[ConverseSummarizingConversationManager] == []
    assert (2, "summary") in refused[SummarizingConversationManager]
    assert "ORION" in " ".join(b["text"] for b in manager._summary_message["content"])
    assert agent.messages[1]["role"] == "assistant"


@pytest.mark.parametrize("voice", ["plain", "paraphrase"])
def test_on_a_model_applying_the_converse_rules_the_sdks_manager_logs_refused_summaries_and_raises(voice):
    """Notebook 05's strict run: OfflineModel(validate_requests=True) refuses, with the copy's text, the SDK manager's
    summary calls at turns 2 and 3 (logged, the turns go on unsummarized) and turn 4's own call, which raises."""
    from companion.models.converse_rules import ValidationException

    manager = SummarizingConversationManager(summary_ratio=0.3, preserve_recent_messages=2,
                                             proactive_compression={"compression_threshold": 0.00005})
    log = CallLog(OfflineModel(validate_requests=True, voice=voice))
    agent = Agent(model=log, callback_handler=None, conversation_manager=manager)
    logged = []
    for turn, prompt in enumerate(["My codename is ORION.", "Hello.", "Hello again.", "And again."], start=1):
        with captured_log() as lines:
            if turn < 4:
                agent(prompt)
            else:
                with pytest.raises(ValidationException, match="must alternate between user and assistant roles"):
                    agent(prompt)
        logged.append(lines)
    assert [len(lines) for lines in logged] == [0, 1, 1, 0]
    assert all("Proactive summarization failed, continuing" in lines[0] for lines in logged[1:3])
    errors = [(t, c["kind"]) for t, c in zip(turn_of_calls(log.calls), log.calls) if c["outcome"] == "error"]
    assert errors == [(2, "summary"), (3, "summary"), (4, "turn")]
    assert log.calls[-2]["kind"] == "summary" and log.calls[-2]["outcome"] == "ok", "turn 4's summary call passes"


def test_turn_of_calls_reads_turns_from_the_order_of_calls():
    calls = [{"kind": "turn", "outcome": "ok"}, {"kind": "summary", "outcome": "ok"}, {"kind": "turn", "outcome": "error"},
             {"kind": "summary", "outcome": "ok"}, {"kind": "turn", "outcome": "ok"}, {"kind": "turn", "outcome": "ok"}]
    assert turn_of_calls(calls) == [1, 2, 2, 2, 2, 3]


def test_summary_calls_are_grouped_by_the_turn_call_they_precede():
    calls = [
        {"kind": "turn", "outcome": "ok"},
        {"kind": "summary", "outcome": "ok", "n": "a"},
        {"kind": "turn", "outcome": "ok"},
        {"kind": "turn", "outcome": "error"},
        {"kind": "summary", "outcome": "ok", "n": "b"},
        {"kind": "turn", "outcome": "ok"},
        {"kind": "turn", "outcome": "error"},
        {"kind": "summary", "outcome": "error", "n": "c"},
    ]
    per_turn = summary_calls_per_turn(calls, 4)
    assert [[c["n"] for c in turn] for turn in per_turn] == [[], ["a"], ["b"], ["c"]]
    with pytest.raises(ValueError):
        summary_calls_per_turn(calls, 2)


def test_captured_log_keeps_warnings_off_stderr(capsys):
    logger = logging.getLogger("strands.agent.conversation_manager.summarizing_conversation_manager")
    with captured_log() as lines:
        logger.warning("Proactive summarization failed, continuing: %s", "why")
        logger.info("not kept")
    logger_state = logging.getLogger("strands")
    assert lines == ["WARNING: Proactive summarization failed, continuing: why"]
    assert capsys.readouterr().err == ""
    assert logger_state.propagate and not any(type(h).__name__ == "_Collect" for h in logger_state.handlers)


# ---------------------------------------------------------------- the exercises, replayed

# Appended after the notebook: the firing table's rows and the reactive section's outcome as JSON, from the same
# objects the tables show, so each test asserts the numbers the exercise tells the learner to look for.
SHOW_ROWS = """
import json
print("FIRING", json.dumps([{k: r[k] for k in ("turn", "held", "summary calls", "sent to summarizer", "folded",
                                               "kept", "SDK warning")} for r in firing]))
print("REACTIVE", json.dumps({"turns": [r["turn"] for r in reactive_rows],
                              "error": type(reactive_error).__name__ if reactive_error else None,
                              "is_overflow": isinstance(reactive_error, ContextWindowOverflowException),
                              "last": reactive_rows[-1]}))
"""


def replay(tmp_path: Path, parameters: dict, extra_cells=(SHOW_ROWS,)) -> nbformat.NotebookNode:
    return notebook_runs.run(NOTEBOOK, tmp_path, parameters, extra_cells, defaults={"interactive": False})


def shown(notebook: nbformat.NotebookNode) -> str:
    """Everything the notebook printed or displayed as text (streams and the text form of tables)."""
    return printed(notebook, plain=True)


def emitted(notebook: nbformat.NotebookNode, label: str):
    (line,) = [line for line in printed(notebook).splitlines() if line.startswith(label + " ")]
    return json.loads(line[len(label) + 1 :])


def story_line(text: str, threshold: str) -> str:
    """The line of the per-run summary table for one threshold."""
    lines = [line for line in text.splitlines() if re.match(rf"{re.escape(threshold)}\s", line)]
    assert lines, f"no summary row for threshold {threshold}"
    return lines[0]


def test_exercise_1_first_summary_call_at_turn_4(tmp_path, workspace_root):
    notebook = replay(tmp_path, {"workspace": "ex_05a", "firing_threshold": 0.00017783})
    assert checks_held(notebook), ledger_text(notebook)
    row = story_line(shown(notebook), "0.00017783")
    assert "4, 5, 6, 7" in row and " 4 " in row, row
    assert [r["summary calls"] for r in emitted(notebook, "FIRING")] == [0, 0, 0, 1, 1, 1, 1]


def test_exercise_2_preserve_six(tmp_path, workspace_root):
    notebook = replay(tmp_path, {"workspace": "ex_05b", "preserve_recent_messages": 6})
    assert checks_held(notebook), ledger_text(notebook)
    rows = emitted(notebook, "FIRING")
    warning = "WARNING: Proactive summarization failed, continuing: Cannot summarize: insufficient messages for summarization"
    assert [r["SDK warning"] for r in rows[1:3]] == [warning, warning], "turns 2 and 3: over, nothing selectable"
    assert [r["summary calls"] for r in rows] == [0, 0, 0, 1, 1, 1, 1]
    assert rows[3]["sent to summarizer"] == 1 and rows[3]["held"] == 7, "turn 4: min(max(1, int(7 × 0.3)), 7 − 6) = 1"
    row = story_line(shown(notebook), "5e-05")
    assert "4, 5, 6, 7" in row and "2, 3" in row, row


def test_exercise_3_ratio_clamped(tmp_path, workspace_root):
    notebook = replay(tmp_path, {"workspace": "ex_05c", "summary_ratio": 1.0, "preserve_recent_messages": 0})
    assert checks_held(notebook), ledger_text(notebook)
    assert "summary_ratio = 1; the SDK uses 0.8" in shown(notebook)
    rows = emitted(notebook, "FIRING")
    # turn 2: holds 3, int(3 × 0.8) = 2 sent and folded; from turn 3: holds 4, int(4 × 0.8) = 3 sent (the previous
    # summary among them) and 2 folded; the summary, the new prompt and the reply stay: 3 kept after every turn from 2
    assert [(r["sent to summarizer"], r["folded"]) for r in rows] == [(0, 0), (2, 2)] + [(3, 2)] * 5, rows
    assert [r["held"] for r in rows[2:]] == [4] * 5
    assert [r["kept"] for r in rows] == [2] + [3] * 6, rows


@pytest.mark.parametrize("parameters, message", [
    ({"summary_ratio": 1.5}, r"summary_ratio must be a number in \(0, 1\]"),
    ({"summary_ratio": 0}, r"summary_ratio must be a number in \(0, 1\]"),
    ({"preserve_recent_messages": -1}, "preserve_recent_messages must be a whole number of 0 or more"),
    ({"firing_threshold": 0}, r"firing_threshold must be a number in \(0, 1\]"),
    ({"reactive_limit": 0}, "reactive_limit must be a whole number of 1 or more"),
    ({"auto_window": 0}, "auto_window must be a whole number of 1 or more"),
])
def test_exercise_3_invalid_values_are_refused(parameters, message, tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match=message):
        replay(tmp_path, {"workspace": "ex_05bad", **parameters}, extra_cells=())


def test_exercise_4_tighter_reactive_limit(tmp_path, workspace_root):
    notebook = replay(tmp_path, {"workspace": "ex_05d", "reactive_limit": 60})
    assert checks_held(notebook), ledger_text(notebook)
    text = shown(notebook)
    assert "5 of 6 turns answered" in text
    reactive = emitted(notebook, "REACTIVE")
    assert reactive["turns"] == [1, 2, 3, 4, 5, 6], "the table stops at turn 6"
    assert reactive["error"] == "ContextWindowOverflowException" and reactive["is_overflow"], reactive
    assert reactive["last"]["SDK warning"].startswith("ERROR: Summarization failed: Input is too long for the offline model")
    assert reactive["last"]["reply"].startswith("ContextWindowOverflowException: Input is too long"), reactive["last"]
    assert "overflows too" in ledger_text(notebook), "the ledger's row for the error that reached the code"


def test_exercise_5_auto_acts_earlier_on_a_smaller_window(tmp_path, workspace_root):
    notebook = replay(tmp_path, {"workspace": "ex_05e", "auto_window": 850})
    assert checks_held(notebook), ledger_text(notebook)
    text = shown(notebook)
    assert "0.85 × 850 tokens = 722 tokens" in text or "0.85 × 850 tokens = 723 tokens" in text
    assert "summary calls: 4, at turns 4, 5, 6, 7; turns over 85% with no summary call: 2, 3" in text
    assert re.search(r"messages sent to the summarizer\s+\d+\s+8\s*$", text, re.MULTILINE), "4 calls of 2 messages"
