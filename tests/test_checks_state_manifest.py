"""Notebook 04's checks (companion/checks/state_manifest.py), each shown failing on a broken copy of the recorded run."""

from __future__ import annotations

from checks_harness import check_suite

from companion.checks import state_manifest

PLANT = ["user", "My codename is ORION. Please remember it."]
OTHER = ["user", "The lunch order is in."]
MANIFEST = '\n\n<manifest>\n{"codename": "ORION"}\n</manifest>'


def calls(record, run):
    return record["runs"][run]["calls"]


def restarted(record, session):
    return record["restarts"][session]["calls"][-1]


def lose_a_call_to_the_hook(record):
    """A hook registered on the wrong event: the call of turn 3 got the bare base prompt."""
    calls(record, "hook")[2]["system_prompt"] = record["base_prompt"]


def pin_twice(record):
    """A pin that sends turn 1 again on top of the window before the window is full."""
    call = calls(record, "pinned")[2]
    call["messages"] = call["messages"][:2] + call["messages"]


def restore_a_turn_early(record):
    """A restore that skipped one turn fewer than the window removed: the restored call starts two files earlier."""
    session = record["restarts"]["hook-restart"]
    call = session["calls"][-1]
    start = next(k for k in range(len(session["files"])) if session["files"][k:k + len(call["messages"])] == call["messages"])
    call["messages"] = session["files"][start - 2:start] + call["messages"]


def prompt_without_base(record):
    """A hook that sets the manifest alone and drops the stored base prompt."""
    for call in calls(record, "hook"):
        call["system_prompt"] = MANIFEST.strip()


BREAKAGES = {
    # a session manager that does not save state
    "state is saved: agent.json of the session without the hook holds the codename":
        lambda r: r["runs"]["no-hook"]["state_on_disk"].clear(),
    # state that leaked into the system prompt of a call without any hook
    "without the hook, a model call carries the codename only in turn 1's messages":
        lambda r: calls(r, "no-hook")[5].update(system_prompt=r["base_prompt"] + MANIFEST),
    # a window that kept turn 1 one turn too long
    "without the hook, no model call from turn w/2 + 2 on receives the codename":
        lambda r: calls(r, "no-hook")[4]["messages"].insert(0, PLANT),
    # a reply that names the codename although its call did not receive it (a guess, or a leak)
    "without the hook, the last turn does not name the codename":
        lambda r: calls(r, "no-hook")[-1].update(reply="Your codename is ORION."),
    "the hook, the one difference, puts the codename in the system prompt of every model call": lose_a_call_to_the_hook,
    # a manifest built from a stale copy of the state: agent.json holds more than any call received
    "the manifest each model call received is the state agent.json saved, as JSON":
        lambda r: r["runs"]["hook"]["state_on_disk"].update(plan="pro"),
    "with the hook, the last turn answers with the codename":
        lambda r: calls(r, "hook")[-1].update(reply="I cannot see your codename in this conversation."),
    # the rebuilding hook appended once: the call of turn 4 carries two manifests
    "rebuilt from base_prompt: every model call carries exactly one manifest":
        lambda r: calls(r, "hook")[3].update(system_prompt=calls(r, "hook")[3]["system_prompt"] + MANIFEST),
    "the rebuilt system prompt is the same text on every model call, base_prompt first": prompt_without_base,
    # the appending hook's last call rebuilt instead: one manifest fewer
    "appended to the current prompt, the model call of turn t carries t manifests":
        lambda r: calls(r, "append")[-1].update(system_prompt=r["base_prompt"] + MANIFEST),
    # a reported usage that is not the text the call received
    "the manifest costs the same tokens on every model call, from turn 1":
        lambda r: calls(r, "hook")[4].update(input=calls(r, "hook")[4]["input"] + 3),
    "pin_first=2 sends nothing extra up to turn w/2 + 1": pin_twice,
    # a pin that kept only the user message of turn 1
    "from turn w/2 + 2 on, pin_first=2 sends turn 1's two messages on top of the window":
        lambda r: calls(r, "pinned")[5]["messages"].pop(1),
    # a session manager that does not restore state
    "a restore reads agent.state back from agent.json, in both sessions":
        lambda r: r["restarts"]["hook-restart"]["state_restored"].clear(),
    "a restore skips as many stored messages as the window had removed, in both sessions": restore_a_turn_early,
    # a session manager that saved the pin: the restored call receives turn 1 again
    "after a restart, the pinned agent loses turn 1 and its model call receives the codename nowhere":
        lambda r: restarted(r, "pin-restart")["messages"].insert(0, PLANT),
    # the restored agent built without the hook: the base prompt alone
    "after a restart, the hook rebuilds the manifest from the restored state, and it answers":
        lambda r: restarted(r, "hook-restart").update(system_prompt=r["base_prompt"]),
}

VARIANTS = {
    # a real model's tokenizer: the price row is skipped, every other check still holds
    "a real model": lambda r: r.update(offline_rules=False),
}

globals().update(check_suite(state_manifest, "04_state_manifest", BREAKAGES, VARIANTS))
