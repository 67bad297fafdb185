"""Notebook 03's checks (companion/checks/sliding_window.py), each shown failing on a broken copy of the recorded run."""

from __future__ import annotations

from checks_harness import check_suite

from companion.checks import sliding_window

PLANT = ["user", "My codename is ORION. Please remember it."]
OTHER = ["user", "The lunch order is in."]


def calls(record, run="plain"):
    return record["runs"][run]["calls"]


def swap_plant(messages):
    messages[messages.index(PLANT)] = OTHER


BREAKAGES = {
    # a window off by one: the call of turn 5 gets one message more
    "without a pin, a call receives at most w + 1 messages: w/2 turns and its prompt":
        lambda r: calls(r)[4]["messages"].insert(0, OTHER),
    "after the last turn, agent.messages holds the last w messages":
        lambda r: r["runs"]["plain"]["kept"].pop(0),
    "an Agent without a conversation manager gets a window of 40":
        lambda r: r["default_window"].update(fresh_agent=30),
    # the window trimmed before the call of turn w/2 + 1 (per_turn's behaviour, not the default's)
    "the call of turn w/2 + 1 still receives turn 1":
        lambda r: swap_plant(calls(r)[3]["messages"]),
    # a window that kept the fact one turn too long
    "from turn w/2 + 2 on, no call receives turn 1":
        lambda r: calls(r)[4]["messages"].__setitem__(0, PLANT),
    "the hook's record is what the model received, call by call":
        lambda r: r["hook"][2].pop(),
    # a reply that names the codename although its call did not receive it (a guess, or a leak)
    "the last answer gives the codename only if its call received turn 1":
        lambda r: calls(r)[-1].update(reply="Your codename is ORION."),
    # a session that lost its first message file
    "every message stays on disk, turn 1 first":
        lambda r: r["runs"]["plain"]["files"].pop(0),
    "agent.json counts what the window removed":
        lambda r: r["runs"]["plain"].update(removed=r["runs"]["plain"]["removed"] + 1),
    "a session restored from its files gets the kept window":
        lambda r: r["runs"]["plain"]["restored"].pop(),
    "the fact was gone while every call used under 1% of the context window":
        lambda r: r["runs"]["plain"]["input_tokens"].__setitem__(3, 10_000),
    "per_turn=True: turn 1 is gone from turn w/2 + 1":
        lambda r: calls(r, "per_turn")[3]["messages"].__setitem__(0, PLANT),
    "pin_first=2: every call receives turn 1":
        lambda r: swap_plant(calls(r, "pinned")[-1]["messages"]),
    "the price: two more messages on every call after the first trim":
        lambda r: calls(r, "pinned")[5]["messages"].append(OTHER),
    # a session manager that saved the pin with the message
    "the pin lives in memory only, and a restore loses turn 1":
        lambda r: r["runs"]["pinned"].update(pins_in_files=2),
}

globals().update(check_suite(sliding_window, "03_sliding_window", BREAKAGES))
