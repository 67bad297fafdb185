"""Notebook 05 (summarization): the call-counting helpers, and the exercises replayed: one run with the parameter of
exercise 1 and the solution of 2 appended (it builds an agent of its own and reads nothing the notebook's checks read),
then "Check yourself" again; the refusals on their own runs, which stop at the setup cell."""

from __future__ import annotations

import asyncio
import logging
import re

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import checks_held, ledger_text, printed, run_once, solution_code
from strands import Agent
from strands.agent.conversation_manager import SummarizingConversationManager

from companion import OfflineModel
from companion.models.summary_calls import (
    CallLog,
    captured_log,
    sdk_selection,
    sent_to_summarizer,
    summary_calls_per_turn,
    turn_of_calls,
)
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


def test_sent_to_summarizer_reads_both_request_forms():
    """The SDK manager's request (the messages, then "Please summarize this conversation.") and a <content> request
    (ConverseSummarizingConversationManager's) both give (role, text) per message sent; any other call gives None."""
    from companion.models.converse_rules import ConverseSummarizingConversationManager
    from companion.models.metering import MeteredModel

    sent, requests = [], []
    for manager_class in (SummarizingConversationManager, ConverseSummarizingConversationManager):
        meter = MeteredModel(OfflineModel())
        agent = Agent(model=meter, callback_handler=None, messages=conversation(7))
        manager_class(summary_ratio=0.3, preserve_recent_messages=2).reduce_context(agent, e=RuntimeError("overflow"))
        requests.append(len(meter.exchanges[0]["messages"]))
        sent.append(sent_to_summarizer(meter.exchanges[0]["messages"]))
    assert requests == [3, 1], "the SDK's messages and its request; one <content> message"
    assert sent[0] == [("user", "prompt 0"), ("assistant", "reply 1")], "the SDK's manager: int(7 × 0.3) = 2"
    assert sent[1] == [("user", "prompt 0"), ("assistant", "reply 1"), ("user", "prompt 2")], "to a kept reply"
    assert sent_to_summarizer([user("Hello.")]) is None


def test_summary_call_lines_name_the_summary_written_before_and_skip_other_calls():
    """Two summary calls: the second received the summary the first wrote and the prompt after the folded ones; the
    summary is named, not printed again; a call that is not a summary call prints nothing."""
    from companion.models.metering import MeteredModel
    from companion.models.summary_calls import summary_call_lines

    meter = MeteredModel(OfflineModel())
    agent = Agent(model=meter, callback_handler=None, messages=conversation(5))
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
    manager.reduce_context(agent, e=RuntimeError("overflow"))  # int(5 × 0.5) = 2: prompt 0, reply 1
    agent.messages.append(user("My codename is ORION."))
    manager.reduce_context(agent, e=RuntimeError("overflow"))  # int(5 × 0.5) = 2: the summary, prompt 2
    lines = summary_call_lines([meter.exchanges[0], {"messages": [user("Hello.")], "turn": 9, "reply": "Hi."},
                                meter.exchanges[1]])
    assert [line for line in lines if " received: " in line] == [
        "turn 0 received: [user] prompt 0 + [assistant] reply 1",  # MeteredModel's turn label: 0 until set
        "turn 0 received: the summary before + [user] prompt 2"]
    assert not any("turn 9" in line for line in lines)
    # the offline model kept no fact of these prompts: the second summary is the first one, word for word
    assert [line for line in lines if " wrote: " in line] == [
        "       wrote:    " + " / ".join(meter.exchanges[0]["reply"].strip().splitlines()),
        "       wrote:    the same summary again"]
    other = {**meter.exchanges[1], "reply": "## Conversation Summary\n* The user's codename is ORION."}
    assert summary_call_lines([meter.exchanges[0], other])[-1] == (
        "       wrote:    ## Conversation Summary / * The user's codename is ORION.")


def window_run(window: int, folder) -> list[dict]:
    """The seven turns as notebook 05's `run` plays them, on an offline model with a context window of `window`."""
    from strands.hooks import BeforeModelCallEvent
    from strands.session import FileSessionManager

    from companion.models.metering import MeteredModel
    from companion.models.summary_calls import play_turns
    from companion.support.conversations import scripted_turns

    manager = SummarizingConversationManager(preserve_recent_messages=2,
                                             proactive_compression={"compression_threshold": 0.7})
    agent = Agent(model=MeteredModel(OfflineModel(context_window_limit=window)), conversation_manager=manager,
                  session_manager=FileSessionManager(session_id="demo", storage_dir=str(folder)), callback_handler=None)
    projected: list[int] = []
    agent.add_hook(lambda event: projected.append(event.projected_input_tokens), BeforeModelCallEvent)
    return play_turns(agent, scripted_turns("codename", 7, codename="ORION"), projected, 0.7)


def test_the_one_window_that_comes_back_is_not_an_accident_of_the_four_shown(tmp_path):
    """Notebook 05's exercise 3 reruns the seven turns for windows 40, 80, 120 and 160, and says only 120 comes back
    under the line after a summary: over every window from 20 to 160 tokens (step 10), 120 is still the only one."""
    def relieved(rows):
        return any(row["summary calls"] and not after["over threshold"] for row, after in zip(rows, rows[1:]))

    answers = [size for size in range(20, 161, 10) if relieved(window_run(size, tmp_path / str(size)))]
    assert answers == [120], answers


def test_the_pressure_plot_is_described_from_its_data():
    """Notebook 05's figure: each run's projections against threshold × its window, the summary turns named; a line
    over 20 times the largest projection is drawn on a log scale, and the description says so."""
    import matplotlib.pyplot as plt

    from companion.support.figures import description
    from companion.support.plots import pressure_plot

    def rows(projected, fired):
        return [{"turn": t, "projected": p, "summary calls": int(t in fired)} for t, p in enumerate(projected, 1)]

    text = description(pressure_plot({"small run": (rows([11, 33, 56], {2, 3}), 40),
                                      "quiet run": (rows([11, 33, 46], set()), 300_000)}, 0.7))
    assert text == ("Two line charts of each turn's projected input tokens against the threshold line, 0.7 × the "
                    "context window: small run, line at 28 tokens: 11, 33, 56 tokens, over the line on turns 2-3, a "
                    "summary call on turns 2-3; quiet run, line at 210,000 tokens (log scale): 11, 33, 46 tokens, no "
                    "turn over the line and no summary call.")
    one = pressure_plot({"small run": (rows([11, 33, 59], {3}), 80)}, 0.7)
    assert [ax.get_yscale() for ax in one.get_axes()] == ["linear"]
    assert description(one).startswith("A line chart ") and description(one).endswith(
        "small run, line at 56 tokens: 11, 33, 59 tokens, over the line on turn 3, a summary call on turn 3.")
    none = pressure_plot({"small run": (rows([11, 60], set()), 80)}, 0.7)
    assert description(none).endswith("11, 60 tokens, over the line on turn 2 and no summary call.")
    plt.close("all")


# ---------------------------------------------------------------- the exercises, replayed

NAME = "05_summarization.ipynb"
SMALL = 'print("first summary call in the small run:", next(r["turn"] for r in small if r["summary calls"]))'


def check_cell() -> str:
    """The code cell of "Check yourself", to run again after the exercises."""
    cells = nbformat.read(notebook_runs.NOTEBOOKS / NAME, as_version=4).cells
    start = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("## Check yourself"))
    return next(c.source for c in cells[start + 1:] if c.cell_type == "code")


@pytest.fixture(scope="module")
def exercises_run(tmp_path_factory):
    solutions = solution_code(nbformat.read(notebook_runs.NOTEBOOKS / NAME, as_version=4))
    assert len(solutions) == 2, "the solutions of exercises 2 and 3 (1 is a parameter)"
    notebook, _ = run_once(tmp_path_factory, NAME, {"small_window": 80},
                           [SMALL, *solutions, check_cell()])
    return notebook


def test_exercise_1_a_roomier_small_window(exercises_run):
    ledger = " ".join(ledger_text(exercises_run).split())
    assert checks_held(exercises_run), ledger
    assert "0.7 × 80 = 56 tokens" in printed(exercises_run)
    assert "first summary call in the small run: 4" in printed(exercises_run)
    assert "× 80 = 56 tokens: first summary call at turn 4" in ledger, ledger
    assert "calls per turn (model) [0, 0, 0, 1, 1, 1, 1]; projected (files) [11, 33, 46, 59" in ledger, ledger


def test_exercise_2_a_summary_call_only_right_after_an_overflow(exercises_run):
    calls = re.findall(r"^(\d+) (turn|summary) (answered|overflowed)$", printed(exercises_run), re.MULTILINE)
    assert len(calls) >= 7, calls
    summaries = [i for i, (_, kind, _) in enumerate(calls) if kind == "summary"]
    assert summaries and all(calls[i - 1][1:] == ("turn", "overflowed") for i in summaries), calls
    assert sorted({int(calls[i][0]) for i in summaries}) == [5, 6], calls
    answered = [int(turn) for turn, kind, outcome in calls if kind == "turn" and outcome == "answered"]
    assert answered == list(range(1, 8)), "every turn answered in the end"


def test_exercise_3_only_the_120_token_window_comes_back_under_the_line(exercises_run):
    shown = printed(exercises_run, plain=True)
    for row in (r"40\s+28\s+\[2, 3, 4, 5, 6, 7\]\s+none", r"80\s+56\s+\[4, 5, 6, 7\]\s+none",
                r"120\s+84\s+\[6\]\s+\[7\]", r"160\s+112\s+none\s+none"):
        assert re.search(rf"^{row}(?!\S*\d)", shown, re.MULTILINE), (row, shown[-600:])


def test_the_checks_hold_again_after_the_exercises(exercises_run):
    headlines = re.findall(r"^Check yourself: .*$", ledger_text(exercises_run), re.MULTILINE)
    assert len(headlines) == 2 and all("FAIL" not in h for h in headlines), headlines


def test_exercise_1_a_zero_threshold_is_refused_before_the_workspace_is_reset(tmp_path, workspace_root):
    (workspace_root / "ex_05z").mkdir()
    (workspace_root / "ex_05z" / "keep.txt").write_text("keep")
    with pytest.raises(papermill.PapermillExecutionError, match=r"\bthreshold must be a number in \(0, 1\]"):
        notebook_runs.refuse(NAME, {"workspace": "ex_05z", "threshold": 0})
    assert (workspace_root / "ex_05z" / "keep.txt").read_text() == "keep"


@pytest.mark.parametrize("parameters, message", [
    ({"threshold": 1.5}, r"\bthreshold must be a number in \(0, 1\]"),
    ({"preserve_recent_messages": -1}, "preserve_recent_messages must be a whole number of 0 or more"),
    ({"small_window": 0}, "small_window must be a whole number of 1 or more"),
    ({"turns": 1}, "turns must be a whole number of 2 or more"),
])
def test_invalid_values_are_refused(parameters, message, tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match=message):
        notebook_runs.refuse(NAME, {"workspace": "ex_05bad", **parameters})
