"""Notebook 07's exercises replayed with their solutions: each must show the difference the exercise promises, against
the committed default run, with every row of the claims ledger holding."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import papermill
import pytest
from notebook_runs import NOTEBOOKS, checks_held, ledger_text, printed, run, solution_code

NAME = "07_cost_of_remembering.ipynb"


def replay(tmp_path: Path, parameters: dict, extra_cells: tuple[str, ...] = ()) -> str:
    """Run notebook 07 with `parameters` (and `extra_cells` appended); every ledger row must hold. Returns what it
    printed or displayed."""
    out = run(NAME, tmp_path, parameters, extra_cells)
    assert checks_held(out), ledger_text(out)
    return printed(out, plain=True)


def committed_text() -> str:
    return printed(nbformat.read(NOTEBOOKS / NAME, as_version=4), plain=True)


def total_tokens(text: str, strategy: str) -> int:
    """A strategy's all-tokens total from the 'Reading the table' lines."""
    match = re.search(rf"^{re.escape(strategy)}\s+([\d,]+) tokens", text, re.MULTILINE)
    assert match, f"no total printed for {strategy}"
    return int(match.group(1).replace(",", ""))


def table_row(text: str, strategy: str) -> list[str]:
    """The cells of one row of the first displayed table (its text form), after the strategy name."""
    match = re.search(rf"^{re.escape(strategy)}\s+(.*)$", text, re.MULTILINE)
    assert match, f"no row for {strategy}"
    return match.group(1).split()


def payoff_cell(text: str, strategy: str) -> str:
    """The 'pays off (tokens)' cell of a strategy in the payoff table: a turn number or 'not in N'."""
    longer = text.split("the longer run")[1]
    match = re.search(rf"^{re.escape(strategy)}\s+(not in \d+|\d+)\s", longer, re.MULTILINE)
    assert match, f"no payoff row for {strategy}"
    return match.group(1)


def payoff_row(text: str, strategy: str) -> list[str]:
    """The cells of a strategy's row of the payoff table (its text form), after the name, for a strategy whose payoff
    cells are turn numbers: pays off (tokens), pays off (USD), tokens at `turns`, tokens at `payoff_turns`, gap/turn,
    USD."""
    longer = text.split("the longer run")[1]
    match = re.search(rf"^{re.escape(strategy)}\s+(\d+\s+\d+\s.*)$", longer, re.MULTILINE)
    assert match, f"no payoff row with turn numbers for {strategy}"
    return match.group(1).split()


def test_exercise_1_doubling_the_conversation_about_quadruples_the_bill(tmp_path, workspace_root):
    text = replay(tmp_path, {"workspace": "ex_07a", "turns": 60})
    ratio = total_tokens(text, "no pruning") / total_tokens(committed_text(), "no pruning")
    assert 3.5 < ratio < 4.5, ratio
    print(f"ex1: ratio {ratio:.2f}")
    assert (workspace_root / "ex_07a").is_dir()


def test_exercise_2_a_window_of_58_keeps_every_fact_at_no_pruning_cost(tmp_path, workspace_root):
    text = replay(tmp_path, {"workspace": "ex_07b", "window_size": 58})
    assert table_row(committed_text(), "sliding window (10)")[-1] == "0/3", "the default window forgets"
    window, everything = table_row(text, "sliding window (58)"), table_row(text, "no pruning")
    assert window[-1] == "3/3", "the window still holds turn 1 when the question comes"
    assert window[0] == everything[0], "and its last turn costs as much as keeping everything"
    assert total_tokens(text, "sliding window (58)") == total_tokens(text, "no pruning")


def test_exercise_3_a_larger_budget_summarizes_less_and_makes_every_turn_dearer(tmp_path, workspace_root):
    text = replay(tmp_path, {"workspace": "ex_07c", "token_budget": 400})
    default = committed_text()
    manager = "summarizing manager"
    calls = lambda t: int(table_row(t, manager)[-5])  # noqa: E731 - the summary calls column
    assert calls(text) < calls(default)
    assert total_tokens(text, manager) < total_tokens(default, manager), "over 30 turns it costs less"
    longer = lambda t: int(payoff_row(t, manager)[3])  # noqa: E731 - its tokens at the last turn of the longer run
    assert longer(text) > longer(default), "over the longer run it costs more"
    last = lambda t: int(table_row(t, manager)[0])  # noqa: E731 - the last turn tokens column
    assert payoff_cell(text, "prune(): summarize").startswith("not in"), "summarize-on-read still does not pay off"
    print(f"ex3: summary calls {calls(text)} instead of {calls(default)}; {total_tokens(text, manager):,} tokens instead "
          f"of {total_tokens(default, manager):,}; last turn {last(text)} instead of {last(default)}; longer run "
          f"{longer(text):,} instead of {longer(default):,}; pays off (tokens, USD) {payoff_row(text, manager)[:2]} "
          f"instead of {payoff_row(default, manager)[:2]}")


def test_exercise_4_persisting_the_summary_pays_off(tmp_path, workspace_root):
    (code,) = solution_code(nbformat.read(NOTEBOOKS / NAME, as_version=4))
    assert payoff_cell(committed_text(), "prune(): summarize").startswith("not in"), "the baseline never pays off"
    text = replay(tmp_path, {"workspace": "ex_07d"}, (code,))
    fewer = re.search(r"summary calls: (\d+) instead of (\d+)", text)
    assert fewer and int(fewer.group(1)) < int(fewer.group(2)) / 2
    turn = re.search(r"persisting the summary pays off from turn (\d+)$", text, re.MULTILINE)
    assert turn, "persisting the summary gets a payoff turn"
    stored = json.loads((workspace_root / "ex_07d" / "hand-built-persisting" / "session_cost-demo" / "messages.json").read_text())
    users = [json.dumps(m["content"], sort_keys=True) for m in stored if m["role"] == "user"]
    assert all(a != b for a, b in zip(users, users[1:])), "no exchange is stored twice (consecutive prompts differ)"
    assert stored[-1]["role"] == "assistant"
    assert len(stored) < 2 * 150, "the store keeps the pruned view, not the transcript"
    print(f"ex4: {fewer.group(0)}, pays off from turn {turn.group(1)}, {len(stored)} messages stored")


def test_exercise_5_a_shorter_longer_run_loses_autos_payoff_turn(tmp_path, workspace_root):
    default = committed_text()
    assert payoff_cell(default, 'context_manager="auto"').isdigit(), "in the default run auto pays off"
    text = replay(tmp_path, {"workspace": "ex_07e", "payoff_turns": 100})
    assert payoff_cell(text, 'context_manager="auto"') == "not in 100"
    assert payoff_cell(text, "summarizing manager") == payoff_cell(default, "summarizing manager")
    auto = payoff_cell(default, 'context_manager="auto"')
    print(f"ex5: auto from turn {auto} -> not in 100; summarizing manager {payoff_cell(text, 'summarizing manager')}")


def test_smallest_window_keeps_the_checks(tmp_path, workspace_root):
    text = replay(tmp_path, {"workspace": "ex_07w", "window_size": 2, "turns": 10, "payoff_turns": 40})
    assert table_row(text, "sliding window (2)")[-1] == "0/3"


@pytest.mark.parametrize("parameters, message", [
    ({"window_size": 5}, "window_size must be an even number of 2 or more"),
    ({"turns": 300}, "turns must be a whole number from 8 to 200"),
    ({"turns": 60, "payoff_turns": 40}, "payoff_turns must be a whole number from 60 to 200"),
    ({"summary_ratio": 0.95}, "summary_ratio must be a number in"),
])
def test_parameters_outside_the_lesson_stop_with_a_reason(parameters, message, tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match=message):
        run(NAME, tmp_path, {"workspace": "ex_07x", **parameters})


@pytest.mark.parametrize("preserve, ratio", [(0, 0.3), (2, 0.3), (3, 0.5), (4, 0.3), (5, 0.1)])
def test_notebook_07s_summarizing_manager_sends_only_requests_that_pass_converse_rules(preserve, ratio):
    """ConverseSummarizingConversationManager (companion/models/converse_rules.py, taught in notebook 05), at the settings
    notebook 07's parameters allow: every call, the summarization calls included, breaks none of the rules
    companion/models/converse_rules.py writes down for Bedrock's Converse API, it still
    summarizes, and every prompt after the summarized ones is still sent. join_user_messages, for prune()'s view,
    joins two user messages in a row without modifying its input."""
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


def test_no_ledger_row_of_notebook_07_is_decided_in_advance():
    """A row whose `holds` is a literal True (or False) can never fail (or hold) whatever the run shows."""
    notebook = nbformat.read(NOTEBOOKS / NAME, as_version=4)
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    assert not re.search(r"holds\s*=\s*(True|False)\b", code)
