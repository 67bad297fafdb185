"""Notebook 04's ledger: what `agent.state` and a state-manifest hook put in front of the model, checked at the model.

The evidence never comes from the lesson's tables or its `BeforeModelCallEvent` hook: each call's system prompt,
messages and tool specs are the ones the model itself received (a `MeteredModel` inside each agent), the state and the
message files are read from the session's files on disk, and the tokens are recounted from the text each call received
(characters / 4, the rule the offline model reports by) beside the usage the model reported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from strands import Agent

from companion.checks import save_record, texts
from companion.measure.cost import recount_exchange
from companion.models.backends import resolve_bedrock_endpoint
from companion.models.offline_model import OfflineModel
from companion.sessions.session_files import agent_dir, message_files, read_json
from companion.support.ledger import Ledger

CLAIMS = {
    "C1": "state is saved but never sent; a hook that writes it into the system prompt before every invocation brings "
          "the forgotten fact back",
    "S1": "agent.state is saved in agent.json, but no model call receives it; once turn 1 leaves the window the fact is "
          "gone",
    "S2": "a BeforeInvocationEvent hook puts the state in the system prompt of every model call, and the last turn "
          "answers",
    "S3": "rebuilt from a stored base, every model call carries exactly one manifest; appending adds one an invocation",
    "S4": "the manifest costs the same tokens on every model call; pin_first=2 costs nothing until turn 1 would leave "
          "the window, then turn 1's two messages on every model call",
    "S5": "a restore skips as many stored messages as the window had removed, so the pinned turn 1 does not come back; "
          "the state does and the hook rebuilds the manifest",
}

MANIFEST = "<manifest>"


def _calls(agent: Agent) -> list[dict[str, Any]]:
    """Each call as the model received it (the agent's model is a `MeteredModel`), with its reported and recounted
    input tokens."""
    model = agent.model
    reported = [call["input"] for call in model.calls]
    return [{"system_prompt": exchange["system_prompt"] or "", "messages": texts(exchange["messages"]),
             "tool_specs": json.dumps(exchange["tool_specs"]), "reply": exchange["reply"],
             "input": tokens, "recounted": recount_exchange(exchange)[0]}
            for exchange, tokens in zip(model.exchanges, reported, strict=True)]


def _session(sessions_dir: Path, session_id: str) -> dict[str, Any]:
    """The session as its files hold it: agent.json's state, and every message file in order."""
    return {"state_on_disk": read_json(agent_dir(sessions_dir, session_id) / "agent.json")["state"],
            "files": texts([read_json(path)["message"] for path in message_files(sessions_dir, session_id)])}


def _offline_rules(model: Any) -> bool:
    """Whether input tokens are counted by the offline model's rule: offline, or behind the local Bedrock endpoint."""
    while not isinstance(model, OfflineModel) and hasattr(model, "inner"):
        model = model.inner
    return isinstance(model, OfflineModel) or resolve_bedrock_endpoint() == "local"


def record(runs: dict[str, Agent], restarts: dict[str, tuple[Agent, Agent]], prompts: list[str], *, codename: str,
           base_prompt: str, window_size: int, sessions_dir: Path, workspace_dir: Path) -> dict[str, Any]:
    """The evidence of notebook 04's run. `runs` maps the session ids "no-hook", "hook", "append" and "pinned" to
    their agents; `restarts` maps "pin-restart" and "hook-restart" to (the agent before the restart, the new agent on
    the same session that asked the question)."""
    return save_record({
        "codename": codename,
        "base_prompt": base_prompt,
        "window_size": window_size,
        "prompts": prompts,
        "offline_rules": _offline_rules(runs["no-hook"].model),
        "runs": {session_id: {"calls": _calls(agent), **_session(sessions_dir, session_id)}
                 for session_id, agent in runs.items()},
        "restarts": {session_id: {"before": texts(before.messages),
                                  "removed_before": before.conversation_manager.removed_message_count,
                                  "state_restored": after.state.get(), "calls": _calls(after),
                                  **_session(sessions_dir, session_id)}
                     for session_id, (before, after) in restarts.items()},
    }, workspace_dir)


def _carries(call: dict[str, Any], codename: str) -> bool:
    """Whether a call received the codename anywhere: system prompt, messages or tool specs."""
    return codename in call["system_prompt"] + json.dumps(call["messages"]) + call["tool_specs"]


def _manifest(system_prompt: str) -> str:
    return system_prompt.partition(MANIFEST)[2].partition("</manifest>")[0].strip()


def _stored_turns(start: int | None, call: dict[str, Any]) -> str:
    """Which turns a restored call received, read back from the message files (two files a turn, from 0)."""
    if start is None:
        return "messages that are not a run of the session's files"
    return f"stored turns {start // 2 + 1}-{(start + len(call['messages']) - 1) // 2 + 1}"


def _turns(flags: list[bool]) -> list[int]:
    return [turn for turn, flag in enumerate(flags, start=1) if flag]


def _run_of_files(files: list[list[str]], messages: list[list[str]]) -> int | None:
    """Where `messages` start as a run of consecutive message files (None: they are not one)."""
    return next((k for k in range(len(files)) if files[k:k + len(messages)] == messages), None)


def claims(record: dict[str, Any]) -> Ledger:
    """Every check of notebook 04, decided from `record` alone."""
    ledger = Ledger(claims=CLAIMS)
    codename, base, prompts = record["codename"], record["base_prompt"], record["prompts"]
    turns, half, plant = len(prompts), record["window_size"] // 2, ["user", prompts[0]]
    plain, hooked, appended, pinned = (record["runs"][name] for name in ("no-hook", "hook", "append", "pinned"))
    offline = record["offline_rules"]  # input tokens are characters / 4, and two runs' replies are the same words
    shape = (lambda messages: messages) if offline else _shape  # a real model's replies differ from run to run
    has_plant = {name: [plant in call["messages"] for call in run["calls"]] for name, run in record["runs"].items()}

    # S1: saved, but not sent
    ledger.equal("C1 S1", "state is saved: agent.json of the session without the hook holds the codename",
                 observed=plain["state_on_disk"], expected={"codename": codename}, what="state in agent.json")
    elsewhere = [turn for turn, call in enumerate(plain["calls"], start=1)
                 if _carries(_without_turn_1(call, plant), codename)]
    ledger.check("C1 S1", "without the hook, a model call carries the codename only in turn 1's messages",
                 evidence=f"{len(plain['calls'])} model calls; those carrying it in their system prompt, tool specs or "
                          f"other messages: {elsewhere or 'none'}",
                 holds=not elsewhere and len(plain["calls"]) == turns)
    late = plain["calls"][half + 1:]  # the calls from turn w/2 + 2 on
    gone, unanswered = ("without the hook, no model call from turn w/2 + 2 on receives the codename",
                        "without the hook, the last turn does not name the codename")
    if late:
        carrying = [turn for turn, call in enumerate(late, start=half + 2) if _carries(call, codename)]
        ledger.check("C1 S1", gone, holds=not carrying,
                     evidence=f"w = {2 * half}: model calls of turns {half + 2}-{turns}; turns whose call carries it: "
                              f"{carrying or 'none'}")
        reply = plain["calls"][-1]["reply"]
        ledger.check("S1", unanswered, evidence=f"reply: {reply.strip()!r}", holds=codename not in reply)
    else:
        reason = f"{turns} turns: turn 1 is still in the window at the last turn"
        ledger.skip("C1 S1", gone, reason=reason)
        ledger.skip("S1", unanswered, reason=reason)

    # S2: the hook sends the state
    in_prompt = [codename in call["system_prompt"] for call in hooked["calls"]]
    same = sum(shape(h["messages"]) == shape(p["messages"]) for h, p in zip(hooked["calls"], plain["calls"]))
    ledger.check("C1 S2", "the hook, the one difference, puts the codename in the system prompt of every model call",
                 evidence=f"codename in {sum(in_prompt)} of {len(in_prompt)} system prompts; the same messages as "
                          f"without the hook in {same} model calls; turns receiving turn 1: without "
                          f"{_turns(has_plant['no-hook'])}, with {_turns(has_plant['hook'])}",
                 holds=all(in_prompt) and len(in_prompt) == turns == same)
    manifests = {_manifest(call["system_prompt"]) for call in hooked["calls"]}
    saved = json.dumps(hooked["state_on_disk"], sort_keys=True)
    ledger.check("S2", "the manifest each model call received is the state agent.json saved, as JSON",
                 evidence=f"manifests received: {sorted(manifests)}; state in agent.json: {saved}",
                 holds=manifests == {saved})
    last = hooked["calls"][-1]
    ledger.check("C1 S2", "with the hook, the last turn answers with the codename",
                 evidence=f"reply: {last['reply'].strip()!r}; turn 1 among the last model call's messages: "
                          f"{has_plant['hook'][-1]}",
                 holds=codename in last["reply"])

    # S3: one manifest per call
    counts = [call["system_prompt"].count(MANIFEST) for call in hooked["calls"]]
    ledger.equal("S3", "rebuilt from base_prompt: every model call carries exactly one manifest",
                 observed=counts, expected=[1] * turns, what="<manifest> blocks per model call, at the model")
    prompts_sent = {call["system_prompt"] for call in hooked["calls"]}
    ledger.check("S3", "the rebuilt system prompt is the same text on every model call, base_prompt first",
                 evidence=f"{len(prompts_sent)} distinct system prompt(s) received",
                 holds=len(prompts_sent) == 1 and next(iter(prompts_sent)).startswith(base))
    appended_counts = [call["system_prompt"].count(MANIFEST) for call in appended["calls"]]
    ledger.equal("S3", "appended to the current prompt, the model call of turn t carries t manifests",
                 observed=appended_counts, expected=list(range(1, turns + 1)),
                 what="<manifest> blocks per model call, at the model")

    # S4: the price, beside pin_first
    price = "the manifest costs the same tokens on every model call, from turn 1"
    if offline:
        reported = [h["input"] - p["input"] for h, p in zip(hooked["calls"], plain["calls"])]
        recounted = [h["recounted"] - p["recounted"] for h, p in zip(hooked["calls"], plain["calls"])]
        ledger.check("S4", price, evidence=f"with minus without the hook, input tokens per model call: reported {reported}; "
                                           f"recounted from the text received {recounted}",
                     holds=reported == recounted and len(set(reported)) == 1 and reported[0] > 0)
    else:
        ledger.skip("S4", price, reason="a real model's tokenizer, not characters / 4, counts the manifest")
    early = min(half + 1, turns)  # the calls up to turn w/2 + 1
    same_early = [shape(q["messages"]) == shape(p["messages"]) and (q["input"] == p["input"] or not offline)
                  for q, p in zip(pinned["calls"][:early], plain["calls"][:early])]
    ledger.check("S4", "pin_first=2 sends nothing extra up to turn w/2 + 1",
                 evidence=f"w = {2 * half}: model calls 1-{early}: the same messages and input tokens as without the pin in "
                          f"{sum(same_early)} of {early}",
                 holds=len(same_early) == early and all(same_early))
    if turns > half + 1:
        turn_1 = [plant, ["assistant", pinned["calls"][0]["reply"]]]
        on_top = [shape(q["messages"]) == shape(turn_1 + p["messages"])
                  for q, p in zip(pinned["calls"][half + 1:], plain["calls"][half + 1:])]
        ledger.check("S4", "from turn w/2 + 2 on, pin_first=2 sends turn 1's two messages on top of the window",
                     evidence=f"w = {2 * half}: model calls {half + 2}-{turns}: turn 1's two messages, then exactly the "
                              f"unpinned model call's "
                              f"messages, in {sum(on_top)} of {len(on_top)}; last reply "
                              f"{pinned['calls'][-1]['reply'].strip()!r}",
                     holds=len(on_top) == turns - half - 1 and all(on_top) and codename in pinned["calls"][-1]["reply"])
    else:
        ledger.skip("S4", "from turn w/2 + 2 on, pin_first=2 sends turn 1's two messages on top of the window",
                    reason=f"{turns} turns: no turn after w/2 + 1")

    # S5: after a restart
    pin, hook = record["restarts"]["pin-restart"], record["restarts"]["hook-restart"]
    pin_call, hook_call = pin["calls"][-1], hook["calls"][-1]
    restored = {name: (run["state_on_disk"].get("codename"), run["state_restored"].get("codename"))
                for name, run in record["restarts"].items()}
    ledger.check("C1 S5", "a restore reads agent.state back from agent.json, in both sessions",
                 evidence=f"codename (in agent.json, restored): {restored}",
                 holds=set(restored.values()) == {(codename, codename)})
    pin_start = _run_of_files(pin["files"], pin_call["messages"])
    hook_start = _run_of_files(hook["files"], hook_call["messages"])
    skipped = {"pin-restart": (pin_start, pin["removed_before"]), "hook-restart": (hook_start, hook["removed_before"])}
    ledger.check("S5", "a restore skips as many stored messages as the window had removed, in both sessions",
                 evidence="stored messages the restored model call skipped, and those the window removed before the "
                          "restart: " + "; ".join(f"{name} {start} and {removed}" for name, (start, removed) in skipped.items()),
                 holds=all(start == removed for start, removed in skipped.values()))
    pin_claim = "after a restart, the pinned agent loses turn 1 and its model call receives the codename nowhere"
    if pin["removed_before"] > 0:
        ledger.check("S5", pin_claim,
                     evidence=f"turn 1 in memory before: {plant in pin['before']}; the model call received "
                              f"{_stored_turns(pin_start, pin_call)}; codename in it {_carries(pin_call, codename)}; "
                              f"reply {pin_call['reply'].strip()!r}",
                     holds=plant in pin["before"] and bool(pin_start) and not _carries(pin_call, codename)
                     and codename not in pin_call["reply"])
    else:
        ledger.skip("S5", pin_claim, reason="the pinned window removed nothing before the restart")
    in_messages = codename in json.dumps(hook_call["messages"])
    in_manifest = codename in _manifest(hook_call["system_prompt"])
    ledger.check("C1 S5", "after a restart, the hook rebuilds the manifest from the restored state, and it answers",
                 evidence=f"the model call received {_stored_turns(hook_start, hook_call)}; codename in the manifest "
                          f"{in_manifest}, in messages {in_messages}; reply {hook_call['reply'].strip()!r}",
                 holds=in_manifest and codename in hook_call["reply"] and hook_start is not None
                 and (not in_messages or hook_start == 0))
    return ledger


def _shape(messages: list[list[str]]) -> list[list[str]]:
    """The messages with the user's words and the assistant's turns: two runs of one script on a real model have the
    same shape, though its replies differ in their words."""
    return [[role, text if role == "user" else ""] for role, text in messages]


def _without_turn_1(call: dict[str, Any], plant: list[str]) -> dict[str, Any]:
    """The call without turn 1's two messages (the plant and the reply after it), when it holds them."""
    messages = call["messages"]
    if plant in messages:
        start = messages.index(plant)
        messages = messages[:start] + messages[start + 2:]
    return {**call, "messages": messages}
