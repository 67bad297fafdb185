"""The claims ledger: what a notebook's "Check yourself" cell verified, shown row by row.

A bare `assert` tells the learner nothing when it passes and hides every later check when it fails. A ledger row
records the claim as the learner reads it in the notebook, the evidence it was decided on (computed independently of
the tables above it: from what the model received, from the files on disk, from a recount or a second method) and
whether it holds. `report()` shows every row as a table, then raises one `ClaimsNotHeld` naming every row that does
not hold, so nbval, papermill and the class replay fail on it.

Rows carry the ids that the notebook's markdown gives its claim line and summary bullets (`[C1]`, `[S2]`):
`tests/test_claims_ledger.py` fails when an id in the markdown has no row in the committed ledger output.
"""

from __future__ import annotations

import html
import re
import textwrap
from dataclasses import dataclass
from typing import Any

__all__ = ["ClaimsNotHeld", "Ledger", "Row", "REF_PATTERN"]

# One id: C (the notebook's claim line) or S (a summary bullet) followed by a number. In markdown they stand in a
# bracket at the end of the line they tag, for example "... is gone. [S2]" or "[C1 C2]".
REF_PATTERN = re.compile(r"\b[CS]\d+\b")
EVIDENCE_WIDTH = 160  # characters of evidence shown; longer evidence is cut with a count of what was left out


class ClaimsNotHeld(AssertionError):
    """Raised by `Ledger.report()` when at least one claim does not hold; the message lists every such claim."""


@dataclass(frozen=True)
class Row:
    """One checked claim."""

    ref: str
    claim: str
    evidence: str
    status: str  # "holds", "FAILS" or "skipped"


def _evidence_text(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    if len(text) > EVIDENCE_WIDTH:
        cut = len(text) - EVIDENCE_WIDTH
        text = f"{text[:EVIDENCE_WIDTH]}… ({cut:,} more characters)"
    return text


class Ledger:
    """The rows of one "Check yourself" cell (or of several short cells that share one ledger)."""

    def __init__(self, title: str = "Check yourself") -> None:
        self.title = title
        self.rows: list[Row] = []

    def _ref(self, ref: str) -> str:
        ids = REF_PATTERN.findall(ref)
        if not ids or " ".join(ids) != " ".join(ref.replace(",", " ").split()):
            raise ValueError(f"ledger ref {ref!r}: use ids such as 'C1' or 'S2 S3' (C = claim line, S = summary bullet)")
        return " ".join(ids)

    def check(self, ref: str, claim: str, evidence: Any, holds: bool) -> bool:
        """Record `claim` (tagged `ref`), decided on `evidence`; returns whether it holds."""
        if not isinstance(holds, bool):
            holds = bool(holds)
        self.rows.append(Row(self._ref(ref), claim, _evidence_text(evidence), "holds" if holds else "FAILS"))
        return holds

    def equal(self, ref: str, claim: str, observed: Any, expected: Any, *, what: str = "") -> bool:
        """A claim that two independently computed values agree; the evidence shows both."""
        label = f"{what}: " if what else ""
        evidence = f"{label}{observed!r}" if observed == expected else f"{label}{observed!r}, expected {expected!r}"
        return self.check(ref, claim, evidence, observed == expected)

    def skip(self, ref: str, claim: str, reason: str) -> None:
        """A claim that cannot be decided on this run (another backend or voice); the reason is shown in the row."""
        self.rows.append(Row(self._ref(ref), claim, f"not checked: {reason}", "skipped"))

    @property
    def failures(self) -> list[Row]:
        return [row for row in self.rows if row.status == "FAILS"]

    def refs(self) -> set[str]:
        """Every id that has at least one row."""
        return {ref for row in self.rows for ref in row.ref.split()}

    # Display: HTML in JupyterLab and the book, aligned plain text in terminals and for nbval.
    def _repr_html_(self) -> str:
        head = "".join(f"<th style='text-align:left'>{name}</th>" for name in ("ref", "claim", "evidence", "holds"))
        body = []
        for row in self.rows:
            mark = {"holds": "✓ holds", "FAILS": "✗ FAILS", "skipped": "– skipped"}[row.status]
            colour = {"holds": "inherit", "FAILS": "#b00020", "skipped": "#666"}[row.status]
            cells = [row.ref, row.claim, row.evidence]
            tds = "".join(f"<td style='text-align:left;vertical-align:top'>{html.escape(c)}</td>" for c in cells)
            body.append(f"<tr>{tds}<td style='color:{colour};white-space:nowrap'>{mark}</td></tr>")
        summary = html.escape(self._summary())
        return (f"<p><b>{html.escape(self.title)}</b>: {summary}</p>"
                f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")

    def _summary(self) -> str:
        held = sum(row.status == "holds" for row in self.rows)
        skipped = sum(row.status == "skipped" for row in self.rows)
        text = f"{held} of {len(self.rows)} claims hold"
        if skipped:
            text += f", {skipped} not checked on this run"
        if self.failures:
            text += f", {len(self.failures)} FAIL"
        return text

    def __repr__(self) -> str:
        lines = [f"{self.title}: {self._summary()}"]
        for row in self.rows:
            mark = {"holds": "✓", "FAILS": "✗", "skipped": "–"}[row.status]
            lines.append(f"{mark} [{row.ref}] {row.claim}")
            lines += textwrap.wrap(row.evidence, 96, initial_indent="    evidence: ", subsequent_indent="    ")
        return "\n".join(lines)

    def report(self) -> None:
        """Show the ledger, then raise `ClaimsNotHeld` listing every claim that does not hold."""
        try:
            from IPython.display import display
        except ImportError:  # outside Jupyter: print the text form
            print(repr(self))
        else:
            display(self)
        if not self.rows:
            raise ClaimsNotHeld("the ledger is empty: a check cell that checks nothing proves nothing")
        if self.failures:
            listed = "\n".join(f"  [{row.ref}] {row.claim} (evidence: {row.evidence})" for row in self.failures)
            raise ClaimsNotHeld(f"{len(self.failures)} of {len(self.rows)} claims do not hold:\n{listed}")
