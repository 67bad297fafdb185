"""Notebook 05's ledger: when the summarizing manager summarizes, counted at the model, and what its summary is.

The evidence never comes from the lesson's tables or its hook: each run's calls are the ones the model itself received
(the `MeteredModel` inside each run's agent), each turn's projected input is recomputed from the session files (the
previous reply's reported usage plus the model's estimate of the new prompt, as the SDK projects it), the summary is
read from agent.json, and the SDK's own `SummarizingConversationManager` is run again on the offline
model with the small run's settings (a second method, and on Bedrock the SDK's own manager beside the companion's
Bedrock-safe subclass, which the notebook swaps in there).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from strands import Agent
from strands._async import run_async
from strands.agent.conversation_manager import SummarizingConversationManager
from strands.agent.conversation_manager.conversation_manager import DEFAULT_COMPRESSION_THRESHOLD
from strands.models import Model

from companion.checks import save_record
from companion.models.metering import MeteredModel
from companion.models.offline_model import OfflineModel
from companion.models.summary_calls import sent_to_summarizer
from companion.sessions.session_files import agent_dir, message_files, read_json
from companion.support.ledger import Ledger
from companion.support.messages import message_text

CLAIMS = {
    "C1": "it waits for context pressure, not message count, and its user-role summary can lose facts",
    "S1": "before each call it compares projected tokens / context window with the threshold; the default is 0.7",
    "S2": "below the threshold it never fires, however many messages it holds",
    "S3": "the threshold is a ratio of the context window: the same one fires on a smaller window",
    "S4": "the summary is a user-role message the model wrote; it kept the codename and lost other facts",
}

LESSON_RUNS = ("quiet", "small")
SDK_SESSION = "sdk"


def _calls(exchanges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each call as the model received it: a summary call's messages to summarize, a turn call's roles."""
    calls = []
    for exchange in exchanges:
        sent = sent_to_summarizer(exchange["messages"])
        calls.append({"kind": "turn" if sent is None else "summary",
                      "roles": [message["role"] for message in exchange["messages"]],
                      "sent": [list(part) for part in sent or []],
                      "reply": exchange["reply"], "answered": exchange["answered"]})
    return calls


def _projected(model: Model, prompts: list[dict[str, Any]], usages: list[dict[str, int]]) -> list[int]:
    """Each turn's projected input as the SDK computes it: on turn 1 the model's estimate of the prompt; then the
    previous reply's reported usage (input + output) plus the estimate of the new prompt."""
    found = []
    for turn, prompt in enumerate(prompts):
        estimate = run_async(lambda prompt=prompt, first=turn == 0: model.count_tokens(
            [prompt], **({"tool_specs": []} if first else {})))
        found.append(estimate if turn == 0 else
                     usages[turn - 1]["inputTokens"] + usages[turn - 1]["outputTokens"] + estimate)
    return found


def _lesson_run(agent: Agent, folder: Path, session_id: str) -> dict[str, Any]:
    """One of the lesson's runs: its calls at the model, its projections from its files, its agent.json."""
    stored = [read_json(path)["message"] for path in message_files(folder, session_id)]
    prompts = [{"role": "user", "content": m["content"]} for m in stored[0::2]]
    usages = [m["metadata"]["usage"] for m in stored[1::2]]
    state = read_json(agent_dir(folder, session_id) / "agent.json")["conversation_manager_state"]
    summary = state.get("summary_message")
    return {
        "manager": type(agent.conversation_manager).__name__,
        "threshold": agent.conversation_manager._compression_threshold,
        "window": agent.model.context_window_limit,
        "calls": _calls(agent.model.exchanges),
        "projected": _projected(agent.model, prompts, usages),
        "summary": [summary["role"], message_text(summary)] if summary else None,
    }


def _sdk_run(prompts: list[str], threshold: float, window: int, preserve: int) -> dict[str, Any]:
    """The SDK's own manager, same settings, on the offline model (the lesson's manager is its subclass)."""
    model = MeteredModel(OfflineModel(context_window_limit=window))
    manager = SummarizingConversationManager(preserve_recent_messages=preserve,
                                             proactive_compression={"compression_threshold": threshold})
    agent = Agent(model=model, conversation_manager=manager, callback_handler=None)
    for prompt in prompts:
        agent(prompt)
    usages = [{"inputTokens": c["input"], "outputTokens": c["output"]} for c in model.calls if c["kind"] == "turn"]
    messages = [{"role": "user", "content": [{"text": prompt}]} for prompt in prompts]
    return {"manager": type(manager).__name__, "threshold": threshold, "window": window,
            "calls": _calls(model.exchanges), "projected": _projected(model, messages, usages)}


def record(runs: dict[str, tuple[Agent, Path]], prompts: list[str], *, codename: str, session_id: str,
           preserve_recent_messages: int, workspace_dir: Path) -> dict[str, Any]:
    """The evidence of notebook 05's run. `runs` maps "quiet" and "small" to (agent, session folder); each agent's
    model is a `MeteredModel`."""
    lesson = {name: _lesson_run(agent, folder, session_id) for name, (agent, folder) in runs.items()}
    small = lesson["small"]
    return save_record({
        "prompts": prompts,
        "codename": codename,
        "preserve_recent_messages": preserve_recent_messages,
        "default_threshold": {
            "with_true": SummarizingConversationManager(proactive_compression=True)._compression_threshold,
            "constant": DEFAULT_COMPRESSION_THRESHOLD,
            "without": SummarizingConversationManager()._compression_threshold,
        },
        "runs": lesson,
        "sdk": _sdk_run(prompts, small["threshold"], small["window"], preserve_recent_messages),
    }, workspace_dir)


# ---------------------------------------------------------------- deciding from the record


def _turns(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Per turn, from the order of the calls alone: the summary calls that came before the turn's answered call, and
    how many messages the agent held as the turn began (what that call received, plus each summary's n messages that
    became one)."""
    turns, pending = [], []
    for call in run["calls"]:
        if call["kind"] == "summary":
            pending.append(call)
        elif call["answered"]:
            held = len(call["roles"]) + sum(len(c["sent"]) - 1 for c in pending)
            turns.append({"summaries": pending, "held": held})
            pending = []
    return turns


def _over(run: dict[str, Any]) -> list[bool]:
    return [tokens / run["window"] >= run["threshold"] for tokens in run["projected"]]


def _at(flags: list[bool]) -> list[int]:
    return [turn for turn, flag in enumerate(flags, start=1) if flag]


SDK_RUN = "a separate run of the SDK's own manager, same turns and settings"


def _rule(ledger: Ledger, ref: str, name: str, run: dict[str, Any], preserve: int) -> None:
    turns = _turns(run)
    calls = [len(t["summaries"]) for t in turns]
    held = [t["held"] for t in turns]
    expected = [int(over and h > preserve) for over, h in zip(_over(run), held)]
    source = "reported usage" if name == SDK_RUN else "files"
    ledger.check(ref, f"{name}: a summary call on exactly the turns over the threshold that hold more than "
                      "preserve_recent_messages",
                 evidence=f"calls per turn (model) {calls}; projected ({source}) {run['projected']} vs "
                          f"{run['threshold'] * run['window']:,.4g} tokens; held {held}",
                 holds=len(turns) == len(run["projected"]) and calls == expected)


_WORD = re.compile(r"[A-Za-z]{5,}")


def _lost(prompt: str, summary: str) -> bool:
    """A folded prompt is lost when none of its words of five letters or more is in the summary."""
    return not any(word.lower() in summary.lower() for word in _WORD.findall(prompt))


def claims(record: dict[str, Any]) -> Ledger:
    """Every check of notebook 05, decided from `record` alone."""
    ledger = Ledger(claims=CLAIMS)
    preserve, runs, sdk = record["preserve_recent_messages"], record["runs"], record["sdk"]
    quiet, small = (runs[name] for name in LESSON_RUNS)

    default = record["default_threshold"]
    ledger.check("S1", "proactive_compression=True sets the SDK's default threshold, 0.7; without it there is none",
                 evidence=f"a manager built with True: {default['with_true']}; the SDK's constant: "
                          f"{default['constant']}; built without: {default['without']}",
                 holds=default["with_true"] == default["constant"] == 0.7 and default["without"] is None)
    _rule(ledger, "C1 S1", "small", small, preserve)
    _rule(ledger, "C1 S1", SDK_RUN, sdk, preserve)

    quiet_held = [t["held"] for t in _turns(quiet)]
    quiet_calls = sum(len(t["summaries"]) for t in _turns(quiet))
    ledger.check("C1 S2", "quiet: no turn's projection reaches the threshold, and no summary call comes",
                 evidence=f"largest projection from the files: {max(quiet['projected'])} tokens, under "
                          f"{quiet['threshold']:g} × {quiet['window']:,}: {not any(_over(quiet))}; held up to "
                          f"{max(quiet_held)} messages; summary calls at the model: {quiet_calls}",
                 holds=not any(_over(quiet)) and quiet_calls == 0)
    fired = [t["held"] for t in _turns(small) if t["summaries"]]
    if fired and quiet_calls == 0:
        ledger.check("C1 S2", "not message count: the small run summarized holding fewer messages than the quiet "
                              "run held without a summary",
                     evidence=f"small: first summary call holding {fired[0]} messages; quiet: held {quiet_held}, "
                              "no summary call (both from the calls)",
                     holds=fired[0] < max(quiet_held))
    else:
        ledger.skip("C1 S2", "not message count: the small run summarized holding fewer messages than the quiet "
                             "run held without a summary",
                    reason="with these parameters the small run never summarized, or the quiet run did")

    same = small["threshold"] == quiet["threshold"] and small["window"] < quiet["window"]
    small_first = next((turn for turn, t in enumerate(_turns(small), start=1) if t["summaries"]), None)
    if same and quiet_calls == 0 and small_first is not None:
        ledger.check("C1 S3", "the same threshold fires on the smaller window, never on the larger one",
                     evidence=f"{small['threshold']:g} × {quiet['window']:,} = "
                              f"{small['threshold'] * quiet['window']:,.0f} tokens: no summary call; × "
                              f"{small['window']:,} = {small['threshold'] * small['window']:,.0f} tokens: first "
                              f"summary call at turn {small_first}, the first over it by the files "
                              f"({_at(_over(small))[:1]})",
                     holds=_at(_over(small))[:1] == [small_first])
    else:
        ledger.skip("C1 S3", "the same threshold fires on the smaller window, never on the larger one",
                    reason="with these parameters the small window never fired, or the quiet run did")

    summaries = [call for t in _turns(small) for call in t["summaries"]]
    summary = small["summary"]
    if summary and summaries:
        role, text = summary
        ledger.equal("C1 S4", "the summary is a user-role message", observed=role, expected="user",
                     what="role of summary_message in agent.json")
        ledger.check("S4", "the model wrote it: its text is the reply to the last summary call",
                     evidence=f"agent.json's summary, as the model answered it: "
                              f"{text.strip() == summaries[-1]['reply'].strip()}",
                     holds=text.strip() == summaries[-1]["reply"].strip())
        prompts = record["prompts"]
        sent = [said for call in summaries for _, said in call["sent"] if said in prompts]
        lost = [said for said in sent if _lost(said, text)]
        ledger.check("C1 S4", "it kept the codename and lost facts: folded prompts with none of their words of five "
                              "letters or more in it",
                     evidence=f"codename in the summary: {record['codename'] in text}; {len(lost)} of {len(sent)} "
                              f"folded prompts lost, e.g. {lost[:2]}",
                     holds=record["codename"] in text and bool(lost))
    else:
        for ref, claim in (("C1 S4", "the summary is a user-role message"),
                           ("S4", "the model wrote it: its text is the reply to the last summary call"),
                           ("C1 S4", "it kept the codename and lost facts: folded prompts with none of their words "
                                     "of five letters or more in it")):
            ledger.skip(ref, claim, reason="the small run wrote no summary with these parameters")
    return ledger
