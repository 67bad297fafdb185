"""Notebook 07's exercises, replayed: one run with the parameters of exercises 1 and 4 (more turns, a bigger budget:
the first changes only the 30-turn runs, the second only what the summarizing manager does, and each exercise reads
its own figures), one with exercise 2's window and exercise 3's solution appended (the solution only reads the payoff
run, which the window does not touch), and the refusals, each stopping at the setup cell."""

from __future__ import annotations

import re

import nbformat
import papermill
import pytest
from notebook_runs import NOTEBOOKS, checks_held, ledger_text, printed, run, run_once, solution_code

NAME = "07_cost_of_remembering.ipynb"


def committed_text() -> str:
    return printed(nbformat.read(NOTEBOOKS / NAME, as_version=4), plain=True)


def bill_row(text: str, strategy: str) -> list[str]:
    """The cells of one row of the bill (its text form), after the strategy: turn calls, summary calls, turn tokens,
    summary tokens, all tokens, facts kept, the agent's own count."""
    match = re.search(rf"^{re.escape(strategy)}\s+(\d.*)$", text, re.MULTILINE)
    assert match, f"no bill row for {strategy}"
    return match.group(1).split()


def payoff(text: str, count: str) -> str:
    match = re.search(rf"{count}: payoff turn (\d+|none) of \d+\n", text)
    assert match, f"no payoff line for {count}"
    return match.group(1)


@pytest.fixture(scope="module")
def longer_and_bigger_budget(tmp_path_factory):
    notebook, _ = run_once(tmp_path_factory, NAME, {"turns": 60, "token_budget": 400})
    assert checks_held(notebook), ledger_text(notebook)
    return printed(notebook, plain=True)


@pytest.fixture(scope="module")
def wide_window_priced(tmp_path_factory):
    (code,) = solution_code(nbformat.read(NOTEBOOKS / NAME, as_version=4))
    notebook, _ = run_once(tmp_path_factory, NAME, {"window_size": 58}, [code])
    assert checks_held(notebook), ledger_text(notebook)
    return notebook


def test_exercise_1_doubling_the_conversation_about_quadruples_the_bill(longer_and_bigger_budget):
    ratio = int(bill_row(longer_and_bigger_budget, "no pruning")[4]) / int(bill_row(committed_text(), "no pruning")[4])
    assert 3.5 < ratio < 4.5, ratio
    assert bill_row(committed_text(), "no pruning")[4] == "7397", "the figure the exercise quotes"
    assert f"{ratio:.1f}" == "3.8", "the solution's figure"


def test_exercise_4_a_bigger_budget_brings_the_two_payoff_turns_together(longer_and_bigger_budget):
    assert (payoff(committed_text(), "every call"), payoff(committed_text(), "turn calls only")) == ("32", "10")
    assert (payoff(longer_and_bigger_budget, "every call"), payoff(longer_and_bigger_budget, "turn calls only")) == (
        "34", "26")


def test_exercise_2_a_window_of_58_keeps_every_fact_at_no_pruning_cost(wide_window_priced):
    text = printed(wide_window_priced, plain=True)
    assert bill_row(committed_text(), "window (10)")[5] == "0/3", "the default window forgets"
    window, everything = bill_row(text, "window (58)"), bill_row(text, "no pruning")
    assert window[5] == "3/3", "the window still holds turn 1 when the question comes"
    assert window[4] == everything[4], "and it costs what keeping everything costs"
    ledger = " ".join(ledger_text(wide_window_priced).split())
    assert "6 of 6 claims hold (20 of 22 checks hold)" in ledger
    assert "not checked: a window of 58 never fills in 30 turns: the last call's 59 messages fit" in ledger
    assert "not checked: a window of 58 holds all 59 messages of 30 turns: nothing was cut" in ledger


def test_exercise_3_in_dollars_the_summary_pays_off_later(wide_window_priced):
    text = printed(wide_window_priced)
    assert "$0.0008 per 1,000 input tokens, $0.0032 per 1,000 output tokens" in text
    assert "in dollars, the kept summary pays off from turn 40" in text
    assert payoff(text, "every call") == "32", "later than in tokens"


@pytest.mark.parametrize("parameters, message", [
    ({"window_size": 5}, "window_size must be an even number of 2 or more"),
    ({"turns": 300}, "turns must be a whole number from 8 to 200"),
    ({"payoff_turns": 30}, "payoff_turns must be a whole number from 40 to 200"),
    ({"token_budget": 1000}, "token_budget must be a whole number from 50 to 400"),
])
def test_parameters_outside_the_lesson_stop_before_the_workspace_is_reset(parameters, message, tmp_path,
                                                                          workspace_root):
    (workspace_root / "ex_07x").mkdir()
    (workspace_root / "ex_07x" / "keep.txt").write_text("keep")
    with pytest.raises(papermill.PapermillExecutionError, match=message):
        run(NAME, tmp_path, {"workspace": "ex_07x", **parameters})
    assert (workspace_root / "ex_07x" / "keep.txt").read_text() == "keep"


def test_smallest_accepted_values_keep_the_checks(tmp_path, workspace_root):
    out = run(NAME, tmp_path, {"workspace": "ex_07w", "window_size": 2, "turns": 8, "payoff_turns": 40,
                               "token_budget": 50})
    assert checks_held(out), ledger_text(out)
    assert bill_row(printed(out, plain=True), "window (2)")[5] == "0/3"


@pytest.mark.parametrize("preserve, ratio", [(0, 0.3), (2, 0.3), (3, 0.5), (4, 0.3), (5, 0.1)])
def test_the_summarizing_manager_sends_only_requests_that_pass_converse_rules(preserve, ratio):
    """ConverseSummarizingConversationManager (companion/models/converse_rules.py, taught in notebook 05), at notebook
    07's settings (4, 0.3) and others: every call, the summary calls included, breaks none of the rules
    companion/models/converse_rules.py writes down for Bedrock's Converse API, it still summarizes, and every prompt
    after the summarized ones is still sent. join_user_messages, for prune()'s view, joins two user messages in a row
    without modifying its input."""
    from strands import Agent

    from companion.memory.pruning import join_user_messages
    from companion.models.converse_rules import ConverseSummarizingConversationManager, violations
    from companion.models.metering import MeteredModel
    from companion.models.offline_model import OfflineModel
    from companion.support.messages import message_text

    metered = MeteredModel(OfflineModel())
    manager = ConverseSummarizingConversationManager(summary_ratio=ratio, preserve_recent_messages=preserve,
                                                     proactive_compression={"compression_threshold": 120 / 300_000})
    agent = Agent(model=metered, conversation_manager=manager, callback_handler=None)
    prompts = [f"My item {i} is thing{i}." for i in range(14)]
    for prompt in prompts:
        agent(prompt)
    assert sum(c["kind"] == "summary" for c in metered.calls) >= 2
    assert [rule for x in metered.exchanges for rule, _ in violations(x["messages"])] == []
    kept = " ".join(message_text(m) for m in agent.messages)
    first_kept = next(i for i, p in enumerate(prompts) if p in kept)
    assert all(p in kept for p in prompts[first_kept:]), "every prompt after the summarized ones is still sent"
    pair = [{"role": "user", "content": [{"text": "a"}]}, {"role": "user", "content": [{"text": "b"}]}]
    assert join_user_messages(pair) == [{"role": "user", "content": [{"text": "a"}, {"text": "b"}]}]
    assert len(pair) == 2 and pair[0]["content"] == [{"text": "a"}], "the input list is not modified"


def test_no_check_of_notebook_07_is_decided_in_advance():
    """A check whose `holds` is a literal True (or False) can never fail (or hold) whatever the run shows."""
    source = (NOTEBOOKS.parent / "companion" / "checks" / "cost_of_remembering.py").read_text(encoding="utf-8")
    notebook = nbformat.read(NOTEBOOKS / NAME, as_version=4)
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    assert not re.search(r"holds\s*=\s*(True|False)\b", source + code)
