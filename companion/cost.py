"""Turning recorded model calls into the numbers of a cost comparison: curves, slopes, totals, survival."""

from __future__ import annotations

from typing import Any, Sequence


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


def cost_row(strategy: str, calls: list[dict[str, Any]], answer: str, facts: dict[str, Any], growing_slope: float) -> dict[str, Any]:
    """One line of the cost table, computed from the calls a MeteredModel recorded."""
    turn_inputs = [c["input"] for c in calls if c["kind"] == "turn"]
    summaries = [c for c in calls if c["kind"] == "summary"]
    kept = facts_kept(answer, facts)
    return {
        "strategy": strategy,
        "last turn input": turn_inputs[-1],
        "tokens/turn (2nd half)": round(slope(turn_inputs[len(turn_inputs) // 2 :]), 1),
        "curve": curve_shape(turn_inputs, growing_slope),
        "turn input total": sum(turn_inputs),
        "extra calls": len(summaries),
        "extra tokens": sum(c["input"] + c["output"] for c in summaries),
        "all tokens": sum(c["input"] + c["output"] for c in calls),
        "facts kept": f"{len(kept)}/{len(facts)} " + (", ".join(kept) if kept else "none"),
    }
