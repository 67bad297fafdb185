"""Notebook 02's checks (companion/checks/agent_json.py), each shown failing on a broken copy of the recorded run."""

from __future__ import annotations

from checks_harness import check_suite

from companion.checks import agent_json


def timing(record):
    return record["timing"]


def inject_state(record):
    """A hook that put the state in front of the model (what notebook 04 does on purpose)."""
    record["calls"][0]["system_prompt"] += ' State: {"visits": 1}'


BREAKAGES = {
    # an SDK that kept the window's bookkeeping somewhere else
    "agent.json holds three blocks of memory, beside the agent's id and two timestamps":
        lambda r: (r["agent_json"]["keys"].remove("conversation_manager_state"),
                   r["agent_json"].update(conversation_manager_state=None)),
    # a state that accepted a Python set (and would fail later, when it is written)
    "set() refuses a value that is not JSON, when it is set":
        lambda r: r["refusals"]["errors"].update(**{"a Python set": None}),
    # a refused value that was stored anyway
    "the refused values were not stored":
        lambda r: r["memory_state"].update(tags=["memory", "state"]),
    # a set() that writes through at once
    "set() writes nothing: agent.json is unchanged, byte for byte":
        lambda r: timing(r).update(**{"unchanged after set": False}),
    # a session manager that wrote the state only after the call (at AfterInvocationEvent)
    "a value set before a call reaches agent.json with the call's prompt, before the model is called":
        lambda r: timing(r)["at call"].update(state={}),
    # a reply file written before the model had answered
    "the reply's file is written only after the model has answered":
        lambda r: timing(r)["at call"].update(**{"message files": 2}),
    # a set() after the last call that reached the file all the same (a write-through state)
    "a process that set visits to 2 after its last call and died: a restart reads 1":
        lambda r: (r["crash"]["state_on_disk"].update(visits=2), r["crash"]["restored"]["state"].update(visits=2)),
    # a crash that lost the reply's file of the finished turn
    "the crashed process's finished turn is on disk, and a restore gets it":
        lambda r: (r["crash"]["files"].pop(), r["crash"]["restored"]["messages"].pop()),
    "the model never received the state: only the prompt and the system prompt": inject_state,
    # a snapshot manager that wrote a file per message
    "the snapshot manager keeps everything in one file":
        lambda r: r["snapshot"]["files"].append("message_0.json"),
    # a snapshot restore that kept the constructor's system prompt
    "a snapshot restore brings back the saved system prompt; a file restore keeps the new one":
        lambda r: r["snapshot"].update(**{"restored system prompt": agent_json.ANOTHER_PROMPT}),
}

globals().update(check_suite(agent_json, "02_agent_json_anatomy", BREAKAGES))
