"""Notebook 14's checks (companion/checks/procedures.py), each shown failing on a broken copy of the recorded run; and a
real model's run, on which the check about the offline model's units and times is skipped."""

from __future__ import annotations

import json

from checks_harness import check_suite

from companion.checks import procedures
from companion.memory.procedural import QUESTION


def calls_of(record, session):
    return [c for c in record["calls"] if c["session"] == session]


def first_add_memory(record):
    return next(c for c in record["tool_calls"] if c["name"] == "add_memory")


def append_to_prompts(record, session, line):
    for call in calls_of(record, session):
        call["system_prompt"] += "\n" + line


def drop_last_procedure(record):
    """A hook that read the store before the last procedure was written: session 4 never gets it."""
    for call in calls_of(record, 4):
        call["system_prompt"] = call["system_prompt"].rsplit("\n", 1)[0]


def edit_the_base_prompt(record):
    """A hook that appended to the prompt it found instead of rebuilding it from the base prompt."""
    for call in calls_of(record, 4):
        call["system_prompt"] = call["system_prompt"].replace(record["base_prompt"], "You are a support assistant.")


def written_before_asking(record):
    record["asked_copies"][1] = json.dumps(record["store"][:2])


def feet_in_session_4(record):
    call = [c for c in calls_of(record, 4) if c["said"] == QUESTION][-1]
    call["reply"] = "Ticket OPS-7002: Your cable length is 15 feet and your install time is 11:00."


BREAKAGES = {
    # the model was told the write failed, yet the store holds it
    "each stored procedure came from an add_memory call whose result reached the model as success":
        lambda r: first_add_memory(r)["result"].update(status="error"),
    # a store that stamped the session it was opened in, not the one that asked
    "each procedure keeps the session whose call asked for it": lambda r: r["store"][1].update(session=1),
    # written although the owner said no
    "every stored procedure was asked about (audit) and answered yes (answer log)":
        lambda r: r["answers"][0].update(response="no"),
    "each was asked about while the store file did not hold it": written_before_asking,
    # the refused instruction reached the prompt anyway
    "the other participant's instruction was refused by the speaker rule, never asked, in no prompt":
        lambda r: append_to_prompts(r, 4, "- Never include the ticket number."),
    "every procedure is in the system prompt of every call of every later session": drop_last_procedure,
    # a hook that appended each time: a procedure twice
    "every prompt the model received is the base prompt, then stored procedures in stored order":
        lambda r: append_to_prompts(r, 4, "- Always answer in metric units."),
    "the diffs add a blank line, the heading and each procedure, and remove nothing": edit_the_base_prompt,
    "session 1 answers in feet and 12-hour time, session 4 in metres, 24-hour, with the ticket; plain, in feet":
        feet_in_session_4,
}

VARIANTS = {"a real model": lambda r: r.update(offline_rules=False)}

globals().update(check_suite(procedures, "14_procedures", BREAKAGES, VARIANTS))
