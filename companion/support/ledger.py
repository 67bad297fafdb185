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

__all__ = ["CLAIM_LINE", "ClaimsNotHeld", "Ledger", "Row", "REF_PATTERN"]

# One id: C (the notebook's claim line) or S (a summary bullet) followed by a number. In markdown they stand in a
# bracket at the end of the line they tag, for example "... is gone. [S2]" or "[C1 C2]".
REF_PATTERN = re.compile(r"\b[CS]\d+\b")
CLAIM_LINE = re.compile(r"^([✓✗–]) ([CS]\d+): (.*) \((?:\d+ of the \d+ checks(?:, \d+ failing)?"
                        r"|not checked on this run|no check)\)$")
"""One claim's line in a ledger's text form: its mark, id and words (companion/replay.py reads executed notebooks
with it)."""
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
    """The rows of one "Check yourself" cell: checks, grouped by the claim ids they support.

    `claims` names each id as the learner reads it (`{"C1": "a window of w messages holds w/2 turns", ...}`): the
    report shows one verdict line per id, so the room sees the verdicts at a glance, and folds the checks behind
    them under a `<details>` a reviewer opens. An id with no label is named by its first check.
    """

    def __init__(self, title: str = "Check yourself", claims: dict[str, str] | None = None) -> None:
        self.title = title
        self.claims = dict(claims or {})
        for ref in self.claims:
            self._ref(ref)
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

    def row(self, claim: str) -> Row:
        """The check whose claim text is `claim` (tests find a row by its words)."""
        (found,) = [row for row in self.rows if row.claim == claim]
        return found

    def verdicts(self) -> list[tuple[str, str, str, int, int]]:
        """(id, label, status, checks held, checks decided) per claim id, C ids first, in number order.

        A claim holds when every check it has decided holds; it FAILS when one fails; it is "skipped" when this run
        decided none of its checks.
        """
        ids = sorted(self.refs() | set(self.claims), key=lambda i: (i[0] != "C", int(i[1:])))
        verdicts = []
        for ref in ids:
            mine = [row for row in self.rows if ref in row.ref.split()]
            decided = [row for row in mine if row.status != "skipped"]
            held = sum(row.status == "holds" for row in decided)
            status = "FAILS" if held < len(decided) or not mine else "holds" if decided else "skipped"
            label = self.claims.get(ref) or (mine[0].claim if mine else "(no check)")
            verdicts.append((ref, label, status, held, len(decided)))
        return verdicts

    def _summary(self) -> str:
        verdicts = self.verdicts()
        held = sum(v[2] == "holds" for v in verdicts)
        failed = sum(v[2] == "FAILS" for v in verdicts)
        skipped = sum(v[2] == "skipped" for v in verdicts)
        text = f"{held} of {len(verdicts)} claims hold"
        if skipped:
            text += f", {skipped} not checked on this run"
        if failed:
            text += f", {failed} FAIL"
        checks_held = sum(row.status == "holds" for row in self.rows)
        return text + f" ({checks_held} of {len(self.rows)} checks hold)"

    def _rests_on(self, status: str, held: int, decided: int) -> str:
        """The checks a claim rests on, out of the ledger's: one check can back several claims, so the claims' counts
        add up to more than the headline's (readers added them up and found the headline short)."""
        if status == "skipped":
            return "not checked on this run"
        if decided == 0:
            return "no check"
        failing = decided - held
        return f"{decided} of the {len(self.rows)} checks" + (f", {failing} failing" if failing else "")

    # Display: HTML in JupyterLab and the book, aligned plain text in terminals and for nbval.
    def _repr_html_(self) -> str:
        marks = {"holds": ("✓ holds", "inherit"), "FAILS": ("✗ FAILS", "#b00020"), "skipped": ("– not checked", "#666")}

        def td(text: str) -> str:
            return f"<td style='text-align:left;vertical-align:top'>{html.escape(text)}</td>"

        def verdict(status: str) -> str:
            mark, colour = marks[status]
            return f"<td style='color:{colour};white-space:nowrap;vertical-align:top'>{mark}</td>"

        def header(*names: str) -> str:
            return "".join(f"<th style='text-align:left'>{name}</th>" for name in names)

        claims = "".join(f"<tr>{td(ref)}{td(label)}{td(self._rests_on(status, held, decided))}{verdict(status)}</tr>"
                         for ref, label, status, held, decided in self.verdicts())
        checks = "".join(f"<tr>{td(row.ref)}{td(row.claim)}{td(row.evidence)}{verdict(row.status)}</tr>"
                         for row in self.rows)
        return (f"<p><b>{html.escape(self.title)}</b>: {html.escape(self._summary())}</p>"
                f"<table><thead><tr>{header('id', 'claim', 'rests on', 'holds')}</tr></thead><tbody>{claims}</tbody>"
                f"</table><details><summary>The {len(self.rows)} checks and their evidence</summary>"
                f"<table><thead><tr>{header('id', 'check', 'evidence', 'holds')}</tr></thead><tbody>{checks}</tbody>"
                f"</table></details>")

    def __repr__(self) -> str:
        lines = [f"{self.title}: {self._summary()}"]
        for ref, label, status, held, decided in self.verdicts():
            mark = {"holds": "✓", "FAILS": "✗", "skipped": "–"}[status]
            lines.append(f"{mark} {ref}: {label} ({self._rests_on(status, held, decided)})")
        lines.append("")
        lines.append("The checks:")
        for row in self.rows:
            mark = {"holds": "✓", "FAILS": "✗", "skipped": "–"}[row.status]
            lines.append(f"{mark} [{row.ref}] {row.claim}")
            lines += textwrap.wrap(row.evidence, 84, initial_indent="    evidence: ", subsequent_indent="    ")
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
        unchecked = [ref for ref in self.claims if ref not in self.refs()]
        if self.failures or unchecked:
            listed = "\n".join(f"  [{row.ref}] {row.claim} (evidence: {row.evidence})" for row in self.failures)
            listed += "".join(f"\n  [{ref}] {self.claims[ref]} (no check)" for ref in unchecked)
            raise ClaimsNotHeld(f"{len(self.failures) + len(unchecked)} of {len(self.rows)} checks do not hold:\n"
                                f"{listed.lstrip(chr(10))}")
