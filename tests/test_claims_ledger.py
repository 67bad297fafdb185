"""The claims ledger: the module's behaviour, and every notebook's claim line and summary bullets covered by a row.

A "Check yourself" cell shows a ledger (companion/support/ledger.py). The markdown tags the claim line and each summary bullet
with ids ([C1], [S2]); the committed output of the ledger must hold a row for every such id, and no row may fail.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from companion.support.ledger import CLAIM_LINE, REF_PATTERN, ClaimsNotHeld, Ledger

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")) + [REPO / "templates" / "notebook.ipynb"]
TAG = re.compile(r"\[((?:[CS]\d+[ ,]*)+)\]")
ROW = re.compile(r"^([✓✗–]) \[([^\]]+)\] ")
HEADLINE = re.compile(r"^.*: \d+ of \d+ claims hold")


# --- the module -----------------------------------------------------------------------------------------------------

def test_rows_record_claim_evidence_and_status():
    ledger = Ledger()
    assert ledger.check("C1", "two is two", evidence="1 + 1 = 2", holds=1 + 1 == 2)
    assert not ledger.equal("S1 S2", "three is four", observed=3, expected=4, what="count")
    ledger.skip("S3", "byte sizes match", reason="the paraphrase voice writes other bytes")
    assert [row.status for row in ledger.rows] == ["holds", "FAILS", "skipped"]
    assert ledger.rows[1].evidence == "count: 3, expected 4"
    assert ledger.refs() == {"C1", "S1", "S2", "S3"}
    text = repr(ledger)
    assert "1 of 4 claims hold, 1 not checked on this run, 2 FAIL (1 of 3 checks hold)" in text
    assert "✗ [S1 S2] three is four" in text and "not checked: the paraphrase voice" in text


def test_one_verdict_per_claim_id_with_its_checks_folded_below():
    ledger = Ledger(claims={"C1": "the claim line", "S1": "the first bullet", "S2": "a bullet nobody checked"})
    ledger.check("C1 S1", "first check", evidence="e1", holds=True)
    ledger.check("S1", "second check", evidence="e2", holds=True)
    ledger.skip("C1", "a check this run cannot decide", reason="another voice")
    assert ledger.verdicts() == [("C1", "the claim line", "holds", 1, 1), ("S1", "the first bullet", "holds", 2, 2),
                                 ("S2", "a bullet nobody checked", "FAILS", 0, 0)]
    lines = repr(ledger).splitlines()
    assert lines[0] == "Check yourself: 2 of 3 claims hold, 1 FAIL (2 of 3 checks hold)"
    assert lines[1:4] == ["✓ C1: the claim line (1 of the 3 checks)", "✓ S1: the first bullet (2 of the 3 checks)",
                          "✗ S2: a bullet nobody checked (no check)"]
    assert "✓ [C1 S1] first check" in lines and "– [C1] a check this run cannot decide" in lines
    page = ledger._repr_html_()
    assert page.index("the first bullet") < page.index("<details>") < page.index("first check")
    with pytest.raises(ClaimsNotHeld, match=r"\[S2\] a bullet nobody checked \(no check\)"):
        ledger.report()


def test_a_claim_whose_checks_were_all_skipped_is_not_checked():
    ledger = Ledger()
    ledger.check("C1", "decided", evidence="", holds=True)
    ledger.skip("S1", "undecided", reason="needs Bedrock")
    assert "1 of 2 claims hold, 1 not checked on this run (1 of 2 checks hold)" in repr(ledger)
    assert "– S1: undecided (not checked on this run)" in repr(ledger).splitlines()
    assert ledger.report() is None


def test_a_claim_line_counts_the_checks_it_rests_on_out_of_all_and_its_failures():
    """A check can back several claims: each claim line says how many of the ledger's checks it rests on, so the
    lines need not add up to the headline, and says how many of them fail."""
    ledger = Ledger(claims={"C1": "the claim", "S1": "a bullet"})
    ledger.check("C1 S1", "shared", evidence="", holds=True)
    ledger.check("C1", "own", evidence="", holds=False)
    lines = repr(ledger).splitlines()
    assert lines[1:3] == ["✗ C1: the claim (2 of the 2 checks, 1 failing)", "✓ S1: a bullet (1 of the 2 checks)"]
    ledger.skip("S2", "undecided", reason="needs Bedrock")
    ledger.claims["S3"] = "nobody checked it"
    claim_lines = [line for line in repr(ledger).splitlines() if CLAIM_LINE.match(line)]
    assert [CLAIM_LINE.match(line).group(2) for line in claim_lines] == ["C1", "S1", "S2", "S3"], repr(ledger)
    assert "<th style='text-align:left'>rests on</th>" in ledger._repr_html_()


def test_report_raises_listing_every_failing_claim(capsys):
    ledger = Ledger()
    ledger.check("C1", "first", evidence="ok", holds=True)
    ledger.check("S1", "second", evidence="bad", holds=False)
    ledger.check("S2", "third", evidence="worse", holds=False)
    with pytest.raises(ClaimsNotHeld) as raised:
        ledger.report()
    message = str(raised.value)
    assert "2 of 3 checks do not hold" in message and "[S1] second" in message and "[S2] third" in message
    assert "first" not in message


def test_report_passes_when_all_hold_and_refuses_an_empty_ledger():
    ledger = Ledger()
    ledger.check("C1", "holds", evidence=1, holds=True)
    assert ledger.report() is None
    with pytest.raises(ClaimsNotHeld, match="empty"):
        Ledger().report()


def test_html_escapes_and_long_evidence_is_cut():
    ledger = Ledger()
    ledger.check("C1", "<b>not bold</b>", evidence="x" * 1000, holds=True)
    page = ledger._repr_html_()
    assert "&lt;b&gt;not bold&lt;/b&gt;" in page and "<b>not bold</b>" not in page
    assert "(840 more characters)" in page


@pytest.mark.parametrize("ref", ["", "X1", "C", "C1 and S2", "s1"])
def test_bad_refs_are_refused(ref):
    with pytest.raises(ValueError, match="ledger ref"):
        Ledger().check(ref, "claim", evidence="", holds=True)


# --- the notebooks --------------------------------------------------------------------------------------------------

def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def text_of(value) -> str:
    return value if isinstance(value, str) else "".join(value)


def claim_ids(path: Path) -> list[str]:
    first = text_of(next(c for c in cells(path) if c["cell_type"] == "markdown")["source"])
    line = next((ln for ln in first.splitlines() if ln.startswith("**The claim:**")), None)
    assert line is not None, f"{path.name}: no '**The claim:**' line"
    ids = [i for tag in TAG.findall(line) for i in REF_PATTERN.findall(tag)]
    assert ids, f"{path.name}: the claim line has no ledger id such as [C1]"
    return ids


def summary_bullets(path: Path) -> list[str]:
    """The bullets under '## Summary', each with its continuation lines, up to the next heading."""
    markdown = "\n".join(text_of(c["source"]) for c in cells(path) if c["cell_type"] == "markdown")
    match = re.search(r"^## Summary\s*$(.*?)(?=^#{1,3} |\Z)", markdown, re.MULTILINE | re.DOTALL)
    assert match, f"{path.name}: no '## Summary' section"
    bullets: list[str] = []
    for line in match.group(1).splitlines():
        if re.match(r"^[-*] ", line):
            bullets.append(line)
        elif bullets and line.startswith("  ") and line.strip():
            bullets[-1] += " " + line.strip()
    assert bullets, f"{path.name}: the summary has no bullets"
    return bullets


def ledger_rows(path: Path) -> list[tuple[str, set[str]]]:
    """(mark, ids) of every ledger row in the committed outputs."""
    rows = []
    for cell in cells(path):
        for output in cell.get("outputs", []):
            plain = text_of(output.get("data", {}).get("text/plain", "")) or text_of(output.get("text", ""))
            if not HEADLINE.match(plain):
                continue
            for line in plain.splitlines():
                if m := ROW.match(line):
                    rows.append((m.group(1), set(REF_PATTERN.findall(m.group(2)))))
    return rows


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_claim_line_and_every_summary_bullet_have_a_ledger_row(path):
    wanted = set(claim_ids(path))
    for bullet in summary_bullets(path):
        ids = {i for tag in TAG.findall(bullet) for i in REF_PATTERN.findall(tag)}
        assert ids, f"{path.name}: summary bullet without a ledger id: {bullet[:100]!r}"
        wanted |= ids
    if path.parent.name == "templates":  # committed without outputs (tests/test_series_map.py runs it): read its checks
        code = (REPO / "companion" / "checks" / "template.py").read_text(encoding="utf-8")
        covered = {i for i in wanted if re.search(rf"[\"' ]{i}[\"' ]", code)}
        assert not wanted - covered, f"{path.name}: ids with no ledger row: {sorted(wanted - covered)}"
        return
    rows = ledger_rows(path)
    assert rows, f"{path.name}: no ledger output (a 'Check yourself' cell ending in ledger.report())"
    covered = {i for _, ids in rows for i in ids}
    assert not wanted - covered, f"{path.name}: ids with no ledger row: {sorted(wanted - covered)}"
    failed = [ids for mark, ids in rows if mark == "✗"]
    assert not failed, f"{path.name}: committed ledger rows that fail: {failed}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_check_cell_only_says_all_checks_passed(path):
    for cell in cells(path):
        if cell["cell_type"] == "code":
            assert "All checks passed" not in text_of(cell["source"]), f"{path.name}: a bare 'All checks passed.'"
