"""Notebook 13's checks (companion/checks/episodes.py), each shown failing on a broken copy of the recorded run; and a
real model's run, on which the check about the offline model's reading of an episode is skipped."""

from __future__ import annotations

from checks_harness import check_suite

from companion.checks import episodes


def task(record, task_id):
    return next(t for t in record["tasks"] if t["id"] == task_id)


def call(record, run, task_id):
    return next(c for c in record["runs"][run] if c["task"] == task_id)


def answer_right(record, run, task_ids):
    """The model answered these tasks right in `run` (as if its data or its episodes had said so)."""
    for task_id in task_ids:
        call(record, run, task_id)["reply"] = f"It is {task(record, task_id)['right']}."


def repeat_every_mistake(record):
    """Recall that changed nothing: every reply of the recall run is the one given without recall."""
    for with_call, without_call in zip(record["runs"]["recall"], record["runs"]["no recall"]):
        with_call["reply"] = without_call["reply"]


def borrowed_tasks(record, run):
    calls = {c["task"]: c for c in record["runs"][run]}
    return [t["id"] for t in record["tasks"] if t["stale"] == t["right"] and t["right"] not in calls[t["id"]]["reply"]]


def no_repeats_at_the_top(record):
    """A sweep whose highest threshold repeated no mistake (it would then beat every lower one)."""
    top = max(record["runs"], key=lambda name: float(name.split()[1]) if name.startswith("sweep ") else -1)
    answer_right(record, top, [t["id"] for t in record["tasks"]])


BREAKAGES = {
    # a log that wrote the outcome the user did not give
    "the episode log holds one episode per task, in order: its reply, outcome and feedback":
        lambda r: r["logs"]["episodes"][0].update(outcome="right"),
    # a store that let a far episode through its threshold
    "every episode a call received is at least its run's threshold from its task (numpy)":
        lambda r: next(c for c in r["runs"]["recall"] if c["recalled"])["recalled"][0].update(cosine=0.41),
    # a store searched after the run had recorded later tasks
    "each call received at most recall_k episodes, each of an earlier task":
        lambda r: next(c for c in r["runs"]["recall"] if c["recalled"])["recalled"][0].update(task="t36"),
    # Thursday answered from the runbook although Monday's correction reached its call
    "up close: Thursday's call received Monday's episode and answered its feedback's value":
        lambda r: r["closeup"].update(reply="Your deploy region is us-east-1."),
    "recall cuts repeated mistakes": repeat_every_mistake,
    # a model that kept something from an earlier task without any memory
    "without recall every recurrence of a corrected stale task is wrong again":
        lambda r: answer_right(r, "no recall", ["t12"]),
    # an episode that reached the first task of its family before the family had one
    "with recall the first task of each stale family is still wrong":
        lambda r: answer_right(r, "recall", ["t01"]),
    # a table that counted one repeated mistake more than the replies hold
    "the measured table shows the counts recounted from the replies":
        lambda r: r["shown"]["measured"]["episodic recall"].update({"repeated mistakes": [1, 18]}),
    # a borrowed answer whose call received no episode at all: something else misled it
    "each answer wrong where its data was right received another family's episode":
        lambda r: call(r, "recall", borrowed_tasks(r, "recall")[0]).update(recalled=[]),
    "the sweep's lowest threshold borrows; its highest borrows least and repeats more": no_repeats_at_the_top,
    "the sweep's figure shows the counts recounted from the replies":
        lambda r: r["shown"]["sweep"]["0.8"].update({"repeated mistakes": [0, 18]}),
    # a sweep where a lower threshold borrowed nothing: 0.7 would not be the pick
    "of the thresholds that repeat no mistake, the default 0.7 borrows least":
        lambda r: answer_right(r, "sweep 0.6", borrowed_tasks(r, "sweep 0.6")),
    # a recurrence within reach of its own family's episode that still repeated its mistake
    "at each threshold, the mistakes that come back are the recurrences below it from every earlier task of their "
    "family (numpy)":
        lambda r: call(r, "sweep 0.5", "t12").update(reply=f"It is {task(r, 't12')['stale']}."),
}

VARIANTS = {"a real model": lambda r: r.update(offline_rules=False)}

globals().update(check_suite(episodes, "13_episodes", BREAKAGES, VARIANTS))
