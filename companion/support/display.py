"""Tables for the notebooks: pandas DataFrames, which JupyterLab renders as HTML (sortable, filterable, plottable),
and a plain-text form for terminals and command-line tools."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

# Text forms (the text/plain that nbval also compares) show every column and row, and long cells in full up to 80
# characters, so what a terminal prints matches the HTML table.
pd.set_option("display.max_columns", None)
pd.set_option("display.max_rows", 500)
pd.set_option("display.max_colwidth", 80)
pd.set_option("display.width", 200)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, *, index: str | None = None) -> pd.DataFrame:
    """Rows of dicts as a DataFrame with the given columns in that order; `index` names a column to index by
    (for example "turn" or "strategy"), otherwise rows are numbered from 1 as a learner counts them."""
    frame = pd.DataFrame(list(rows), columns=list(columns) if columns else None)
    if index is not None:
        return frame.set_index(index)
    frame.index = pd.RangeIndex(1, len(frame) + 1)
    return frame


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def text_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, width: int = 60) -> str:
    """Rows of dicts as an aligned text table for terminals; long text cells are cut to `width` characters."""
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
