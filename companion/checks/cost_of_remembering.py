"""Notebook 07's ledger: what remembering costs, every model call counted, checked at the model.

The evidence never comes from the lesson's bill, plot or payoff lines: every call is recounted from what the model
received and streamed back (the messages, system prompt and tool specs a `MeteredModel` passed on, by the SDK's
estimate, which the offline model reports), its kind is read from the request's own words, each request is checked
against the rules `companion/models/converse_rules.py` writes down for Bedrock's Converse API, and the meter's summary
calls are compared with the agent's own count of its event-loop cycles. The lesson's figures are recorded beside that
evidence (`shown`) only to be compared with it.

Checks that compare a recount with the tokens the model reported need the offline model (in either voice, directly or
behind the local Bedrock endpoint); on a real Bedrock model, whose tokenizer counts differently, they are skipped.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from strands import Agent

from companion.checks import save_record, texts
from companion.measure.cost import r_squared, recount_exchange, slope
from companion.models.backends import resolve_backend, resolve_bedrock_endpoint
from companion.models.converse_rules import violations
from companion.support.ledger import Ledger
from companion.support.messages import summary_request_kind

CLAIMS = {
    "C1": "without pruning tokens per turn grow linearly; a window flattens them and forgets; "
          "a kept summary remembers and pays off once its savings cover its own calls",
    "S1": "call n receives all 2n - 1 messages so far, so tokens per turn grow linearly",
    "S2": "a window caps every call, at no extra call, and forgets the oldest facts",
    "S3": "a kept summary keeps the turn calls flat and the facts, and pays for summary calls",
    "S4": "the summary pays off from the turn its running total stays below no pruning's",
    "S5": "count every call at the model: the agent's own counter misses the summary calls",
}
PLAIN, WINDOW, KEPT = NAMES = ("no pruning", "window", "kept summary")
TOKENIZER = "a real Bedrock model counts with its own tokenizer; the recount uses the SDK's estimate"


def digest(messages: list[list[str]]) -> str:
    """A short fingerprint of a list of [role, text] messages: equal lists, equal fingerprints."""
    return hashlib.sha256(json.dumps(messages, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def _run(agent: Agent, *, words: bool = False) -> dict[str, Any]:
    """Every call the agent's MeteredModel passed on: its turn, whether its request is a summary request (read from
    the request's words), the tokens recounted from what it received and streamed back, the tokens the model reported
    (None for a call it refused), the Converse rules the request breaks and its number of messages; with `words`, also
    a fingerprint of its messages and its reply. Then the last call's messages in full, and the agent's own counts:
    its event-loop cycles and the tokens of its accumulated usage."""
    reported = iter(agent.model.calls)  # one record per answered call, in call order
    calls = []
    for exchange in agent.model.exchanges:
        usage = next(reported) if exchange["answered"] else None
        tokens_in, tokens_out = recount_exchange(exchange)
        call = {"turn": exchange["turn"], "summary": bool(summary_request_kind(exchange["messages"])),
                "in": tokens_in, "out": tokens_out, "reported": [usage["input"], usage["output"]] if usage else None,
                "rules": [rule for rule, _ in violations(exchange["messages"])], "messages": len(exchange["messages"])}
        if words:
            call.update(digest=digest(texts(exchange["messages"])), reply=exchange["reply"])
        calls.append(call)
    last = agent.model.exchanges[-1]
    return {"calls": calls, "last": {"texts": texts(last["messages"]), "reply": last["reply"]},
            "loop_calls": agent.event_loop_metrics.cycle_count,
            "agent_usage": agent.event_loop_metrics.accumulated_usage["totalTokens"]}


def _plain(value: Any) -> Any:
    """numpy and pandas scalars as plain Python values."""
    return value.item() if hasattr(value, "item") else value


def record(runs: dict[str, tuple[Agent, str]], payoff_runs: dict[str, tuple[Agent, str]], prompts: list[str], *,
           facts: dict[str, Any], window_size: int, token_budget: int, shown: dict[str, Any], backend: str | None,
           workspace_dir: Path) -> dict[str, Any]:
    """The evidence of notebook 07's run. `runs` maps "no pruning", "window (w)" and "kept summary" to (agent, last
    answer) for the `turns`-turn script; `payoff_runs` maps "no pruning" and "kept summary" to the same for the
    payoff run. `shown` holds what the lesson printed: its bill (a DataFrame indexed by strategy), its curves and its
    payoff turns, to be compared with the recount."""
    short = dict(zip((PLAIN, WINDOW, KEPT), runs.values()))
    bill = shown["bill"].reset_index()
    return save_record({
        "prompts": prompts,
        "facts": {name: str(value) for name, value in facts.items()},
        "window_size": window_size,
        "token_budget": token_budget,
        "offline": resolve_backend(backend) == "offline" or resolve_bedrock_endpoint() == "local",
        "runs": {name: _run(agent, words=name == PLAIN) for name, (agent, _) in short.items()},
        "payoff_runs": {name: _run(agent) for name, (agent, _) in payoff_runs.items()},
        "shown": {
            "bill": {name: {k: _plain(v) for k, v in row.items() if k != "strategy"}
                     for name, row in zip(short, bill.to_dict("records"))},
            "curves": {name: [int(v) for v in values] for name, values in zip(short, shown["curves"].values())},
            "payoffs": shown["payoffs"],
        },
    }, workspace_dir)


# --- arithmetic, written here rather than taken from the lesson's helpers -------------------------------------------


def _per_turn(calls: list[dict[str, Any]], turns: int, *, summaries: bool = True) -> list[int]:
    """Recounted tokens (input + output) of every call of each turn 1..turns; without `summaries`, turn calls only."""
    per_turn = [0] * turns
    for call in calls:
        if summaries or not call["summary"]:
            per_turn[call["turn"] - 1] += call["in"] + call["out"]
    return per_turn


def _turn_inputs(calls: list[dict[str, Any]], turns: int) -> list[int]:
    """The recounted input of each turn's own call (its first call that is not a summary request)."""
    first: dict[int, int] = {}
    for call in calls:
        if not call["summary"]:
            first.setdefault(call["turn"], call["in"])
    return [first.get(t, 0) for t in range(1, turns + 1)]  # 0: a turn without a call of its own


def _totals(per_turn: list[int]) -> list[int]:
    totals, running = [], 0
    for value in per_turn:
        running += value
        totals.append(running)
    return totals


def _payoff(mine: list[int], theirs: list[int]) -> int | None:
    """The turn after the last turn on which `mine` is not below `theirs` (None when that is the last turn)."""
    not_below = [turn for turn, (a, b) in enumerate(zip(mine, theirs), start=1) if a >= b]
    last = not_below[-1] if not_below else 0
    return last + 1 if last < len(mine) else None


def _received(last: dict[str, Any], text: str) -> bool:
    return any(text in message for _, message in last["texts"])


def claims(record: dict[str, Any]) -> Ledger:
    """Every check of notebook 07, decided from `record` alone."""
    ledger = Ledger(claims=CLAIMS)
    prompts, facts, w = record["prompts"], record["facts"], record["window_size"]
    turns, offline = len(prompts), record["offline"]
    runs, payoff_runs, shown = record["runs"], record["payoff_runs"], record["shown"]
    plain, window, kept = (runs[name]["calls"] for name in (PLAIN, WINDOW, KEPT))
    lasts = {name: run["last"] for name, run in runs.items()}
    long_plain, long_kept = payoff_runs[PLAIN]["calls"], payoff_runs[KEPT]["calls"]
    long_turns = max(call["turn"] for call in long_plain)
    both = (*((name, runs[name]) for name in NAMES),
            *(("payoff run, " + name, payoff_runs[name]) for name in (PLAIN, KEPT)))

    # S1: without pruning, every call re-sends the conversation.
    ledger.equal("C1 S1", "without pruning, call n receives all 2n - 1 messages so far",
                 observed=[call["messages"] for call in plain], expected=list(range(1, 2 * turns, 2)),
                 what="messages per call, at the model")
    said = [m for prompt, call in zip(prompts, plain) for m in (["user", prompt], ["assistant", call["reply"]])]
    follows = [call["digest"] == digest(said[: 2 * n - 1]) for n, call in enumerate(plain, start=1)]
    ledger.check("S1", "each call = every earlier prompt and reply, in order, and the new prompt",
                 evidence=f"{sum(follows)} of {len(plain)} calls of no pruning received exactly that; the last "
                          f"call's messages are the first {2 * turns - 1} said: {lasts[PLAIN]['texts'] == said[:-1]}",
                 holds=all(follows) and lasts[PLAIN]["texts"] == said[:-1])
    inputs = _turn_inputs(plain, turns)
    ledger.check("C1 S1", "so its input grows linearly, turn by turn",
                 evidence=f"recounted input: {slope(inputs):+.1f} tokens a turn, the slope of a straight-line fit, r² "
                          f"{r_squared(inputs):.3f}",
                 holds=slope(inputs) > 0 and r_squared(inputs) > 0.98)

    # S2: a window caps every call, makes no extra call, and forgets.
    sent = [call["messages"] for call in window]
    ledger.check("C1 S2", "the window's calls never receive more than w + 1 messages",
                 evidence=f"at most {max(sent)} messages, window {w}", holds=max(sent) <= w + 1)
    full = w // 2 + 1  # the first turn whose call receives a full window
    claim = "once full, the window's input stays flat"
    if 2 * turns - 1 <= w + 1:
        ledger.skip("C1 S2", claim, reason=f"a window of {w} never fills in {turns} turns: "
                                           f"the last call's {2 * turns - 1} messages fit")
    elif turns < full + 4:
        ledger.skip("C1 S2", claim, reason=f"the window fills at turn {full}, fewer than 4 turns before the end")
    else:
        steady = _turn_inputs(window, turns)[full - 1:]
        ledger.check("C1 S2", claim, holds=slope(steady) < 0.1 * slope(inputs),
                     evidence=f"{slope(steady):+.1f} tokens a turn from turn {full} on, no pruning "
                              f"{slope(inputs):+.1f}")
    ledger.check("S2", "the window makes no extra call",
                 evidence=f"{len(window)} calls for {turns} turns, {sum(c['summary'] for c in window)} summary "
                          f"requests; the agent's loop counted {runs[WINDOW]['loop_calls']}",
                 holds=len(window) == turns == runs[WINDOW]["loop_calls"] and not any(c["summary"] for c in window))
    claim = "the window's last call lost the oldest turns first, and their facts with them"
    last = lasts[WINDOW]
    if len(last["texts"]) == 2 * turns - 1:
        ledger.skip("C1 S2", claim, reason=f"a window of {w} holds all {2 * turns - 1} messages of {turns} "
                                           "turns: nothing was cut")
    else:
        turns_in = [_received(last, prompt) for prompt in prompts[:3]]
        values_in = [_received(last, value) for value in facts.values()]
        ledger.check("C1 S2", claim,
                     evidence=f"{len(last['texts'])} of {2 * turns - 1} messages; turns 1-3 received: "
                              f"{turns_in}; facts received: {values_in}",
                     holds=not turns_in[0] and turns_in == sorted(turns_in) and values_in == turns_in)
    received = {name: [f for f, value in facts.items() if _received(lasts[name], value)] for name in NAMES}
    named = {name: [f for f, value in facts.items() if value in lasts[name]["reply"]] for name in NAMES}
    ledger.check("S2 S3", "each last answer names the facts its call received, no other",
                 evidence="facts named of those received: " + "; ".join(
                     f"{name} {len(named[name])} of {len(received[name])}" for name in NAMES),
                 holds=named == received)

    # S3: a kept summary keeps the turn calls flat and the facts, and pays for summary calls.
    summaries = [call for call in long_kept if call["summary"]]
    long_inputs = _turn_inputs(long_plain, long_turns)
    claim = "the kept summary's turn calls stay flat"
    half = long_turns // 2
    if summaries:
        steady = _turn_inputs(long_kept, long_turns)[half:]
        ledger.check("C1 S3", claim, holds=slope(steady) < 0.1 * slope(long_inputs[half:]),
                     evidence=f"second half of the payoff run: {slope(steady):+.1f} tokens a turn, no pruning "
                              f"{slope(long_inputs[half:]):+.1f}")
    else:
        ledger.skip("C1 S3", claim, reason=f"no summary call in the {long_turns} turns of the payoff run")
    claim = "and it pays for that with summary calls"
    if max(long_inputs) > record["token_budget"]:
        ledger.check("C1 S3", claim, holds=bool(summaries),
                     evidence=f"{len(summaries)} summary calls in {long_turns} turns, "
                              f"{sum(c['in'] + c['out'] for c in summaries):,} tokens recounted")
    else:
        ledger.skip("C1 S3", claim, reason=f"no call of the payoff run passes the budget of "
                                           f"{record['token_budget']} tokens")
    claim = "the kept summary's last call received every fact, and turns 1-3 were not in it"
    if any(call["summary"] for call in kept):
        turns_in = [_received(lasts[KEPT], prompt) for prompt in prompts[:3]]
        values_in = [_received(lasts[KEPT], value) for value in facts.values()]
        ledger.check("C1 S3", claim, evidence=f"turns 1-3 received: {turns_in}; facts received: {values_in}",
                     holds=all(values_in) and not any(turns_in))
    else:
        ledger.skip("C1 S3", claim, reason=f"no summary call in {turns} turns")
    every = [call for _, run in both for call in run["calls"]]
    broken = [rule for call in every for rule in call["rules"]]
    refused = sum(call["reported"] is None for call in every)
    ledger.check("S3", "every request of both runs passes Bedrock's Converse rules, and is answered",
                 evidence=f"{len(every):,} requests; rules broken: {sorted(set(broken)) or 'none'}; "
                          f"refused: {refused}",
                 holds=not broken and not refused)

    # S4: the payoff turn, recounted; S5: without the summary calls it comes too early.
    base = _totals(_per_turn(long_plain, long_turns))
    mine = _totals(_per_turn(long_kept, long_turns))
    gap = [a - b for a, b in zip(mine, base)]
    payoff = _payoff(mine, base)
    seems = _payoff(_totals(_per_turn(long_kept, long_turns, summaries=False)), base)
    claim = "counting every call, the kept summary pays off, but not from turn 1"
    if not summaries:
        ledger.skip("C1 S4", claim, reason=f"no summary call in the {long_turns} turns of the payoff run")
    elif payoff is None and gap[-1] < gap[-11]:
        ledger.skip("C1 S4", claim, reason=f"not yet by turn {long_turns}, its gap shrinking by "
                                           f"{(gap[-11] - gap[-1]) / 10:,.1f} tokens a turn: "
                                           "a longer run finds the turn")
    else:
        ledger.check("C1 S4", claim, holds=payoff is not None and payoff > 1,
                     evidence=f"recounted, its running total stays below no pruning's from turn {payoff} of "
                              f"{long_turns}" if payoff else
                              f"recounted, its running total is not below no pruning's at turn {long_turns}, and "
                              f"its gap grew by {(gap[-1] - gap[-11]) / 10:+,.1f} tokens a turn over the last 10")
    claim = "counting only its turn calls, the payoff comes earlier"
    if not summaries:
        ledger.skip("S5", claim, reason=f"no summary call in the {long_turns} turns of the payoff run")
    elif payoff is None and seems is None:
        ledger.skip("S5", claim, reason=f"neither count pays off within {long_turns} turns")
    else:
        ledger.check("S5", claim, evidence=f"recounted: from turn {seems} without the summary calls, {payoff} with",
                     holds=seems is not None and (payoff is None or seems < payoff))
    claim = "the payoff turns printed = the recount"
    if offline:
        ledger.equal("S4 S5", claim, observed=shown["payoffs"],
                     expected={"every call": payoff, "turn calls only": seems}, what="printed")
    else:
        ledger.skip("S4 S5", claim, reason=TOKENIZER)

    # S5: the meter, the bill and the plot count every call.
    outside = {name: sum(c["reported"] is not None for c in run["calls"]) - run["loop_calls"] for name, run in both}
    marked = {name: sum(c["summary"] for c in run["calls"]) for name, run in both}
    ledger.check("S5", "the summary requests are the calls the agent's own loop did not make",
                 evidence="answered calls - cycle_count vs summary requests: "
                          + "; ".join(f"{name} {outside[name]} vs {marked[name]}" for name in NAMES)
                          + "; payoff run: " + ", ".join(f"{name} {outside['payoff run, ' + name]} vs "
                                                         f"{marked['payoff run, ' + name]}" for name in (PLAIN, KEPT)),
                 holds=outside == marked)
    counts = {name: [sum(not c["summary"] for c in run["calls"]), sum(c["summary"] for c in run["calls"])]
              for name, run in runs.items()}
    missed = {name: [run["agent_usage"], sum(sum(c["reported"]) for c in run["calls"] if c["reported"] and not c["summary"]),
                     sum(sum(c["reported"]) for c in run["calls"] if c["reported"])] for name, run in both}
    short_of = {name: e - a for name, (a, _, e) in missed.items() if a < e}
    ledger.check("S5", "the agent's own usage = its turn calls' reported tokens; the summary calls are missing",
                 evidence=f"{sum(a == t for a, t, _ in missed.values())} of {len(missed)} runs: the agent counted "
                          "its turn calls; it missed " + "; ".join(f"{n:,} tokens in {name}" for name, n in short_of.items()),
                 holds=all(a == t for a, t, _ in missed.values()) and bool(short_of))
    bill = shown["bill"]
    ledger.equal("S5", "the bill's turn and summary calls = the calls the model received, by kind",
                 observed=[[bill[name]["turn calls"], bill[name]["summary calls"]] for name in NAMES],
                 expected=[counts[name] for name in NAMES], what="[turn, summary] calls per strategy")
    ledger.equal("S2 S3", "the bill's facts kept = the facts each last answer names",
                 observed=[bill[name]["facts kept"] for name in NAMES],
                 expected=[f"{len(named[name])}/{len(facts)}" for name in NAMES], what="per strategy")
    if offline:
        wrong = [name for name, run in both if any(c["reported"] != [c["in"], c["out"]] for c in run["calls"])]
        ledger.check("S1 S5", "every call's reported tokens = its recount, input and output",
                     evidence=f"{len(every):,} calls; runs that differ: {wrong}", holds=not wrong)
        tokens = {name: [sum(c["in"] + c["out"] for c in run["calls"] if not c["summary"]),
                         sum(c["in"] + c["out"] for c in run["calls"] if c["summary"])] for name, run in runs.items()}
        ledger.equal("S5", "the bill's tokens = every call recounted, summaries included",
                     observed=[[bill[name][column] for column in ("turn tokens", "summary tokens", "all tokens",
                                                                  "agent's own count")] for name in NAMES],
                     expected=[[tokens[name][0], tokens[name][1], sum(tokens[name]), tokens[name][0]]
                               for name in NAMES],
                     what="[turn, summary, all, agent's own] tokens per strategy")
        unlike = [name for name, run in runs.items() if shown["curves"][name] != _per_turn(run["calls"], turns)]
        ledger.check("S5", "the plot's tokens per turn = every call of the turn, recounted",
                     evidence=f"{len(runs) - len(unlike)} of {len(runs)} curves match; differ: {unlike}",
                     holds=not unlike)
    else:
        for ref, claim in (("S1 S5", "every call's reported tokens = its recount, input and output"),
                           ("S5", "the bill's tokens = every call recounted, summaries included"),
                           ("S5", "the plot's tokens per turn = every call of the turn, recounted")):
            ledger.skip(ref, claim, reason=TOKENIZER)
    return ledger
