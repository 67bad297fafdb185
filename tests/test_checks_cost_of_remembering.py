"""Notebook 07's checks (companion/checks/cost_of_remembering.py), each shown failing on a broken copy of the recorded
run, and the recorded run turned into other valid runs (a real Bedrock model, a window that holds everything, a payoff
run too short to reach the payoff) on which the checks it skips are decided or skipped with their reason."""

from __future__ import annotations

from checks_harness import check_suite

from companion.checks import cost_of_remembering

PLAIN, WINDOW, KEPT = cost_of_remembering.NAMES


def calls(record, name, runs="runs"):
    return record[runs][name]["calls"]


def kept_payoff_calls(record):
    return calls(record, KEPT, "payoff_runs")


def climbing(some, per_turn, since=0):
    """Calls whose input grows by `per_turn` tokens a turn from turn `since` on (the reported usage follows)."""
    for call in some:
        if call["turn"] > since and not call["summary"]:
            call["in"] += per_turn * call["turn"]
            if call["reported"]:
                call["reported"][0] = call["in"]


def summarize_on_every_read(record):
    """The payoff run's kept summary, as a store-everything, summarize-on-read design would make it: from turn 10 on,
    every turn adds a summary call as large as no pruning's call of that turn."""
    plain = {c["turn"]: c for c in calls(record, PLAIN, "payoff_runs")}
    some = kept_payoff_calls(record)
    for turn in sorted({c["turn"] for c in some if c["turn"] >= 10}):
        extra = {**plain[turn], "summary": True, "rules": []}
        extra["reported"] = [extra["in"], extra["out"]]
        some.append(extra)


def free_summaries(record):
    """A meter that counted the summary calls as free."""
    for call in kept_payoff_calls(record):
        if call["summary"]:
            call.update({"in": 0, "out": 0, "reported": [0, 0]})


def drop_summaries(record):
    """A meter that never saw the summary calls of the payoff run."""
    record["payoff_runs"][KEPT]["calls"] = [c for c in kept_payoff_calls(record) if not c["summary"]]
    record["payoff_runs"][KEPT]["loop_calls"] = len(kept_payoff_calls(record))


def window_that_holds_everything(record):
    """Exercise 2's run: a window of 58 never trims 30 turns, so it behaves as no pruning."""
    record["window_size"] = 2 * len(record["prompts"]) - 2
    record["runs"][WINDOW] = record["runs"][PLAIN]
    record["shown"]["bill"][WINDOW] = record["shown"]["bill"][PLAIN]
    record["shown"]["curves"][WINDOW] = record["shown"]["curves"][PLAIN]


def payoff_run_of(turns):
    """The payoff run cut at `turns` turns, with the payoff turns the lesson would then print."""
    def cut(record):
        for run in record["payoff_runs"].values():
            run["calls"] = [c for c in run["calls"] if c["turn"] <= turns]
            run["loop_calls"] = sum(not c["summary"] for c in run["calls"])
            run["agent_usage"] = sum(c["in"] + c["out"] for c in run["calls"] if not c["summary"])
        record["shown"]["payoffs"] = {"every call": None, "turn calls only": 10}
    return cut


def with_a_fact_lost_from_the_summary(record):
    value = record["facts"]["favorite number"]
    last = record["runs"][KEPT]["last"]
    last["texts"] = [[role, text.replace(value, "")] for role, text in last["texts"]]


BREAKAGES = {
    # a call that received one message fewer than the conversation so far
    "without pruning, call n receives all 2n - 1 messages so far":
        lambda r: calls(r, PLAIN)[9].update(messages=18),
    # the history sent later holds another reply than the one the model gave in turn 3
    "each call = every earlier prompt and reply, in order, and the new prompt":
        lambda r: calls(r, PLAIN)[2].update(reply="Something else entirely."),
    # a history that stopped growing halfway, as a hidden window would make it
    "so its input grows linearly, turn by turn":
        lambda r: [c.update({"in": calls(r, PLAIN)[14]["in"]}) for c in calls(r, PLAIN)[15:]],
    # a window off by one
    "the window's calls never receive more than w + 1 messages":
        lambda r: calls(r, WINDOW)[20].update(messages=r["window_size"] + 2),
    # a window whose calls keep growing
    "once full, the window's input stays flat":
        lambda r: climbing(calls(r, WINDOW), 15),
    # a window that made a summary call
    "the window makes no extra call":
        lambda r: calls(r, WINDOW).append({**calls(r, WINDOW)[10], "summary": True}),
    # a window that kept turn 1
    "the window's last call lost the oldest turns first, and their facts with them":
        lambda r: r["runs"][WINDOW]["last"]["texts"].insert(0, ["user", r["prompts"][0]]),
    # a reply that names the codename although its call did not receive it (a guess, or a leak)
    "each last answer names the facts its call received, no other":
        lambda r: r["runs"][WINDOW]["last"].update(reply=f"Your codename is {r['facts']['codename']}."),
    # a kept summary whose turn calls keep growing in the second half of the payoff run
    "the kept summary's turn calls stay flat":
        lambda r: climbing(kept_payoff_calls(r), 15, since=max(c["turn"] for c in kept_payoff_calls(r)) // 2),
    "and it pays for that with summary calls": drop_summaries,
    # a summary that lost the favourite number
    "the kept summary's last call received every fact, and turns 1-3 were not in it": with_a_fact_lost_from_the_summary,
    # a request with two user messages in a row
    "every request of both runs passes Bedrock's Converse rules, and is answered":
        lambda r: kept_payoff_calls(r)[15].update(rules=["alternating-roles"]),
    "counting every call, the kept summary pays off, but not from turn 1": summarize_on_every_read,
    "counting only its turn calls, the payoff comes earlier": free_summaries,
    # a payoff turn printed one turn off
    "the payoff turns printed = the recount":
        lambda r: r["shown"]["payoffs"].update({"every call": r["shown"]["payoffs"]["every call"] + 1}),
    # a turn call the meter marked as a summary call
    "the summary requests are the calls the agent's own loop did not make":
        lambda r: calls(r, PLAIN)[5].update(summary=True),
    # an agent counter that saw the summary calls too
    "the agent's own usage = its turn calls' reported tokens; the summary calls are missing":
        lambda r: r["runs"][KEPT].update(agent_usage=sum(sum(c["reported"]) for c in calls(r, KEPT))),
    # a bill that left out a summary call
    "the bill's turn and summary calls = the calls the model received, by kind":
        lambda r: r["shown"]["bill"][KEPT].update({"summary calls": r["shown"]["bill"][KEPT]["summary calls"] - 1}),
    "the bill's facts kept = the facts each last answer names":
        lambda r: r["shown"]["bill"][WINDOW].update({"facts kept": "3/3"}),
    # a model that reported one input token more than it received
    "every call's reported tokens = its recount, input and output":
        lambda r: calls(r, PLAIN)[3]["reported"].__setitem__(0, calls(r, PLAIN)[3]["reported"][0] + 1),
    # a bill whose summary tokens leave out one summary call
    "the bill's tokens = every call recounted, summaries included":
        lambda r: r["shown"]["bill"][KEPT].update({"summary tokens": r["shown"]["bill"][KEPT]["summary tokens"] - 300}),
    # a plot that left out the summary call of a turn
    "the plot's tokens per turn = every call of the turn, recounted":
        lambda r: r["shown"]["curves"][KEPT].__setitem__(10, r["shown"]["curves"][KEPT][10] - 300),
}

VARIANTS = {
    "a real Bedrock model": lambda r: r.update(offline=False),
    "a window that holds everything": window_that_holds_everything,
    "a payoff run of 25 turns": payoff_run_of(25),
}

globals().update(check_suite(cost_of_remembering, "07_cost_of_remembering", BREAKAGES, VARIANTS))


def test_the_window_that_holds_everything_says_why_two_checks_are_not_checked():
    """Exercise 2's two "not checked" rows, each with its reason."""
    from checks_harness import broken, load_record

    ledger = cost_of_remembering.claims(broken(load_record("07_cost_of_remembering"), window_that_holds_everything))
    skipped = {row.claim: row.evidence for row in ledger.rows if row.status == "skipped"}
    assert skipped == {
        "once full, the window's input stays flat":
            "not checked: a window of 58 never fills in 30 turns: the last call's 59 messages fit",
        "the window's last call lost the oldest turns first, and their facts with them":
            "not checked: a window of 58 holds all 59 messages of 30 turns: nothing was cut",
    }
