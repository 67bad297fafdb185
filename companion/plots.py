"""The workbook's plots, sized and labelled to be read from the back of a room."""

from __future__ import annotations

import re
from typing import Any, Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

STYLE = {
    "font.size": 14,
    "axes.titlesize": 16,
    "axes.labelsize": 14,
    "legend.fontsize": 12,
    "lines.linewidth": 2.5,
    "lines.markersize": 8,
    "axes.grid": True,
    "grid.alpha": 0.3,
}


def window_plot(rows: Sequence[dict[str, Any]], window_size: int, title: str | None = None) -> Figure:
    """Messages visible to the model vs messages stored on disk, per turn, with the turn where they part marked."""
    turns = [row["turn"] for row in rows]
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(10, 5.5))
        ax.plot(turns, [row["stored"] for row in rows], "s-", color="tab:gray", label="stored on disk (message files)")
        ax.plot(turns, [row["visible"] for row in rows], "o-", color="tab:blue", label="visible to the model")
        ax.axhline(window_size, color="tab:blue", linestyle=":", linewidth=1.5, label=f"window_size = {window_size}")
        lost = [row["turn"] for row in rows if not row["fact_visible"]]
        if lost:
            ax.axvspan(lost[0] - 0.5, turns[-1] + 0.5, color="tab:red", alpha=0.08, label="planted fact out of view")
        parted = next((row["turn"] for row in rows if row["visible"] < row["stored"]), None)
        if parted is not None:
            ax.axvline(parted, color="tab:red", linestyle="--", linewidth=1.5)
            ax.annotate(
                f"turn {parted}: visible < stored",
                xy=(parted, window_size),
                xytext=(10, -36),
                textcoords="offset points",
                color="tab:red",
            )
        ax.set_xlabel("turn")
        ax.set_ylabel("messages")
        ax.set_xticks(turns)
        ax.set_ylim(0, max(row["stored"] for row in rows) + 2)
        ax.set_title(title or f"Sliding window of {window_size} messages: what the model sees vs what is stored")
        ax.legend(loc="upper left")
        fig.tight_layout()
    return fig


def counts_plot(series: dict[str, Sequence[int]], title: str, ylabel: str = "messages visible to the model") -> Figure:
    """One line per labelled series over turns 1..n."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(10, 5.5))
        for (label, values), marker in zip(series.items(), "osD^v<>"):
            ax.plot(range(1, len(values) + 1), values, marker + "-", label=label)
        ax.set_xlabel("turn")
        ax.set_ylabel(ylabel)
        ax.set_xticks(range(1, max(len(v) for v in series.values()) + 1))
        ax.set_ylim(bottom=0)
        ax.set_title(title)
        ax.legend(loc="upper left")
        fig.tight_layout()
    return fig


def threshold_sweep_plot(thresholds: Sequence[float], first_turns: Sequence[int | None], turns: int) -> Figure:
    """The turn at which the first summary fires, against the compression threshold (log scale)."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(10, 5.5))
        fired = [(t, f) for t, f in zip(thresholds, first_turns) if f is not None]
        never = [t for t, f in zip(thresholds, first_turns) if f is None]
        if fired:
            ax.plot(*zip(*fired), "o-", color="tab:blue", label="first summary at this turn")
        if never:
            ax.plot(never, [turns + 1] * len(never), "x", color="tab:red", markersize=12, mew=3,
                    label=f"never fired in {turns} turns")
        ax.set_xscale("log")
        ax.set_xlabel("compression_threshold (fraction of the context window, log scale)")
        ax.set_ylabel("turn of the first summary")
        ax.set_ylim(0, turns + 2)
        ax.set_yticks(range(1, turns + 2))
        ax.set_yticklabels([str(t) for t in range(1, turns + 1)] + ["never"])
        ax.set_title("Summaries wait for context pressure: lower thresholds fire sooner")
        ax.legend(loc="upper left")
        fig.tight_layout()
    return fig


def token_curves_plot(curves: dict[str, Sequence[int]], title: str) -> Figure:
    """All tokens of every call per turn (input + output, summarization calls included), one curve per strategy, and
    their running totals beside them; the legend of the totals gives each strategy's final total, largest first."""
    with plt.rc_context(STYLE):
        fig, (per_turn, total) = plt.subplots(1, 2, figsize=(15, 6))
        markers = dict(zip(curves, "osD^v<>"))
        colors = {label: f"C{index}" for index, label in enumerate(curves)}
        for label, values in curves.items():
            turns = range(1, len(values) + 1)
            per_turn.plot(turns, values, markers[label] + "-", markersize=5, color=colors[label], label=label)
        for label, values in sorted(curves.items(), key=lambda item: -sum(item[1])):
            turns = range(1, len(values) + 1)
            running = [sum(values[: i + 1]) for i in range(len(values))]
            total.plot(turns, running, markers[label] + "-", markersize=5, color=colors[label],
                       label=f"{label}: {running[-1]:,}")
        per_turn.set_title("Tokens per turn, every call")
        total.set_title("Running total (legend: final total)")
        for ax in (per_turn, total):
            ax.set_xlabel("turn")
            ax.set_ylabel("tokens (input + output)")
        per_turn.legend(loc="upper left")
        total.legend(loc="upper left")
        fig.suptitle(title)
        fig.tight_layout()
    return fig


def payoff_plot(gaps: dict[str, Sequence[int]], payoff: dict[str, int | None], baseline: str) -> Figure:
    """Running total of each strategy minus the baseline's, per turn: below zero the strategy has cost less so far.
    A dashed line marks the turn from which each stays below (its payoff turn), when there is one."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(12, 5.5))
        ax.axhline(0, color="black", linewidth=1.2)
        for (label, values), marker in zip(gaps.items(), "D^sov"):
            turns = range(1, len(values) + 1)
            turn = payoff.get(label)
            note = f"pays off from turn {turn}" if turn else f"not paid off in {len(values)} turns"
            line, = ax.plot(turns, values, marker + "-", markersize=4, markevery=max(1, len(values) // 20), label=f"{label}: {note}")
            if turn:
                ax.axvline(turn, color=line.get_color(), linestyle="--", linewidth=1.5)
        ax.set_xlabel("turn")
        ax.set_ylabel(f"tokens so far minus {baseline}'s")
        ax.set_title(f"When summarizing pays off: running total minus {baseline} (below 0 = cheaper so far)")
        ax.legend(loc="lower left")
        fig.tight_layout()
    return fig


def memory_map_plot(labels: Sequence[str], vectors: Any, query: str, query_vector: Any, highlight: str | None = None) -> Figure:
    """Memories and the query projected to 2-D (the first two principal components of the memory vectors)."""
    import numpy as np

    points = np.asarray(vectors, dtype=float)
    centre = points.mean(axis=0)
    _, _, axes = np.linalg.svd(points - centre, full_matrices=False)
    flat = (points - centre) @ axes[:2].T
    q = (np.asarray(query_vector, dtype=float) - centre) @ axes[:2].T
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(12, 7.5))
        ax.scatter(flat[:, 0], flat[:, 1], s=80, color="tab:gray", label="stored memories")
        for (x, y), label in zip(flat, labels):
            short = re.sub(r"^The user(?:'s)? ", "", label).rstrip(".")
            short = short if len(short) <= 40 else short[:39] + "…"
            strong = label == highlight
            ax.annotate(short, (x, y), xytext=(6, 4), textcoords="offset points", fontsize=11,
                        color="tab:blue" if strong else "black", fontweight="bold" if strong else "normal")
            if strong:
                ax.scatter([x], [y], s=160, color="tab:blue", zorder=3, label="the memory that answers")
        ax.scatter([q[0]], [q[1]], marker="*", s=400, color="tab:red", zorder=4, label="the query")
        ax.annotate(f"query: {query}", (q[0], q[1]), xytext=(-20, 14), textcoords="offset points", fontsize=12,
                    color="tab:red", fontweight="bold")
        ax.margins(x=0.25, y=0.1)
        ax.set_xlabel("first principal component")
        ax.set_ylabel("second principal component")
        ax.set_title('Memory space: embeddings projected to 2-D (labels drop "The user")')
        ax.legend(loc="best")
        fig.tight_layout()
    return fig
