"""Notebook 02's ledger: what agent.json holds, when the state reaches it, what the model receives, and the snapshot.

The evidence never comes from the lesson's tables: `agent.json`, the message files and the snapshot are read again from
disk as raw JSON; what the model received is what the model itself kept (the lesson agent's `MeteredModel`); fresh
agents restore every session, the crashed one included; the crash is the lesson's own process, read by its exit status
and what it printed; and two probes repeat the lesson on agents of their own: one tries values that are not JSON, one
reads its own files from inside the model call (a second method beside the lesson's hook).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, Callable
from pathlib import Path
from typing import Any

from strands import Agent
from strands.models import Model
from strands.session import FileSessionManager, SnapshotSessionManager
from strands.storage import LocalFileStorage

from companion.checks import save_record, texts
from companion.models.model_wrapper import WrappedModel
from companion.sessions.session_files import agent_dir, message_files, read_json
from companion.support.ledger import Ledger
from companion.support.workspace import reset_workspace

CLAIMS = {
    "C1": "agent.json keeps your agent.state values beside the SDK's own bookkeeping; a value you set reaches the file "
          "only at your next call to the agent, and a crash before then loses it",
    "S1": "beside the agent's id and timestamps, agent.json holds three blocks of memory: yours, the window's, the SDK's",
    "S2": "agent.state.set refuses a value that is not JSON at once, and writes nothing",
    "S3": "a value set between calls reaches agent.json with the next call's prompt; a process that dies before then "
          "loses it",
    "S4": "messages are for the model, state is for your code: the model never received the state",
    "S5": "a snapshot keeps the whole agent in one file and restores its saved system prompt",
}
BLOCKS = ["state", "conversation_manager_state", "_internal_state"]
BESIDE = ["agent_id", "created_at", "updated_at"]  # the agent's id and two timestamps
SNAPSHOT_KEYS = ["conversation_manager_state", "interrupt_state", "messages", "model_state", "state", "system_prompt"]
ANOTHER_PROMPT = "You are a pirate."  # the new system prompt both restores are given, as in the lesson
NOT_JSON = {"a Python set": lambda: {"memory", "state"}, "a set inside a dict": lambda: {"seen": {1, 2}},
            "an object": lambda: object()}


class _FilesAtCall(WrappedModel):
    """The model, reading a session's files at the moment it is called (not through a hook)."""

    def __init__(self, inner: Model, look: Callable[[], dict[str, Any]]) -> None:
        super().__init__(inner)
        self.look = look
        self.seen: list[dict[str, Any]] = []

    async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncIterable[Any]:
        self.seen.append(self.look())
        async for event in self.inner.stream(messages, *args, **kwargs):
            yield event


def _file_session(model: Model, storage_dir: Path, session_id: str, **options: Any) -> Agent:
    return Agent(model=model, callback_handler=None,
                 session_manager=FileSessionManager(session_id=session_id, storage_dir=str(storage_dir)), **options)


def _refusals(model: Model) -> dict[str, Any]:
    """Values that are not JSON, set on a fresh agent: the error each raised, and what the state holds after."""
    probe = Agent(model=model, callback_handler=None)
    errors = {}
    for name, value in NOT_JSON.items():
        try:
            probe.state.set("probe", value())
            errors[name] = None
        except ValueError as error:
            errors[name] = str(error).split(".")[0]
    return {"errors": errors, "stored": probe.state.get()}


def _timing(model: Model, folder: Path) -> dict[str, Any]:
    """The lesson's set-then-invoke on an agent of its own, whose model reads the files when it is called."""
    folder = reset_workspace(folder)  # emptied, so the check can run again
    path = agent_dir(folder, "probe") / "agent.json"

    def look() -> dict[str, Any]:
        return {"state": read_json(path)["state"], "message files": len(message_files(folder, "probe"))}

    wrapped = _FilesAtCall(model, look)
    probe = _file_session(wrapped, folder, "probe")
    before = path.read_bytes()
    probe.state.set("visits", 1)
    unchanged = path.read_bytes() == before
    after_set = read_json(path)["state"]
    probe("Hello.")
    return {"bytes": len(before), "unchanged after set": unchanged, "after set": after_set, "at call": wrapped.seen[0],
            "message files after": len(message_files(folder, "probe"))}


def _snapshot(model: Model, snapshot_dir: Path, session_id: str) -> dict[str, Any]:
    files = sorted(p for p in Path(snapshot_dir).rglob("*") if p.is_file())
    data = json.loads(files[0].read_text(encoding="utf-8"))["data"] if files else {}
    back = Agent(model=model, callback_handler=None, system_prompt=ANOTHER_PROMPT,
                 session_manager=SnapshotSessionManager(session_id=session_id,
                                                        storage=LocalFileStorage(base_dir=str(snapshot_dir))))
    return {"files": [p.name for p in files], "keys": sorted(data), "messages": texts(data.get("messages", [])),
            "state": data.get("state"), "system prompt": data.get("system_prompt"),
            "restored system prompt": back.system_prompt, "restored messages": len(back.messages)}


def _crashed(model: Model, crash: Any, crash_dir: Path, session_id: str) -> dict[str, Any]:
    """The crashed process (its exit status and what it printed) and what it left: agent.json's state and the message
    files, read from disk, and what a fresh agent restores from them."""
    restored = _file_session(model, crash_dir, session_id)
    return {"returncode": crash.returncode, "stdout": crash.stdout,
            "state_on_disk": read_json(agent_dir(crash_dir, session_id) / "agent.json")["state"],
            "files": [texts([read_json(f)["message"]])[0] for f in message_files(crash_dir, session_id)],
            "restored": {"state": restored.state.get(), "messages": texts(restored.messages)}}


def record(agent: Agent, storage_dir: Path, session_id: str, snapshot_dir: Path, snapshot_session_id: str,
           crash: Any, crash_dir: Path, *, workspace_dir: Path) -> dict[str, Any]:
    """The evidence of notebook 02's run. `agent` is the lesson's agent (its model a `MeteredModel`), its session in
    `storage_dir`; the snapshot session is in `snapshot_dir`; `crash` is the crashed process's run (a `ProgramRun`),
    its session `session_id` in `crash_dir`. The probes write under `workspace_dir`."""
    model = agent.model.inner  # the probes call the model itself, so the lesson agent's record stays its own
    raw = read_json(agent_dir(storage_dir, session_id) / "agent.json")
    restored = _file_session(model, storage_dir, session_id, system_prompt=ANOTHER_PROMPT)
    return save_record({
        "system_prompt": agent.system_prompt,
        "agent_json": {"keys": sorted(raw), **{block: raw.get(block) for block in BLOCKS}},
        "memory_state": agent.state.get(),
        "files": [texts([read_json(f)["message"]])[0] for f in message_files(storage_dir, session_id)],
        "restored": {"state": restored.state.get(), "system_prompt": restored.system_prompt},
        "crash": _crashed(model, crash, Path(crash_dir), session_id),
        "calls": [{"messages": texts(e["messages"]), "system_prompt": e["system_prompt"],
                   "tools": len(e["tool_specs"]), "reply": e["reply"]} for e in agent.model.exchanges],
        "refusals": _refusals(model),
        "timing": _timing(model, Path(workspace_dir) / "probe"),
        "snapshot": _snapshot(model, snapshot_dir, snapshot_session_id),
    }, workspace_dir)


def claims(record: dict[str, Any]) -> Ledger:
    """Every check of notebook 02, decided from `record` alone."""
    ledger = Ledger(claims=CLAIMS)
    saved, memory = record["agent_json"], record["memory_state"]
    ledger.check("C1 S1", "agent.json holds three blocks of memory, beside the agent's id and two timestamps",
                 evidence=f"its keys, read from disk: {saved['keys']}",
                 holds=sorted(saved["keys"]) == sorted(BLOCKS + BESIDE)
                 and all(isinstance(saved[block], dict) for block in BLOCKS))
    errors = record["refusals"]["errors"]
    ledger.check("S2", "set() refuses a value that is not JSON, when it is set",
                 evidence=f"{len(errors)} values tried on a fresh agent: " + "; ".join(
                     f"{name}: {'refused, naming ' + error.split(': ')[-1] if error else 'stored'}"
                     for name, error in errors.items()),
                 holds=bool(errors) and all(error and error.startswith("Value is not JSON serializable")
                                            for error in errors.values()))
    ledger.check("S2", "the refused values were not stored",
                 evidence=f"the fresh agent's state: {record['refusals']['stored']}; the lesson's state keys in "
                          f"memory {sorted(memory)}, in agent.json {sorted(saved['state'])}",
                 holds=record["refusals"]["stored"] == {}
                 and sorted(memory) == sorted(saved["state"]) == ["user", "visits"])
    timing = record["timing"]
    ledger.check("C1 S2", "set() writes nothing: agent.json is unchanged, byte for byte",
                 evidence=f"a probe agent's agent.json after set(): the same {timing['bytes']} bytes: "
                          f"{timing['unchanged after set']}",
                 holds=timing["unchanged after set"] is True)
    at_call = timing["at call"]
    ledger.check("C1 S3", "a value set before a call reaches agent.json with the call's prompt, before the model is called",
                 evidence=f"the probe set visits=1, then called: agent.json's state after set() {timing['after set']}; "
                          f"when the model was called {at_call['state']}, beside {at_call['message files']} message "
                          f"file, the prompt",
                 holds=timing["after set"] == {} and at_call["state"] == {"visits": 1}
                 and at_call["message files"] == 1)
    ledger.check("S3", "the reply's file is written only after the model has answered",
                 evidence=f"the probe's message files when the model was called: {at_call['message files']}; "
                          f"after the call: {timing['message files after']}",
                 holds=at_call["message files"] == 1 and timing["message files after"] == 2)
    crash = record["crash"]
    in_memory = [line for line in crash["stdout"].splitlines() if line.startswith("visits in memory:")]
    ledger.check("C1 S3", "a process that set visits to 2 after its last call and died: a restart reads 1",
                 evidence=f"exit status {crash['returncode']}; it printed {in_memory}; agent.json's state "
                          f"{crash['state_on_disk']}; a fresh restore's {crash['restored']['state']}",
                 holds=crash["returncode"] != 0 and in_memory == ["visits in memory: 2"]
                 and crash["state_on_disk"] == crash["restored"]["state"] == {"visits": 1})
    files = crash["files"]
    ledger.check("S3", "the crashed process's finished turn is on disk, and a restore gets it",
                 evidence=f"message files, roles: {[role for role, _ in files]}; restored: "
                          f"{len(crash['restored']['messages'])} messages, the same: "
                          f"{crash['restored']['messages'] == files}",
                 holds=[role for role, _ in files] == ["user", "assistant"] and crash["restored"]["messages"] == files)
    first = record["calls"][0] if record["calls"] else {"messages": [], "system_prompt": None, "tools": 0}
    received = json.dumps([first["messages"], first["system_prompt"]], ensure_ascii=False)
    ledger.check("S4", "the model never received the state: only the prompt and the system prompt",
                 evidence=f"the call received {first['messages']}, system prompt {first['system_prompt']!r} and "
                          f"{first['tools']} tool specs; 'visits' in it: {'visits' in received}",
                 holds=first["messages"] == record["files"][:1] and first["system_prompt"] == record["system_prompt"]
                 and first["tools"] == 0 and "visits" not in received)
    snapshot = record["snapshot"]
    ledger.check("S5", "the snapshot manager keeps everything in one file",
                 evidence=f"{len(snapshot['files'])} file, {', '.join(snapshot['files'])}: "
                          f"{len(snapshot['messages'])} messages, state {sorted(snapshot['state'] or {})}, and "
                          f"{', '.join(k for k in snapshot['keys'] if k not in ('messages', 'state'))}",
                 holds=snapshot["files"] == ["snapshot_latest.json"] and set(SNAPSHOT_KEYS) <= set(snapshot["keys"])
                 and len(snapshot["messages"]) == 4 and bool(snapshot["state"]))
    restored = record["restored"]
    ledger.check("S5", "a snapshot restore brings back the saved system prompt; a file restore keeps the new one",
                 evidence=f"both restored with {ANOTHER_PROMPT!r}: the snapshot brought back "
                          f"{snapshot['restored system prompt']!r}, the file session kept {restored['system_prompt']!r}",
                 holds=snapshot["restored system prompt"] == record["system_prompt"] != ANOTHER_PROMPT
                 and restored["system_prompt"] == ANOTHER_PROMPT)
    return ledger
