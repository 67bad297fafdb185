"""Turning recorded model calls into the numbers of a cost comparison: curves, slopes, totals, survival, dollars,
and the turn from which summarizing pays off."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from companion.support.messages import message_text


def slope(values: Sequence[float]) -> float:
    """Least-squares slope of values against their index: tokens added per turn."""
    n = len(values)
    if n < 2:
        return 0.0
    mean_x, mean_y = (n - 1) / 2, sum(values) / n
    covariance = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(values))
    variance = sum((x - mean_x) ** 2 for x in range(n))
    return covariance / variance


def r_squared(values: Sequence[float]) -> float:
    """How well a straight line explains the values (1.0 = perfectly linear)."""
    n = len(values)
    mean_y = sum(values) / n
    total = sum((y - mean_y) ** 2 for y in values)
    if total == 0:
        return 1.0
    b = slope(values)
    a = mean_y - b * (n - 1) / 2
    residual = sum((y - (a + b * x)) ** 2 for x, y in enumerate(values))
    return 1 - residual / total


def curve_shape(values: Sequence[float], growing_slope: float) -> str:
    """"grows linearly" when the second half still climbs at a quarter of `growing_slope` or more, else "flat"."""
    tail = values[len(values) // 2 :]
    return "grows linearly" if slope(tail) >= 0.25 * growing_slope else "flat"


def facts_kept(answer: str, facts: dict[str, Any]) -> list[str]:
    """The names of the facts whose value appears in the final answer."""
    return [name for name, value in facts.items() if str(value) in answer]


def cost_row(strategy: str, calls: list[dict[str, Any]], answer: str, facts: dict[str, Any], growing_slope: float,
             price: Price | None = None) -> dict[str, Any]:
    """One line of the cost table, computed from the calls a MeteredModel recorded with turn labels: the tokens of the
    last turn and the shape of the per-turn curve (every call of a turn, input + output, as notebook 07 plots it), the
    summarization calls and their tokens, all tokens of all calls, their price, and how many planted facts the last
    answer still names. `growing_slope` is the no-pruning curve's slope over its second half."""
    per_turn = tokens_by_turn(calls, max(c["turn"] for c in calls))
    summaries = [c for c in calls if c["kind"] == "summary"]
    return {
        "strategy": strategy,
        "last turn tokens": per_turn[-1],
        "curve": curve_shape(per_turn, growing_slope),
        "summary calls": len(summaries),
        "summary tokens": sum(c["input"] + c["output"] for c in summaries),
        "all tokens": sum(c["input"] + c["output"] for c in calls),
        "USD": round(call_dollars(calls, price or NOVA_PRO_ON_DEMAND), 5),
        "facts kept": f"{len(facts_kept(answer, facts))}/{len(facts)}",
    }


def bill_row(strategy: str, calls: list[dict[str, Any]], answer: str, facts: dict[str, Any]) -> dict[str, Any]:
    """One line of notebook 07's bill, from the calls a MeteredModel recorded: the turns' own calls and the summary
    calls, counted and in tokens (input + output), all tokens of all calls, and how many planted facts the last answer
    still names."""
    turn_calls = [c for c in calls if c["kind"] != "summary"]
    summaries = [c for c in calls if c["kind"] == "summary"]
    return {
        "strategy": strategy,
        "turn calls": len(turn_calls),
        "summary calls": len(summaries),
        "turn tokens": sum(c["input"] + c["output"] for c in turn_calls),
        "summary tokens": sum(c["input"] + c["output"] for c in summaries),
        "all tokens": sum(c["input"] + c["output"] for c in calls),
        "facts kept": f"{len(facts_kept(answer, facts))}/{len(facts)}",
    }


# --- every call counted, by turn; when summarizing pays off; what it costs in dollars -------------------------------


@dataclass(frozen=True)
class Price:
    """An on-demand price per 1,000 tokens, with where and when it was read."""

    model: str
    region: str
    input_per_1k: float
    output_per_1k: float
    source: str
    as_of: str

    def dollars(self, input_tokens: int, output_tokens: int) -> float:
        """The price of that many input and output tokens, in US dollars."""
        return input_tokens / 1000 * self.input_per_1k + output_tokens / 1000 * self.output_per_1k


# The one place the workbook's dollar figures come from. Amazon Nova Pro (amazon.nova-pro-v1:0) on-demand, us-east-1:
# the AWS Price List Bulk API offer for AmazonBedrock, publication date 2026-09-01, as recorded in the "Amazon Nova
# plans pricing" file of the API Evangelist amazon-nova repository (it names https://aws.amazon.com/bedrock/pricing/ as
# the human-readable page). The same numbers are Nova Pro's launch price (December 2024). Check the pricing page before
# quoting a budget: prices change, and Batch, Flex and cached input are cheaper.
NOVA_PRO_ON_DEMAND = Price(
    model="Amazon Nova Pro (amazon.nova-pro-v1:0), on-demand",
    region="us-east-1",
    input_per_1k=0.0008,
    output_per_1k=0.0032,
    source="AWS Price List Bulk API, AmazonBedrock offer (via API Evangelist, 'Amazon Nova plans pricing')",
    as_of="2026-09-01",
)


def call_dollars(calls: list[dict[str, Any]], price: Price = NOVA_PRO_ON_DEMAND) -> float:
    """What the recorded calls cost at `price`: every call, summaries included."""
    return price.dollars(sum(c["input"] for c in calls), sum(c["output"] for c in calls))


def tokens_by_turn(calls: list[dict[str, Any]], turns: int) -> list[int]:
    """All tokens (input + output) of every call, summaries included, per turn 1..turns, from the calls' `turn` labels
    (a MeteredModel whose `turn` was set before each invocation)."""
    per_turn = [0] * turns
    for call in calls:
        if not 1 <= call.get("turn", 0) <= turns:
            raise ValueError(f"call {call!r} has no turn label in 1..{turns}; set MeteredModel.turn before each invocation")
        per_turn[call["turn"] - 1] += call["input"] + call["output"]
    return per_turn


def dollars_by_turn(calls: list[dict[str, Any]], turns: int, price: Price = NOVA_PRO_ON_DEMAND) -> list[float]:
    """What every call of each turn 1..turns cost at `price` (input and output priced apart), from the turn labels."""
    per_turn = [0.0] * turns
    for number in range(1, turns + 1):
        per_turn[number - 1] = call_dollars([c for c in calls if c.get("turn") == number], price)
    return per_turn


def last_turn_receiving(exchanges: list[dict[str, Any]], values: Iterable[Any]) -> int | None:
    """The turn of the last call (a MeteredModel's `exchanges`) whose messages held any of `values`; None if none."""
    values = [str(value) for value in values]
    turns = [exchange["turn"] for exchange in exchanges
             if any(value in message_text(message) for message in exchange["messages"] for value in values)]
    return max(turns, default=None)


def running_total(values: Sequence[float]) -> list[float]:
    """Cumulative sums: the bill so far after each turn."""
    return list(accumulate(values))


def payoff_turn(strategy_total: Sequence[int], baseline_total: Sequence[int]) -> int | None:
    """The first turn from which the strategy's running total stays strictly below the baseline's until the end of
    the run; None if it is not below at the last turn (it has not paid off within the run)."""
    turn = None
    for number in range(len(baseline_total), 0, -1):
        if strategy_total[number - 1] < baseline_total[number - 1]:
            turn = number
        else:
            break
    return turn


# --- recounting a call from what the model received, for check cells ----------------------------------------------


def _text_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def _json_tokens(value: Any) -> int:
    return math.ceil(len(json.dumps(value)) / 2)


def recount_exchange(exchange: dict[str, Any]) -> tuple[int, int]:
    """(input, output) tokens of one call MeteredModel recorded, recounted from what the model received and streamed
    back: text at characters / 4, tool calls, JSON and tool specs at characters / 2 (the SDK's estimate, which the
    offline model reports). Written here from those two rules, not by calling the SDK's estimator."""
    tokens = _text_tokens(exchange["system_prompt"]) if exchange["system_prompt"] else 0
    for message in exchange["messages"]:
        for block in message["content"]:
            if "text" in block:
                tokens += _text_tokens(block["text"])
            if "toolUse" in block:
                tokens += _text_tokens(block["toolUse"].get("name", "")) + _json_tokens(block["toolUse"].get("input", {}))
            for item in block.get("toolResult", {}).get("content", []):
                tokens += _text_tokens(item["text"]) if "text" in item else 0
                tokens += _json_tokens(item["json"]) if "json" in item else 0
    tokens += sum(_json_tokens(spec) for spec in exchange.get("tool_specs", []))
    output = _text_tokens(exchange["reply"]) + math.ceil(len(exchange.get("tool_input", "")) / 2)
    return tokens, output
