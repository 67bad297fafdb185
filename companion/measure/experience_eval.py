"""Measuring episodic memory on a scripted set of recurring tasks (notebook 13).

The set (data/experience/tasks.jsonl, described in its README) is a few kinds of task ("families") that recur over
four sessions, each time with other words. In most families the data the user brings along (a runbook line, a
template's default) is stale, and the user corrects the agent's answer; in the others the data is right. `run_tasks`
runs every task in a fresh agent, one conversation per task, judges the reply as the scripted user does (right when it
contains the task's right value), and, with an `EpisodeStore`, records the task as an episode that later tasks can
recall. `mistake_rates` counts from the outcomes how often the agent repeated a mistake the user had already
corrected, and how often it went wrong where its own data was right (a "borrowed" answer); `received_table` lists the
episodes such answers received, and `nearest_own_family` how close each recurrence comes to its own family's past.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from strands import Agent
from strands.memory import MemoryManager

from companion.memory.episodic import Episode, EpisodeStore
from companion.memory.selective_memory import RecordingModel, injected_entries
from companion.support.display import table
from companion.support.figures import describe_figure

__all__ = ["CONFIRMATION", "RATES", "TaskOutcome", "load_tasks", "mistake_rates", "nearest_own_family", "rates_row",
           "received_table", "run_tasks", "sweep_description", "sweep_plot"]

CONFIRMATION = "Right, thanks."
"""What the scripted user says when the agent's answer was right."""

RATES = ("first mistakes", "repeated mistakes", "borrowed")


def load_tasks(path: str | Path) -> list[dict[str, Any]]:
    """The scripted tasks of a JSON Lines file, in the order they happen (see data/experience/README.md)."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass
class TaskOutcome:
    """One task of a run: the reply, whether it was right, and what was recalled into its call."""

    task: dict[str, Any]
    reply: str
    right: bool
    recalled: list[str] = field(default_factory=list)  # the episode entries the model received
    corrected_before: bool = False  # an earlier task of the same family was answered wrong and corrected

    @property
    def repeated(self) -> bool:
        """A wrong answer on a family the user had already corrected."""
        return not self.right and self.corrected_before

    @property
    def borrowed(self) -> bool:
        """A wrong answer on a task whose own data gave the right value."""
        return not self.right and self.task["stale"] == self.task["right"]


def run_tasks(tasks: Sequence[dict[str, Any]], model: Any, store: EpisodeStore | None = None, *,
              recall_k: int = 1) -> tuple[list[TaskOutcome], RecordingModel]:
    """Run every task in a fresh agent (one conversation each), judge its reply, and record it as an episode.

    With a store, the agent's ``MemoryManager`` injects up to `recall_k` recalled episodes into the task's turn;
    without one, the agent starts from nothing each time. A reply is right when it contains the task's right value;
    the scripted user then confirms, else corrects it with the task's correction. Returns the outcomes and the
    recording wrapper, whose log holds what each call received and answered.
    """
    recorder = RecordingModel(model)
    outcomes: list[TaskOutcome] = []
    corrected: set[str] = set()
    for index, task in enumerate(tasks, 1):
        memory = None
        if store is not None:
            memory = MemoryManager(stores=[store], search_tool_config=False,
                                   injection={"max_entries": recall_k})
        agent = Agent(model=recorder, memory_manager=memory, callback_handler=None)
        reply = str(agent(task["situation"])).strip()
        calls = [c for c in recorder.log if c["kind"] == "turn"]
        right = task["right"] in reply
        outcome = TaskOutcome(task, reply, right, injected_entries(calls[-1]["messages"]) if calls else [],
                              task["family"] in corrected)
        outcomes.append(outcome)
        if not right:
            corrected.add(task["family"])
        if store is not None:
            store.record(Episode(f"e{index:02d}", task["session"], task["situation"], reply,
                                 "right" if right else "wrong", CONFIRMATION if right else task["correction"]))
    return outcomes, recorder


def mistake_rates(outcomes: Sequence[TaskOutcome]) -> dict[str, tuple[int, int]]:
    """(count, out of) for each kind of answer in a run, counted over the tasks whose own data is stale (the runbook
    line or default is out of date) or sound:

    - ``first mistakes``: wrong answers on stale tasks whose family had not been corrected yet;
    - ``repeated mistakes``: wrong answers on stale tasks whose family the user had already corrected;
    - ``borrowed``: wrong answers on tasks whose own data gave the right value.
    """
    stale = [o for o in outcomes if o.task["stale"] != o.task["right"]]
    first = [o for o in stale if not o.corrected_before]
    after = [o for o in stale if o.corrected_before]
    sound = [o for o in outcomes if o.task["stale"] == o.task["right"]]
    return {
        "first mistakes": (sum(not o.right for o in first), len(first)),
        "repeated mistakes": (sum(not o.right for o in after), len(after)),
        "borrowed": (sum(not o.right for o in sound), len(sound)),
    }


def sweep_plot(points: dict[float, dict[str, tuple[int, int]]], baseline: dict[str, tuple[int, int]], title: str):
    """Repeated mistakes and borrowed answers, as shares, against the recall threshold; the run
    without recall as dashed lines. Returns the figure."""
    thresholds = sorted(points)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for rate, colour, marker, above in (("repeated mistakes", "tab:red", "o", False),
                                        ("borrowed", "tab:blue", "s", True)):
        shares = [points[t][rate][0] / max(points[t][rate][1], 1) for t in thresholds]
        ax.plot(thresholds, shares, marker=marker, color=colour, label=f"{rate}, with recall")
        for t, share in zip(thresholds, shares, strict=True):
            k, n = points[t][rate]
            ax.annotate(f"{k}/{n}", (t, share), textcoords="offset points", xytext=(0, 7 if above else -14),
                        ha="center", fontsize=8, color=colour)
        k, n = baseline[rate]
        ax.axhline(k / max(n, 1), color=colour, linestyle="--", linewidth=1, label=f"{rate}, no recall ({k}/{n})")
    ax.set_xlabel("lowest similarity at which an episode is recalled (min_similarity)")
    ax.set_ylabel("share of the tasks it applies to")
    ax.set_ylim(-0.1, 1.12)
    ax.set_xticks(thresholds)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="center left")
    fig.tight_layout()
    return describe_figure(fig, sweep_description(points, baseline))


def sweep_description(points: dict[float, dict[str, tuple[int, int]]], baseline: dict[str, tuple[int, int]]) -> str:
    """The one-sentence description of `sweep_plot`'s figure, written from the same counts."""
    thresholds = sorted(points)

    def series(rate: str) -> str:
        counts = ", ".join(f"{points[t][rate][0]}/{points[t][rate][1]}" for t in thresholds)
        k, n = baseline[rate]
        return f"{rate} {counts} (no recall: {k}/{n})"

    return (f"Line chart over min_similarity {', '.join(f'{t:g}' for t in thresholds)}: "
            f"{series('repeated mistakes')}; {series('borrowed')}.")


def rates_row(rates: dict[str, tuple[int, int]]) -> dict[str, str]:
    """One run's rates as table cells: each count, its share and its 95% Wilson interval ("2/12 = 17% [5%-45%]")."""
    from companion.measure.poisoning_eval import share_text

    return {rate: share_text(*rates[rate]) for rate in RATES}


RECEIVED = ("task", "family", "answered", "recalled", "of family", "cosine", "its feedback")


def received_table(outcomes: Sequence[TaskOutcome], store: EpisodeStore, tasks: Sequence[dict[str, Any]]) -> Any:
    """A table (indexed by task) with one row per episode each outcome's call received: the task, its family and
    answer, the episode's id and family, the cosine similarity of the two situations, and the episode's feedback;
    no outcome, no row."""
    family_of = {t["situation"]: t["family"] for t in tasks}
    rows = []
    for outcome in outcomes:
        for entry in outcome.recalled:
            episode = store.episode_of(entry)
            rows.append({"task": outcome.task["id"], "family": outcome.task["family"], "answered": outcome.reply,
                         "recalled": episode.id, "of family": family_of[episode.situation],
                         "cosine": store.similarity(outcome.task["situation"], episode.situation),
                         "its feedback": episode.feedback})
    return table(rows, RECEIVED, index="task")


def nearest_own_family(tasks: Sequence[dict[str, Any]], similarity: Any) -> dict[str, float]:
    """For each recurrence of a stale family (a task after its family's first), the highest `similarity(a, b)` between
    its situation and an earlier task's of the same family; keyed by task id."""
    nearest = {}
    for index, task in enumerate(tasks):
        earlier = [t for t in tasks[:index] if t["family"] == task["family"]]
        if earlier and task["stale"] != task["right"]:
            nearest[task["id"]] = max(similarity(task["situation"], t["situation"]) for t in earlier)
    return nearest
