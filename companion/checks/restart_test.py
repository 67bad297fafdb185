"""Notebook 01's ledger: a fact crosses from one OS process to another in a session's files, checked on disk.

The evidence never comes from the lesson's printed tables. The processes are known by what started them (process id,
command line, exit status, the times around each run, the environment they inherit); the sessions by their files,
read again here (names, message ids, roles, texts, the times the SDK wrote into them); the
writers by what each writer process printed and by the shared sessions' files, recounted here.
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from companion.checks import save_record
from companion.sessions.session_files import message_files, read_json, session_dir
from companion.support.ledger import Ledger
from companion.support.messages import message_text

CLAIMS = {
    "C1": "a fact crosses from one OS process to another in the session's files",
    "S1": "a new process restores the session's files into agent.messages and answers from them",
    "S2": "session.json, agent.json and one file per message: each plain turn adds two, the prompt and the reply",
    "S3": "another session id gets an empty folder of its own and sees neither fact",
    "S4": "two writers without a lock lose a turn without an error; with a lock none is lost",
}


def _process(run: Any) -> dict[str, Any]:
    return {"pid": run.pid, "program": run.program, "args": list(run.args), "returncode": run.returncode, "stdout": run.stdout,
            "started": run.started, "ended": run.ended}


def _message(path: Path) -> dict[str, Any]:
    """One message file as the checks read it: its name, id, role, words and the time the SDK wrote into it."""
    data = read_json(path)
    message = data["message"]
    return {"file": path.name, "id": data["message_id"], "role": message["role"], "text": message_text(message),
            "created_at": data["created_at"]}


def _session(storage_dir: Path, session_id: str) -> dict[str, Any]:
    folder = session_dir(storage_dir, session_id)
    return {"exists": folder.is_dir(),
            "files": sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()),
            "messages": [_message(path) for path in message_files(storage_dir, session_id)]}


def record(processes: dict[str, Any], storage_dir: Path, session_ids: list[str], *, facts: list[str],
           shared_dir: Path, writer_prompts: dict[str, str], race: Any, workspace_dir: Path) -> dict[str, Any]:
    """The evidence of notebook 01's run.

    `processes` maps "plant", "recall" and "other" to what `run_program` returned; `session_ids` is the lesson's id and
    the other id. The writers: their prompts and what `race_writers` returned (what each writer process printed per
    shared session, and the messages lost the lesson prints, only to check them against a recount).
    """
    session_id, other_id = session_ids
    return save_record({
        "kernel_pid": os.getpid(),
        "facts": facts,
        # a variable that carried the conversation would hold both facts (one alone is common: "42" in LS_COLORS)
        "environment_with_facts": sorted(name for name, value in os.environ.items()
                                         if all(fact in value for fact in facts)),
        "session_id": session_id,
        "other_session_id": other_id,
        "processes": {name: _process(run) for name, run in processes.items()},
        "sessions": {sid: _session(storage_dir, sid) for sid in (session_id, other_id)},
        "writers": {
            "prompts": writer_prompts,
            "stdout": {sid: {name: run.stdout for name, run in runs.items()} for sid, runs in race.runs.items()},
            "sessions": {sid: _session(shared_dir, sid)["messages"] for sid in race.runs},
            "exit codes": {sid: {name: run.returncode for name, run in runs.items()} for sid, runs in race.runs.items()},
            "table": {total["session"]: total["messages lost"] for total in race.totals},
        },
    }, workspace_dir)


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def _ids_during(messages: list[dict[str, Any]], run: dict[str, Any]) -> list[int]:
    """The message ids whose files were created while `run`'s process ran."""
    return [m["id"] for m in messages if _when(run["started"]) < _when(m["created_at"]) < _when(run["ended"])]


def _has_all(text: str, facts: list[str]) -> bool:
    return all(fact in text for fact in facts)


def _has_any(text: str, facts: list[str]) -> bool:
    return any(fact in text for fact in facts)


def _reported(stdout: str) -> tuple[int, int] | None:
    """(messages restored, messages now) as a writer process printed them."""
    restored, now = re.search(r"messages restored: (\d+)", stdout), re.search(r"messages now: (\d+)", stdout)
    return (int(restored.group(1)), int(now.group(1))) if restored and now else None


def _written(stdout: str) -> list[int] | None:
    """The ids of the message files a writer process said it wrote."""
    found = re.search(r"message ids written: \[([\d, ]*)\]", stdout)
    return [int(i) for i in found.group(1).split(",") if i.strip()] if found else None


def claims(record: dict[str, Any]) -> Ledger:
    """Every check of notebook 01, decided from `record` alone."""
    ledger = Ledger(claims=CLAIMS)
    facts = record["facts"]
    plant, recall, other = (record["processes"][name] for name in ("plant", "recall", "other"))
    stored = record["sessions"][record["session_id"]]
    by_id = {m["id"]: m for m in stored["messages"]}
    first, reply = by_id.get(0, {"text": "", "created_at": plant["ended"]}), by_id.get(3, {"role": "", "text": ""})

    pids = {plant["pid"], recall["pid"], record["kernel_pid"]}
    ledger.check("C1", "two OS processes, neither of them this kernel; the second started after the first exited",
                 evidence=f"{len(pids)} distinct process ids (plant, recall, this kernel); exit codes "
                          f"{plant['returncode']}, {recall['returncode']}; the second started after the first "
                          f"ended: {_when(recall['started']) > _when(plant['ended'])}",
                 holds=len(pids) == 3 and plant["returncode"] == recall["returncode"] == 0
                 and _when(recall["started"]) > _when(plant["ended"]))
    ledger.check("C1", "the second process was given neither fact: its arguments are the same program, backend, id "
                       "and folder and a question; no variable of its environment holds the facts",
                 evidence=f"same program {recall['program'] == plant['program']}, same arguments but the last "
                          f"{recall['args'][:-1] == plant['args'][:-1]}; its prompt {recall['args'][-1]!r}; "
                          f"variables holding both facts: {record['environment_with_facts']}",
                 holds=recall["program"] == plant["program"] and recall["args"][:-1] == plant["args"][:-1]
                 and not _has_any(recall["args"][-1], facts) and not record["environment_with_facts"])
    ledger.check("C1 S2", "the facts were in a file before the second process started: message_0.json",
                 evidence=f"message_0.json, written before the second process started "
                          f"({_when(first['created_at']) < _when(recall['started'])}): {first['text']!r}",
                 holds=_has_all(first["text"], facts) and _when(first["created_at"]) < _when(recall["started"]))
    ledger.check("C1 S1", "the second process's reply, saved as message_3.json, gives both facts",
                 evidence=f"message_3.json ({reply['role']}): {reply['text']!r}",
                 holds=reply["role"] == "assistant" and _has_all(reply["text"], facts)
                 and 3 in _ids_during(stored["messages"], recall))
    before = [m["id"] for m in stored["messages"] if _when(m["created_at"]) < _when(recall["started"])]
    reported = re.search(r"messages restored: (\d+)", recall["stdout"])
    ledger.check("S1", "the second process restored every message on disk when it started",
                 evidence=f"it reported {reported.group(1) if reported else None} restored; message files "
                          f"written before it started: {before}",
                 holds=reported is not None and int(reported.group(1)) == len(before) > 0)

    names = [f"messages/message_{i}.json" for i in range(len(stored["messages"]))]
    ledger.check("S2", "the session folder holds session.json, agent.json and one file per message",
                 evidence=f"{[name.rsplit('/', 1)[-1] for name in stored['files']]}; roles "
                          f"{[m['role'] for m in stored['messages']]}",
                 holds=sorted(stored["files"]) == sorted(["session.json", "agents/agent_default/agent.json"]
                                                         + [f"agents/agent_default/{n}" for n in names])
                 and [m["role"] for m in stored["messages"]] == ["user", "assistant"] * 2)
    roles = {m["id"]: m["role"] for m in stored["messages"]}
    turns = [[(i, roles[i]) for i in _ids_during(stored["messages"], run)] for run in (plant, recall)]
    ledger.check("S2", "each turn added two message files, the prompt and the reply: 0 and 1 by the first process, "
                       "2 and 3 by the second",
                 evidence=f"by the times in the files: the first process wrote {turns[0]}, the second {turns[1]}",
                 holds=turns == [[(0, "user"), (1, "assistant")], [(2, "user"), (3, "assistant")]])

    theirs = record["sessions"][record["other_session_id"]]
    ledger.check("S3", "another session id got a folder of its own; its first message is its own question",
                 evidence=f"{len(theirs['messages'])} message files, written while it ran: "
                          f"{_ids_during(theirs['messages'], other)}; the first: "
                          f"{theirs['messages'][0]['text'] if theirs['messages'] else None!r}; files of the first id "
                          f"written meanwhile: {_ids_during(stored['messages'], other)}",
                 holds=theirs["exists"] and _ids_during(theirs["messages"], other) == [0, 1]
                 and theirs["messages"][0]["text"] == recall["args"][-1] == other["args"][-1]
                 and _ids_during(stored["messages"], other) == [])
    answer = theirs["messages"][1]["text"] if len(theirs["messages"]) > 1 else ""
    ledger.check("S3", "its reply gives neither fact, where the same question on the first id gave both",
                 evidence=f"its message_1.json: {answer!r}",
                 holds=len(theirs["messages"]) == 2 and not _has_any(answer, facts) and _has_all(reply["text"], facts))

    writers = record["writers"]
    count, prompts = len(writers["prompts"]), list(writers["prompts"].values())
    recount = {}
    for sid, lock in [("no-lock", False), ("with-lock", True)]:
        messages = writers["sessions"][sid]
        recount[sid] = 2 + 2 * count - len(messages)
        at = [m["id"] for m in messages if m["role"] == "user" and m["text"] in prompts]
        said = [_reported(out) for out in writers["stdout"][sid].values()]
        wrote = [_written(out) for out in writers["stdout"][sid].values()]
        codes = list(writers["exit codes"][sid].values())
        if not lock:
            ledger.check("S4", "without a lock every writer restored 2 messages, wrote its turn as messages 2 and 3 and "
                               "exited with 0, yet one turn reached disk",
                         evidence=f"(restored, now) {said}; wrote {wrote}; exit codes {codes}; {len(messages)} "
                                  f"message files; writer prompts under ids {at}",
                         holds=len(said) == count and all(s == (2, 4) for s in said) and codes == [0] * count
                         and all(w == [2, 3] for w in wrote) and len(messages) == 4 and at == [2])
        else:
            named = [m["id"] + 1 < len(messages) and messages[m["id"] + 1]["role"] == "assistant"
                     and messages[m["id"]]["text"].rstrip(".").split()[-1] in messages[m["id"] + 1]["text"]
                     for m in messages if m["id"] in at]
            ledger.check("S4", "with the lock none was lost: every prompt on disk, each followed by its reply",
                         evidence=f"restored by each writer: {sorted(s[0] for s in said if s)}; {len(messages)} "
                                  f"message files; writer prompts under ids {at}, each followed by a reply "
                                  f"naming its fact: {named}",
                         holds=len(messages) == 2 + 2 * count and at == [2 + 2 * i for i in range(count)]
                         and all(named) and sorted(s[0] for s in said if s) == [2 + 2 * i for i in range(count)])
    ledger.equal("S4", "the messages lost the lesson prints agree with a recount from the files",
                 observed=writers["table"], expected=recount, what="printed vs recount")

    return ledger
