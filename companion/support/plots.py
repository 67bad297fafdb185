"""The workbook's plots, sized and labelled to be read from the back of a room."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from companion.support.figures import describe_figure

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


# --- descriptions: one sentence per figure, written from the data it draws (companion.support.figures) ---------------


def _and(items: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = list(items)
    if len(items) <= 1:
        return items[0] if items else "none"
    return ", ".join(items[:-1]) + " and " + items[-1]


def _spans(turns: Sequence[int]) -> str:
    """Turn numbers as runs: [2, 3, 4, 7] -> '2-4 and 7'."""
    runs: list[list[int]] = []
    for turn in sorted(turns):
        if runs and turn == runs[-1][-1] + 1:
            runs[-1].append(turn)
        else:
            runs.append([turn])
    return _and([f"{run[0]}" if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs])


def _number(value: float) -> str:
    return f"{value:,}" if float(value).is_integer() else f"{value:,.3g}"


def _values(values: Sequence[float], limit: int = 10) -> str:
    """A series as a reader would read it off the plot: every value when there are few, else where it starts, ends
    and peaks."""
    values = list(values)
    if len(values) <= limit:
        return ", ".join(_number(v) for v in values)
    peak = max(range(len(values)), key=lambda i: values[i])
    text = f"from {_number(values[0])} at turn 1 to {_number(values[-1])} at turn {len(values)}"
    return text + (f", highest {_number(values[peak])} at turn {peak + 1}" if peak != len(values) - 1 else "")


def _together(series: Sequence[Sequence[float]]) -> int:
    """How many first turns all series share the same values."""
    shared = 0
    for values in zip(*series):
        if len(set(values)) > 1:
            break
        shared += 1
    return shared


def window_plot(rows: Sequence[dict[str, Any]], window_size: int, title: str | None = None) -> Figure:
    """Per turn: messages the model received on that call (a hook's record), messages kept after the end-of-invocation
    trim, and messages stored on disk; the turns whose call no longer received the planted fact are shaded."""
    turns = [row["turn"] for row in rows]
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(10, 5.5))
        ax.plot(turns, [row["stored"] for row in rows], "s-", color="tab:gray", label="stored on disk (message files)")
        ax.plot(turns, [row["received"] for row in rows], "o-", color="tab:orange", label="received by the model on this call")
        ax.plot(turns, [row["kept"] for row in rows], "^--", color="tab:blue", label="kept after the turn's trim")
        ax.axhline(window_size, color="tab:blue", linestyle=":", linewidth=1.5, label=f"window_size = {window_size}")
        lost = [row["turn"] for row in rows if not row["codename received"]]
        if lost:
            ax.axvspan(lost[0] - 0.5, turns[-1] + 0.5, color="tab:red", alpha=0.08, label="the call no longer receives the fact")
            ax.annotate(
                f"turn {lost[0]}: fact not received",
                xy=(lost[0] - 0.5, 0.5),
                xytext=(8, 0),
                textcoords="offset points",
                color="tab:red",
            )
        ax.set_xlabel("turn")
        ax.set_ylabel("messages")
        ax.set_xticks(turns)
        ax.set_ylim(0, max(row["stored"] for row in rows) + 2)
        ax.set_title(title or f"Window of {window_size} messages: received, kept and stored per turn")
        ax.legend(loc="upper left")
        fig.tight_layout()
    stored = [row["stored"] for row in rows]
    fact = (f"from turn {lost[0]} on, the call no longer receives the planted fact" if lost
            else "every call receives the planted fact")
    return describe_figure(fig, f"Line chart over turns {turns[0]}-{turns[-1]} with a window of {window_size} messages: "
                         f"messages stored on disk go from {stored[0]} to {stored[-1]}; messages kept after each turn's "
                         f"trim: {_values([row['kept'] for row in rows])}; messages the model receives per call: "
                         f"{_values([row['received'] for row in rows])}; {fact}.")


def counts_plot(series: dict[str, Sequence[int]], title: str, ylabel: str = "messages visible to the model",
                dashed: Sequence[str] = (), distinct: bool = False) -> Figure:
    """One line per labelled series over turns 1..n; the series named in `dashed` are drawn as thin dashed gray
    lines on top, so a line they coincide with still shows between the dashes. With `distinct`, each later series is
    drawn thinner, with a smaller marker and another line style (the first with large hollow markers), so series that
    coincide on some turns stay visible one inside the other."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(10, 5.5))
        for number, ((label, values), marker) in enumerate(zip(series.items(), "osD^v<>")):
            if label in dashed:
                ax.plot(range(1, len(values) + 1), values, "--", color="tab:gray", linewidth=1.5, zorder=3, label=label)
                continue
            if distinct:
                ax.plot(range(1, len(values) + 1), values, marker=marker, linestyle=["-", "--", ":", "-."][number % 4],
                        linewidth=max(5.0 - 1.5 * number, 1.2), markersize=max(16 - 4 * number, 5), zorder=2 + number,
                        markerfacecolor="none" if number == 0 else None, markeredgewidth=2, label=label)
                continue
            ax.plot(range(1, len(values) + 1), values, marker + "-", label=label)
        ax.set_xlabel("turn")
        ax.set_ylabel(ylabel)
        ax.set_xticks(range(1, max(len(v) for v in series.values()) + 1))
        ax.set_ylim(bottom=0)
        ax.set_title(title)
        ax.legend(loc="upper left")
        fig.tight_layout()
    turns = max(len(v) for v in series.values())
    lines = "; ".join(f"{label}: {_values(values)}" for label, values in series.items())
    shared = _together(list(series.values())) if len(series) > 1 else 0
    together = (f"; all {len(series)} lines coincide through turn {shared}" if 1 <= shared < turns
                else f"; all {len(series)} lines coincide on every turn" if shared == turns else "")
    return describe_figure(fig, f"Line chart of {ylabel} per turn, turns 1-{turns}, one line per series: {lines}{together}.")


def threshold_sweep_plot(thresholds: Sequence[float], first_turns: Sequence[int | None], turns: int) -> Figure:
    """The turn at which the first summary fires, against the compression threshold (log scale)."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(10, 5.5))
        fired = [(t, f) for t, f in zip(thresholds, first_turns) if f is not None]
        never = [t for t, f in zip(thresholds, first_turns) if f is None]
        if fired:
            ax.plot(*zip(*fired), "o-", color="tab:blue", label="first summary call at this turn")
        if never:
            ax.plot(never, [turns + 1] * len(never), "x", color="tab:red", markersize=12, mew=3,
                    label=f"no summary call in {turns} turns")
        ax.set_xscale("log")
        ax.set_xlabel("compression_threshold (fraction of the context window, log scale)")
        ax.set_ylabel("turn of the first summary call")
        ax.set_ylim(0, turns + 2)
        ax.set_yticks(range(1, turns + 2))
        ax.set_yticklabels([str(t) for t in range(1, turns + 1)] + ["never"])
        ax.set_title("Summaries wait for context pressure: lower thresholds fire sooner")
        ax.legend(loc="upper left")
        fig.tight_layout()
    groups: list[tuple[list[float], int | None]] = []  # neighbouring thresholds whose first summary call is the same
    for threshold, first in sorted(zip(thresholds, first_turns)):
        if groups and groups[-1][1] == first:
            groups[-1][0].append(threshold)
        else:
            groups.append(([threshold], first))
    parts = [(f"threshold {group[0]:.3g}" if len(group) == 1 else f"the {len(group)} thresholds from {group[0]:.3g} to {group[-1]:.3g}")
             + (f": first summary call at turn {first}" if first is not None else f": no summary call in {turns} turns")
             for group, first in groups]
    return describe_figure(fig, f"Line chart of the turn of the first summary call against compression_threshold (log scale) for "
                         f"{len(thresholds)} thresholds: {'; '.join(parts)}.")


def summary_calls_plot(rows: Sequence[dict[str, Any]], title: str) -> Figure:
    """Per turn, side by side: summary calls the model received, messages sent with them, and messages folded
    (the change in removed_message_count); turns with a call but nothing folded are labelled."""
    turns = [row["turn"] for row in rows]
    bars = [
        ("summary calls", "summary calls (received by the model)", "tab:blue"),
        ("sent to summarizer", "messages sent to the summarizer", "tab:orange"),
        ("folded", "messages folded (removed_message_count change)", "tab:gray"),
    ]
    width = 0.27
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(10, 5.5))
        for i, (key, label, color) in enumerate(bars):
            ax.bar([t + (i - 1) * width for t in turns], [row[key] for row in rows], width, label=label, color=color)
        top = max(max(row[key] for row in rows) for key, _, _ in bars)
        for row in rows:
            if row["summary calls"] and not row["folded"]:
                ax.annotate("call, 0 folded", xy=(row["turn"] + width, 0), xytext=(0, 6), textcoords="offset points",
                            ha="center", va="bottom", rotation=90, color="tab:red", fontsize=12)
        ax.set_xlabel("turn")
        ax.set_ylabel("count")
        ax.set_xticks(turns)
        ax.set_yticks(range(0, top + 2))
        ax.set_ylim(0, top + 1)
        ax.set_title(title)
        ax.legend(loc="upper left")
        fig.tight_layout()
    called = [row["turn"] for row in rows if row["summary calls"]]
    idle = [row["turn"] for row in rows if row["summary calls"] and not row["folded"]]
    calls, sent, folded = (sum(row[key] for row in rows) for key in ("summary calls", "sent to summarizer", "folded"))
    if not called:
        return describe_figure(fig, f"Bar chart per turn over turns {turns[0]}-{turns[-1]}: no summary call on any turn, so "
                             f"nothing is sent to the summarizer and nothing is folded ({folded} messages folded).")
    return describe_figure(fig, f"Bar chart per turn over turns {turns[0]}-{turns[-1]}: {calls} summary "
                         f"call{'s' if calls != 1 else ''} on turn{'s' if len(called) != 1 else ''} {_spans(called)}, "
                         f"{sent} messages sent to the summarizer and {folded} folded in all"
                         + (f"; on turn{'s' if len(idle) != 1 else ''} {_spans(idle)} a call folded nothing" if idle else "")
                         + ".")


def pressure_plot(runs: dict[str, tuple[Sequence[dict[str, Any]], int]], threshold: float) -> Figure:
    """One panel per run, side by side: each turn's projected input tokens (rows' "projected") against the threshold
    line, `threshold` × the run's context window; a turn whose rows' "summary calls" is above 0 is drawn filled. A panel
    whose line stands far above its points (over 20 times the largest) is drawn on a log scale, so both fit on it.
    `runs` maps a panel's label to (rows, context window in tokens)."""
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(runs), figsize=(7.5 * len(runs), 6), squeeze=False)
        parts = []
        for ax, (label, (rows, window)) in zip(axes[0], runs.items()):
            turns = [row["turn"] for row in rows]
            projected = [row["projected"] for row in rows]
            line = threshold * window
            called = [row["turn"] for row in rows if row["summary calls"]]
            over = [row["turn"] for row in rows if row["projected"] >= line]
            log = line > 20 * max(projected)
            ax.plot(turns, projected, "-", color="tab:gray", zorder=2)
            ax.plot(turns, projected, "o", markersize=11, markerfacecolor="white", markeredgecolor="tab:blue",
                    markeredgewidth=2, zorder=3, label="no summary call")
            if called:
                ax.plot(called, [row["projected"] for row in rows if row["summary calls"]], "o", markersize=11,
                        color="tab:red", zorder=4, label="a summary call went out")
            for turn, value in zip(turns, projected):
                ax.annotate(f"{value:,}", (turn, value), xytext=(0, 10), textcoords="offset points", ha="center",
                            fontsize=11)
            ax.axhline(line, color="tab:red", linestyle="--", linewidth=2,
                       label=f"threshold: {threshold:g} × {window:,} = {line:,.0f}")
            if log:
                ax.set_yscale("log")
                ax.set_ylim(1, line * 20)
            else:
                ax.set_ylim(0, max(max(projected), line) * 1.3)
            ax.set_xticks(turns)
            ax.set_xlabel("turn")
            ax.set_ylabel("projected input tokens" + (" (log scale)" if log else ""))
            ax.set_title(f"{label}: {window:,}-token window")
            ax.legend(loc="upper left", fontsize=11)
            above = (f"over the line on turn{'s' if len(over) != 1 else ''} {_spans(over)}" if over
                     else "no turn over the line")
            fired = (f"a summary call on turn{'s' if len(called) != 1 else ''} {_spans(called)}" if called
                     else "no summary call")
            parts.append(f"{label}, line at {line:,.0f} tokens{' (log scale)' if log else ''}: "
                         f"{_values(projected)} tokens, {above}{',' if over and called else ' and'} {fired}")
        fig.suptitle(f"The same threshold, {threshold:g} of the context window, on two windows" if len(runs) == 2
                     else f"Threshold {threshold:g} of the context window")
        fig.tight_layout()
    charts = {1: "A line chart", 2: "Two line charts"}.get(len(runs), f"{len(runs)} line charts")
    return describe_figure(fig, f"{charts} of each turn's projected "
                                f"input tokens against the threshold line, {threshold:g} × the context window: "
                                f"{'; '.join(parts)}.")


def token_curves_plot(curves: dict[str, Sequence[int]], title: str, colors: dict[str, str] | None = None,
                      markers: dict[str, str] | None = None) -> Figure:
    """All tokens of every call per turn (input + output, summarization calls included), one curve per strategy, and
    their running totals beside them; the legend of the totals gives each strategy's final total, largest first.
    `colors` and `markers` map a strategy to its colour and marker, so a strategy looks the same in every plot."""
    with plt.rc_context(STYLE):
        fig, (per_turn, total) = plt.subplots(1, 2, figsize=(15, 6))
        markers = {**dict(zip(curves, "osD^v<>")), **(markers or {})}
        colors = {**{label: f"C{index}" for index, label in enumerate(curves)}, **(colors or {})}
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
        per_turn.set_ylim(0, 1.5 * max(max(values) for values in curves.values()))  # room above the lines for the legend
        per_turn.legend(loc="upper left")
        total.legend(loc="upper left")
        fig.suptitle(title)
        fig.tight_layout()
    turns = max(len(values) for values in curves.values())
    peak_label, peak = max(((label, max(values)) for label, values in curves.items()), key=lambda item: item[1])
    peak_turn = list(curves[peak_label]).index(peak) + 1
    ends = _and([f"{label} {sum(values):,}" for label, values in sorted(curves.items(), key=lambda item: -sum(item[1]))])
    return describe_figure(fig, f"Two line charts over {turns} turns, one line per strategy ({len(curves)}): on the left the "
                         f"tokens of every call per turn, highest {peak:,} for {peak_label} at turn {peak_turn}; on the "
                         f"right the running totals, which end at {ends} tokens.")


def payoff_plot(gaps: dict[str, Sequence[int]], payoff: dict[str, int | None], baseline: str,
                colors: dict[str, str] | None = None, markers: dict[str, str] | None = None) -> Figure:
    """Running total of each strategy minus the baseline's, per turn: below zero the strategy has cost less so far.
    A dashed line marks the turn from which each stays below (its payoff turn), when there is one. `colors` maps a
    strategy to its colour in an earlier plot, so a strategy keeps its colour."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(12, 5.5))
        ax.axhline(0, color="black", linewidth=1.2)
        for (label, values), marker in zip(gaps.items(), "D^sov"):
            turns = range(1, len(values) + 1)
            turn = payoff.get(label)
            note = f"pays off from turn {turn}" if turn else f"not paid off in {len(values)} turns"
            line, = ax.plot(turns, values, (markers or {}).get(label, marker) + "-", markersize=4, markevery=max(1, len(values) // 20),
                            color=(colors or {}).get(label), label=f"{label}: {note}")
            if turn:
                ax.axvline(turn, color=line.get_color(), linestyle="--", linewidth=1.5)
        ax.set_xlabel("turn")
        ax.set_ylabel(f"tokens so far minus {baseline}'s")
        ax.set_title(f"When summarizing pays off: running total minus {baseline} (below 0 = cheaper so far)")
        ax.legend(loc="lower left")
        fig.tight_layout()
    parts = []
    for label, values in gaps.items():
        turn, end = payoff.get(label), values[-1]
        where = f"{abs(end):,} tokens {'below' if end < 0 else 'above'} zero at turn {len(values)}"
        parts.append(f"{label} stays below zero from turn {turn} and ends {where}" if turn
                     else f"{label} never pays off and ends {where}")
    turns = max(len(values) for values in gaps.values())
    return describe_figure(fig, f"Line chart over {turns} turns of each strategy's running token total minus {baseline}'s: "
                         f"{'; '.join(parts)}.")


def _short(label: str, limit: int = 40) -> str:
    short = re.sub(r"^The user(?:'s)? ", "", label).rstrip(".")
    return short if len(short) <= limit else short[: limit - 1] + "…"


def project_2d(vectors: Any, query_vector: Any) -> dict[str, Any]:
    """The memories and the query on the first two principal components of the memory vectors, with what the
    projection keeps: the share of the memories' variance, and each memory's 2-D distance to the query."""
    import numpy as np

    points = np.asarray(vectors, dtype=float)
    centre = points.mean(axis=0)
    _, singular, axes = np.linalg.svd(points - centre, full_matrices=False)
    flat = (points - centre) @ axes[:2].T
    q = (np.asarray(query_vector, dtype=float) - centre) @ axes[:2].T
    return {
        "points": flat,
        "query": q,
        "variance_kept": float((singular[:2] ** 2).sum() / (singular ** 2).sum()),
        "distance_2d": np.linalg.norm(flat - q, axis=1),
    }


def _place_labels(fig: Figure, ax: Any, texts: list[Any], points: Any, star: Any) -> None:
    """Put each label, in order, at the nearest spot around its point where it overlaps no earlier label or marker
    and stays inside the axes (the least overlap if none is free), set a little apart from its point, and join every
    label to its point with a thin leader line, so a label between two close points still says which one it names."""
    import math

    from matplotlib.transforms import Bbox

    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    placed = [Bbox.from_extents(x - 8, y - 8, x + 8, y + 8) for x, y in ax.transData.transform(points)]
    sx, sy = ax.transData.transform([star])[0]
    placed.append(Bbox.from_extents(sx - 16, sy - 16, sx + 16, sy + 16))
    spots = [(r * math.cos(math.radians(a)), r * math.sin(math.radians(a)))
             for r in (18, 28, 40, 54) for a in (20, -20, 160, 200, 90, 270, 50, -50, 130, 230)]

    def cost(box: Any, distance: float) -> float:
        hit = sum(max(min(box.x1, o.x1) - max(box.x0, o.x0), 0) * max(min(box.y1, o.y1) - max(box.y0, o.y0), 0)
                  for o in placed)
        inside = max(min(box.x1, frame.x1) - max(box.x0, frame.x0), 0) * max(min(box.y1, frame.y1) - max(box.y0, frame.y0), 0)
        return hit + 10 * (box.width * box.height - inside) + distance

    for text in texts:
        best = None
        for dx, dy in spots:
            text.set_position((dx, dy))
            text.set_horizontalalignment("left" if dx > 1 else "right" if dx < -1 else "center")
            text.set_verticalalignment("bottom" if dy > 1 else "top" if dy < -1 else "center")
            score = cost(text.get_window_extent(renderer), math.hypot(dx, dy))
            if best is None or score < best[0]:
                best = (score, dx, dy)
        _, dx, dy = best
        text.set_position((dx, dy))
        text.set_horizontalalignment("left" if dx > 1 else "right" if dx < -1 else "center")
        text.set_verticalalignment("bottom" if dy > 1 else "top" if dy < -1 else "center")
        if text.arrow_patch is not None:
            text.arrow_patch.set_visible(True)
        placed.append(text.get_window_extent(renderer))


def memory_map_plot(labels: Sequence[str], vectors: Any, query: str, query_vector: Any, highlight: str | None = None) -> Figure:
    """Memories and the query projected to 2-D (the first two principal components of the memory vectors); the title
    says how much of the memories' variance the two axes keep, so the picture is not read as the real distances."""
    flat = project_2d(vectors, query_vector)
    points, q = flat["points"], flat["query"]
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(12, 7.5))
        ax.scatter(points[:, 0], points[:, 1], s=80, color="tab:gray", label="stored memories")
        texts = []
        for (x, y), label in zip(points, labels):
            strong = label == highlight
            text = ax.annotate(textwrap.fill(_short(label, 52), 26), (x, y), xytext=(7, 4), textcoords="offset points", fontsize=11,
                               color="tab:blue" if strong else "black", fontweight="bold" if strong else "normal",
                               arrowprops={"arrowstyle": "-", "color": "0.45", "lw": 0.9, "shrinkA": 1, "shrinkB": 5})
            text.arrow_patch.set_visible(False)
            texts.insert(0, text) if strong else texts.append(text)
            if strong:
                ax.scatter([x], [y], s=160, color="tab:blue", zorder=3, label="the memory that answers")
        ax.scatter([q[0]], [q[1]], marker="*", s=400, color="tab:red", zorder=4, label=f"the query: {_short(query, 48)}")
        ax.margins(x=0.3, y=0.15)
        ax.set_aspect("equal", adjustable="datalim")  # one unit as long across as up: picture distances are 2-D distances
        ax.set_xlabel("first principal component")
        ax.set_ylabel("second principal component")
        ax.set_title(f"A 2-D shadow of 384-D space: these axes keep {flat['variance_kept']:.0%} of the memories' variance;\n"
                     "distances here are not the cosine scores (labels drop \"The user\")", fontsize=14)
        fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=2)
        fig.tight_layout(rect=(0, 0.11, 1, 1))
        ax.apply_aspect()  # fix the limits the equal aspect sets before the labels are placed in pixels
        _place_labels(fig, ax, texts, points, q)
    import numpy as np

    near = [int(i) for i in np.argsort(flat["distance_2d"], kind="stable")]
    answer = ""
    if highlight in labels:
        place = near.index(list(labels).index(highlight)) + 1
        answer = (", which is the memory that answers" if place == 1
                  else f"; the memory that answers, '{_short(highlight, 60)}', is number {place} by distance in the picture")
    return describe_figure(fig, f"Scatter plot of {len(labels)} memories and the query '{_short(query, 60)}' on the memories' "
                         f"first two principal components, which keep {flat['variance_kept']:.0%} of their variance: "
                         f"the memory nearest the query in the picture is '{_short(labels[near[0]], 60)}'{answer}.")


def similarity_bars_plot(labels: Sequence[str], scores: Sequence[float], query: str, highlight: str | None = None,
                         min_score: float | None = None, top_k: int | None = None) -> Figure:
    """Cosine similarity of the query to every memory, sorted, the answer highlighted; the threshold as a line and
    the top_k cut as a band, so the picture is the exact ranking the vector search uses."""
    import numpy as np

    order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")
    ranked = [(labels[i], float(scores[i])) for i in order]
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(12, 0.5 * len(ranked) + 2.2))
        rows = np.arange(len(ranked))
        colors = ["tab:blue" if label == highlight else "tab:gray" for label, _ in ranked]
        ax.barh(rows, [s for _, s in ranked], color=colors, height=0.7)
        if top_k:
            ax.axhspan(-0.5, min(top_k, len(ranked)) - 0.5, color="tab:green", alpha=0.10,
                       label=f"top_k = {top_k}: what a search returns")
        if min_score is not None:
            ax.axvline(min_score, color="tab:red", linestyle="--", linewidth=1.8, label=f"min_score = {min_score:g}")
        for row, (label, score) in zip(rows, ranked):
            ax.annotate(f"{score:.3f}", (max(score, 0), row), xytext=(4, 0), textcoords="offset points", va="center",
                        fontsize=11, fontweight="bold" if label == highlight else "normal")
        ax.set_yticks(rows)
        ax.set_yticklabels([f"{i + 1}. {_short(label, 52)}" for i, (label, _) in enumerate(ranked)], fontsize=11)
        for tick, (label, _) in zip(ax.get_yticklabels(), ranked):
            if label == highlight:
                tick.set_color("tab:blue")
                tick.set_fontweight("bold")
        ax.invert_yaxis()
        low = min(0.0, min(s for _, s in ranked))
        ax.set_xlim(low - 0.02 if low < 0 else 0, max(1.0, max(s for _, s in ranked)) * 1.0 + 0.02)
        ax.set_xlabel("cosine similarity to the query (384-D, exact)")
        ax.set_title(f"Query: {_short(query, 60)}\nevery memory ranked by cosine (blue: the memory that answers)", fontsize=14)
        ax.grid(axis="y", visible=False)
        if top_k or min_score is not None:
            ax.legend(loc="lower right")
        fig.tight_layout()
    (first, first_score), last = ranked[0], ranked[-1]
    text = (f"Horizontal bar chart of the cosine similarity of the query '{_short(query, 60)}' to {len(ranked)} "
            f"memories, highest first: '{_short(first, 60)}' at {first_score:.3f}"
            + (" (the memory that answers)" if first == highlight else "")
            + (f" down to '{_short(last[0], 60)}' at {last[1]:.3f}" if len(ranked) > 1 else ""))
    if highlight is not None and first != highlight and highlight in labels:
        rank = [label for label, _ in ranked].index(highlight)
        text += f"; the memory that answers ranks {rank + 1} at {ranked[rank][1]:.3f}"
    if min_score is not None:
        above = sum(score >= min_score for _, score in ranked)
        text += f"; {above} of the {len(ranked)} {'scores' if above == 1 else 'score'} at least min_score {min_score:g}"
    if top_k:
        text += f"; the top_k = {top_k} band holds ranks 1-{min(top_k, len(ranked))}"
    return describe_figure(fig, text + ".")
