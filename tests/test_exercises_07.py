"""Notebook 07's exercises, replayed: one run with the parameters of exercises 1 and 4 (more turns, a bigger budget:
the first changes only the 30-turn runs, the second only what the summarizing manager does, and each exercise reads
its own figures) and the smallest window, which changes only the window's run; exercise 2's window in the class replay
(classes/sample.yaml gives it); exercise 3's solution on the recorded run's payoff calls; and the refusals, each
stopping at the setup cell.

Exercise 3 prices the payoff run at the default budget, which exercise 4 changes, and the class replay cannot paste a
solution: its code runs in process on the payoff run's calls as tests/records/07_cost_of_remembering.json keeps them
(the default run's, which tests/test_checks_cost_of_remembering.py ties to the committed notebook, and nbval the
committed notebook to a fresh run), so no third run of 07 is needed for it."""

from __future__ import annotations

import re
from types import SimpleNamespace

import nbformat
import papermill
import pytest
from checks_harness import load_record
from notebook_runs import NOTEBOOKS, checks_held, ledger_text, printed, refuse, replayed, run_once, solution_code

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
def exercises_run(tmp_path_factory):
    notebook, _ = run_once(tmp_path_factory, NAME, {"turns": 60, "token_budget": 400, "window_size": 2})
    return notebook


def test_exercise_1_doubling_the_conversation_about_quadruples_the_bill(exercises_run):
    assert checks_held(exercises_run), ledger_text(exercises_run)
    text = printed(exercises_run, plain=True)
    ratio = int(bill_row(text, "no pruning")[4]) / int(bill_row(committed_text(), "no pruning")[4])
    assert 3.5 < ratio < 4.5, ratio
    assert bill_row(committed_text(), "no pruning")[4] == "7397", "the figure the exercise quotes"
    assert f"{ratio:.1f}" == "3.8", "the solution's figure"


def test_exercise_4_a_bigger_budget_brings_the_two_payoff_turns_together(exercises_run):
    text = printed(exercises_run, plain=True)
    assert (payoff(committed_text(), "every call"), payoff(committed_text(), "turn calls only")) == ("32", "10")
    assert (payoff(text, "every call"), payoff(text, "turn calls only")) == ("34", "26")


def test_exercise_2_a_window_of_58_keeps_every_fact_at_no_pruning_cost(series_replay):
    """The class replay's run of 07 (paraphrase voice, local Bedrock path): the window's facts, its cost beside no
    pruning's and the checks it leaves unchecked are the window's mechanics, whatever words the replies use."""
    notebook, _ = replayed(series_replay, NAME, {"window_size": 58})
    assert checks_held(notebook), ledger_text(notebook)
    text = printed(notebook, plain=True)
    assert bill_row(committed_text(), "window (10)")[5] == "0/3", "the default window forgets"
    window, everything = bill_row(text, "window (58)"), bill_row(text, "no pruning")
    assert window[5] == "3/3", "the window still holds turn 1 when the question comes"
    assert window[4] == everything[4], "and it costs what keeping everything costs"
    ledger = " ".join(ledger_text(notebook).split())
    assert "6 of 6 claims hold (20 of 22 checks hold)" in ledger
    assert "not checked: a window of 58 never fills in 30 turns: the last call's 59 messages fit" in ledger
    assert "not checked: a window of 58 holds all 59 messages of 30 turns: nothing was cut" in ledger


def recorded_payoff_runs() -> tuple[dict, int]:
    """The payoff runs as exercise 3's solution reads them (`payoff_runs`: name -> (agent, storage); the agent's
    model's `calls`), rebuilt from the recorded run: each call's turn, kind and the tokens the model reported."""
    runs = load_record(NAME.removesuffix(".ipynb"))["payoff_runs"]
    payoff_runs = {}
    for name, recorded in runs.items():
        assert all(c["reported"] for c in recorded["calls"]), "every call of the recorded payoff run was answered"
        calls = [{"kind": "summary" if c["summary"] else "turn", "turn": c["turn"], "input": c["reported"][0],
                  "output": c["reported"][1]} for c in recorded["calls"]]
        payoff_runs[name] = (SimpleNamespace(model=SimpleNamespace(calls=calls)), None)
    turns = max(c["turn"] for recorded in runs.values() for c in recorded["calls"])
    return payoff_runs, turns


def test_exercise_3_in_dollars_the_summary_pays_off_later(capsys):
    """Exercise 3's solution, its code as the notebook shows it, run on the default run's payoff calls (the recorded
    run): see the module's docstring for why not in a run of its own."""
    from companion.measure.cost import payoff_turn, running_total

    (code,) = solution_code(nbformat.read(NOTEBOOKS / NAME, as_version=4))
    payoff_runs, payoff_turns = recorded_payoff_runs()
    assert payoff_turns == 50, "the default payoff run"
    exec(code, {"payoff_runs": payoff_runs, "payoff_turns": payoff_turns, "running_total": running_total,
                "payoff_turn": payoff_turn})
    text = capsys.readouterr().out
    assert "$0.0008 per 1,000 input tokens, $0.0032 per 1,000 output tokens" in text
    assert "in dollars, the kept summary pays off from turn 40" in text
    assert payoff(committed_text(), "every call") == "32", "later than in tokens"


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
        refuse(NAME, {"workspace": "ex_07x", **parameters})
    assert (workspace_root / "ex_07x" / "keep.txt").read_text() == "keep"


def test_smallest_accepted_values_keep_the_checks(exercises_run):
    """The smallest window, 2, rides in the exercises' run (it changes only the window's run, which exercises 1 and 4
    do not read). The other smallest values this test ran with the window, 8 turns, a payoff run of 40 and a budget
    of 50, are gone: their one branch of the checks, a payoff run too short to reach the payoff (not checked, its gap
    shrinking), is decided on the recorded run's variant "a payoff run of 25 turns"
    (tests/test_checks_cost_of_remembering.py), and every other check as on the default run."""
    assert checks_held(exercises_run), ledger_text(exercises_run)
    assert bill_row(printed(exercises_run, plain=True), "window (2)")[5] == "0/3"


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
