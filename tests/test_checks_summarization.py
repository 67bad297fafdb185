"""Notebook 05's checks (companion/checks/summarization.py), each shown failing on a broken copy of the recorded run."""

from __future__ import annotations

import copy

from checks_harness import check_suite

from companion.checks import summarization


def run(record, name):
    return record["runs"][name]


def turn_calls(calls):
    """Indexes of the answered turn calls, in order (turn 1 first)."""
    return [i for i, call in enumerate(calls) if call["kind"] == "turn" and call["answered"]]


def summary_at(calls, turn):
    """Index of the first summary call of `turn` (the summary calls just before that turn's answered call)."""
    start = turn_calls(calls)[turn - 2] + 1 if turn > 1 else 0
    return next(i for i in range(start, len(calls)) if calls[i]["kind"] == "summary")


def drop_summary(record, name, turn):
    calls = record["runs"][name]["calls"] if name != "sdk" else record["sdk"]["calls"]
    del calls[summary_at(calls, turn)]


def add_summary(record, name, turn):
    """A summary call before `turn`'s own call: one message sent (the oldest), one message kept for it."""
    calls = run(record, name)["calls"]
    at = turn_calls(calls)[turn - 1]
    first = calls[at]["roles"][0]
    calls.insert(at, {"kind": "summary", "roles": ["user"], "sent": [[first, "an old message"]],
                      "reply": "## Conversation Summary", "answered": True})


def keep_everything(record):
    """A summary that kept every prompt it folded, word for word."""
    role, text = run(record, "small")["summary"]
    run(record, "small")["summary"] = [role, text + "\n" + "\n".join(record["prompts"])]


BREAKAGES = {
    # an SDK whose proactive default moved
    "proactive_compression=True sets the SDK's default threshold, 0.7; without it there is none":
        lambda r: r["default_threshold"].update(with_true=0.8),
    # a manager that skipped a turn over the threshold
    "small: a summary call on exactly the turns over the threshold that hold more than preserve_recent_messages":
        lambda r: drop_summary(r, "small", 3),
    # the SDK's own manager skipping a turn over the threshold
    "a separate run of the SDK's own manager, same turns and settings: a summary call on exactly the turns over the "
    "threshold that hold more than preserve_recent_messages":
        lambda r: drop_summary(r, "sdk", 4),
    # a manager that fired although no turn reached the threshold
    "quiet: no turn's projection reaches the threshold, and no summary call comes":
        lambda r: add_summary(r, "quiet", 7),
    # a quiet run that held one message a call: a window, not a threshold, kept it small
    "not message count: the small run summarized holding fewer messages than the quiet run held without a summary":
        lambda r: [call.update(roles=["user"]) for call in run(r, "quiet")["calls"]],
    # the small window's first summary call a turn after its first turn over the threshold
    "the same threshold fires on the smaller window, never on the larger one":
        lambda r: drop_summary(r, "small", 2),
    # a summary inserted as the assistant's
    "the summary is a user-role message":
        lambda r: run(r, "small")["summary"].__setitem__(0, "assistant"),
    # a summary that is not what the model answered (written by hand, or edited after the call)
    "the model wrote it: its text is the reply to the last summary call":
        lambda r: run(r, "small")["summary"].__setitem__(1, "## Conversation Summary\n* Nothing to report."),
    "it kept the codename and lost facts: folded prompts with none of their words of five letters or more in it":
        keep_everything,
}


def never_fires(record):
    """Another valid run: a small window that seven turns never fill (the default on 50,000 tokens), so the summary
    checks are skipped."""
    for part in (run(record, "small"), record["sdk"]):
        part.update(calls=[c for c in part["calls"] if c["kind"] == "turn"], window=50_000)
    run(record, "small").update(summary=None)


globals().update(check_suite(summarization, "05_summarization", BREAKAGES, {"never fires": never_fires}))


def test_the_sdk_run_is_the_sdks_own_manager():
    """The second run is the SDK's own manager; offline, the lesson's runs are too (on Bedrock the notebook swaps in
    the companion's subclass: the class replay runs that path)."""
    from checks_harness import load_record

    record = copy.deepcopy(load_record("05_summarization"))
    assert record["sdk"]["manager"] == "SummarizingConversationManager"
    assert {run(record, name)["manager"] for name in ("quiet", "small")} == {"SummarizingConversationManager"}
