"""Notebook 03's ledger: what a sliding window lets each model call receive, checked at the model and on disk.

The evidence never comes from the lesson's tables or its hook alone: each call's messages are the ones the model
itself received (a `MeteredModel` inside each run's agent), the message files and `agent.json` are read from disk, and
each session is restored by a fresh agent from its files.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from strands import Agent
from strands.agent.conversation_manager import SlidingWindowConversationManager
from strands.session import FileSessionManager

from companion.checks import save_record, texts
from companion.models.model_calls import is_pinned
from companion.sessions.session_files import agent_dir, message_files, read_json
from companion.support.ledger import Ledger

CLAIMS = {
    "C1": "the fact reaches the call of turn w/2 + 1, is gone from turn w/2 + 2, and stays on disk",
    "S1": "the window keeps the last w messages; the default w is 40",
    "S2": "the trim comes at the end of an invocation",
    "S3": "a BeforeModelCallEvent hook records what each call receives; the reply follows it",
    "S4": "nothing is deleted, and a restore gets the same window",
    "S5": "the message window forgets long before the context window fills",
    "S6": "per_turn=True loses the fact one turn earlier",
    "S7": "pin_first=2 keeps turn 1 at two messages a call, and a restore loses the pin",
}


def _run(agent: Agent, storage_dir: Path, session_id: str, window: dict[str, Any]) -> dict[str, Any]:
    """One conversation as the model received it and as its files hold it; the session restored from the files."""
    files = message_files(storage_dir, session_id)
    state = read_json(agent_dir(storage_dir, session_id) / "agent.json")["conversation_manager_state"]
    restored = Agent(
        model=agent.model,
        session_manager=FileSessionManager(session_id=session_id, storage_dir=str(storage_dir)),
        conversation_manager=SlidingWindowConversationManager(**window),
        callback_handler=None,
    )
    return {
        "calls": [{"messages": texts(e["messages"]), "reply": e["reply"]} for e in agent.model.exchanges],
        "input_tokens": [call["input"] for call in agent.model.calls],
        "kept": texts(agent.messages),
        "pinned_in_memory": sum(is_pinned(m) for m in agent.messages),
        "files": [texts([read_json(f)["message"]])[0] for f in files],
        "pins_in_files": sum(is_pinned(read_json(f)["message"]) for f in files),
        "removed": state["removed_message_count"],
        "restored": texts(restored.messages),
    }


def record(runs: dict[str, tuple[Agent, Path]], hook_record: list[list[dict]], prompts: list[str], *,
           codename: str, session_id: str, window_size: int, workspace_dir: Path) -> dict[str, Any]:
    """The evidence of notebook 03's run. `runs` maps "plain", "per_turn" and "pinned" to (agent, storage folder);
    `hook_record` is the plain run's hook record (what the lesson's hook copied before each call)."""
    windows = {"plain": {}, "per_turn": {"per_turn": True}, "pinned": {"pin_first": 2}}
    model = runs["plain"][0].model
    fresh = Agent(model=model, callback_handler=None).conversation_manager
    return save_record({
        "window_size": window_size,
        "codename": codename,
        "prompts": prompts,
        "context_window": model.context_window_limit,
        "runs": {name: _run(agent, folder, session_id, {"window_size": window_size, **windows[name]})
                 for name, (agent, folder) in runs.items()},
        "hook": [texts(messages) for messages in hook_record],
        "default_window": {"fresh_agent": fresh.window_size, "signature": inspect.signature(
            SlidingWindowConversationManager).parameters["window_size"].default},
    }, workspace_dir)


def _with_plant(run: dict[str, Any], plant: list[str]) -> list[bool]:
    return [plant in call["messages"] for call in run["calls"]]


def _turns(flags: list[bool]) -> list[int]:
    return [turn for turn, flag in enumerate(flags, start=1) if flag]


def claims(record: dict[str, Any]) -> Ledger:
    """Every check of notebook 03, decided from `record` alone."""
    ledger = Ledger(claims=CLAIMS)
    w, prompts = record["window_size"], record["prompts"]
    turns, half, plant = len(prompts), record["window_size"] // 2, ["user", record["prompts"][0]]
    plain, per_turn, pinned = (record["runs"][name] for name in ("plain", "per_turn", "pinned"))
    has = _with_plant(plain, plant)
    sizes = [len(call["messages"]) for call in plain["calls"]]

    ledger.equal("S1", "without a pin, a call receives at most w + 1 messages: w/2 turns and its prompt",
                 observed=sizes, expected=[min(2 * t - 1, w + 1) for t in range(1, turns + 1)],
                 what="messages per call, at the model")
    conversation = [m for call in plain["calls"] for m in (call["messages"][-1], ["assistant", call["reply"]])]
    ledger.check("S1", "after the last turn, agent.messages holds the last w messages",
                 evidence=f"{len(plain['kept'])} kept, the last of {len(conversation)} said",
                 holds=plain["kept"] == conversation[-w:])
    default = record["default_window"]
    ledger.check("S1", "an Agent without a conversation manager gets a window of 40",
                 evidence=f"a fresh Agent: {default['fresh_agent']}; the signature's default: {default['signature']}",
                 holds=default["fresh_agent"] == default["signature"] == 40)
    if turns >= half + 1:
        ledger.check("C1 S2", "the call of turn w/2 + 1 still receives turn 1",
                     evidence=f"turn {half + 1}: {sizes[half]} messages, turn 1 among them: {has[half]}",
                     holds=has[half] and sizes[half] == w + 1)
    else:
        ledger.skip("C1 S2", "the call of turn w/2 + 1 still receives turn 1",
                    reason=f"{turns} turns, fewer than w/2 + 1 = {half + 1}")
    if turns >= half + 2:
        ledger.check("C1 S2", "from turn w/2 + 2 on, no call receives turn 1",
                     evidence=f"turn 1 received by the calls of turns {_turns(has)}",
                     holds=has == [t <= half + 1 for t in range(1, turns + 1)])
    else:
        ledger.skip("C1 S2", "from turn w/2 + 2 on, no call receives turn 1",
                    reason=f"{turns} turns, fewer than w/2 + 2 = {half + 2}")
    hook_same = [a == b["messages"] for a, b in zip(record["hook"], plain["calls"])]
    ledger.check("S3", "the hook's record is what the model received, call by call",
                 evidence=f"{sum(hook_same)} of {len(plain['calls'])} calls identical",
                 holds=len(record["hook"]) == len(plain["calls"]) and all(hook_same))
    last_reply = plain["calls"][-1]["reply"]
    codename_said = record["codename"] in last_reply
    ledger.check("S3", "the last answer gives the codename only if its call received turn 1",
                 evidence=f"turn 1 in the last call: {has[-1]}; the reply: {last_reply.strip()!r}",
                 holds=codename_said == has[-1])
    ledger.check("C1 S4", "every message stays on disk, turn 1 first",
                 evidence=f"{len(plain['files'])} message files for {turns} turns; the first: {plain['files'][0]}",
                 holds=len(plain["files"]) == 2 * turns and plain["files"][0] == plant)
    ledger.check("S4", "agent.json counts what the window removed",
                 evidence=f"removed_message_count {plain['removed']}; files {len(plain['files'])} - kept "
                          f"{len(plain['kept'])} = {len(plain['files']) - len(plain['kept'])}",
                 holds=plain["removed"] == len(plain["files"]) - len(plain["kept"]) == max(0, 2 * turns - w))
    ledger.check("S4", "a session restored from its files gets the kept window",
                 evidence=f"{len(plain['restored'])} restored; the last files after skipping "
                          f"{plain['removed']}: {plain['files'][plain['removed']:] == plain['restored']}",
                 holds=plain["restored"] == plain["kept"] == plain["files"][plain["removed"]:])
    if not has[-1]:
        largest = max(plain["input_tokens"])
        ledger.check("S5", "the fact was gone while every call used under 1% of the context window",
                     evidence=f"largest call {largest:,} of {record['context_window']:,} input tokens",
                     holds=largest < 0.01 * record["context_window"])
    else:
        ledger.skip("S5", "the fact was gone while every call used under 1% of the context window",
                    reason="the last call still received turn 1")
    per_turn_has = _with_plant(per_turn, plant)
    if turns >= half + 1:
        ledger.check("S6", "per_turn=True: turn 1 is gone from turn w/2 + 1",
                     evidence=f"turn 1 received by the calls of turns {_turns(per_turn_has)}",
                     holds=per_turn_has == [t <= half for t in range(1, turns + 1)])
    else:
        ledger.skip("S6", "per_turn=True: turn 1 is gone from turn w/2 + 1",
                    reason=f"{turns} turns, fewer than w/2 + 1 = {half + 1}")
    pinned_has = _with_plant(pinned, plant)
    ledger.check("S7", "pin_first=2: every call receives turn 1",
                 evidence=f"turn 1 in {sum(pinned_has)} of {len(pinned_has)} calls; the last reply: "
                          f"{pinned['calls'][-1]['reply'].strip()!r}",
                 holds=bool(pinned_has) and all(pinned_has))
    extra = [len(p["messages"]) - len(c["messages"]) for p, c in zip(pinned["calls"], plain["calls"])]
    ledger.equal("S7", "the price: two more messages on every call after the first trim",
                 observed=extra, expected=[0 if t <= half + 1 else 2 for t in range(1, turns + 1)],
                 what="messages received, pin_first=2 minus plain, per turn")
    if pinned["removed"] > 0:
        ledger.check("S7", "the pin lives in memory only, and a restore loses turn 1",
                     evidence=f"pinned in memory: {pinned['pinned_in_memory']}, in the files: "
                              f"{pinned['pins_in_files']}; turn 1 among the {len(pinned['restored'])} restored: "
                              f"{plant in pinned['restored']}",
                     holds=pinned["pinned_in_memory"] == 2 and pinned["pins_in_files"] == 0
                     and plant in pinned["kept"] and plant not in pinned["restored"])
    else:
        ledger.skip("S7", "the pin lives in memory only, and a restore loses turn 1",
                    reason="the pinned run's window removed nothing")
    return ledger
