"""Plain-text tables: readable in a notebook, in a terminal and in nbval's comparison alike."""

from __future__ import annotations

from typing import Any, Sequence


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, width: int = 60) -> str:
    """Rows of dicts as an aligned text table; long text cells are cut to `width` characters with an ellipsis."""
    if not rows:
        return "(no rows)"
    columns = list(columns or rows[0].keys())
    cells = [[_cell(row.get(column, "")) for column in columns] for row in rows]
    cells = [[c if len(c) <= width else c[: width - 1] + "…" for c in line] for line in cells]
    widths = [max(len(column), *(len(line[i]) for line in cells)) for i, column in enumerate(columns)]
    numeric = [all(isinstance(row.get(c), (int, float)) and not isinstance(row.get(c), bool) for row in rows) for c in columns]

    def render(values: Sequence[str]) -> str:
        out = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)]
        return "  ".join(out).rstrip()

    lines = [render(columns), render(["-" * w for w in widths])]
    lines += [render(line) for line in cells]
    return "\n".join(lines)
