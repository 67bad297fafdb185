"""Testing a lesson's checks without running its notebook: the committed run's record, and broken copies of it.

A test module for `companion/checks/<lesson>.py` declares, for every check of the lesson's ledger, a way to break the
recorded run that this check must notice (a window off by one, a store that kept the fact, a reply without the
answer). `check_suite` turns that table into tests:

- the recorded run holds every check, and its ledger is the one the committed notebook shows (so the record is the
  notebook's current run: nbval keeps the notebook's outputs equal to a fresh run);
- each breakage makes its check FAIL (it may make others fail too);
- every check of the ledger, including those skipped on the recorded run, has a breakage: a check nobody can make
  fail is found here, not by a reader.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
RECORDS = REPO / "tests" / "records"

Breakage = Callable[[dict[str, Any]], Any]


def load_record(notebook: str) -> dict[str, Any]:
    path = RECORDS / f"{notebook}.json"
    assert path.is_file(), f"no recorded run {path.name}: run tools/refresh_notebooks.py notebooks/{notebook}.ipynb"
    return json.loads(path.read_text(encoding="utf-8"))


def committed_ledger(notebook: str) -> str:
    """The text form of the ledger the committed notebook shows."""
    nb = nbformat.read(REPO / "notebooks" / f"{notebook}.ipynb", as_version=4)
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            plain = output.get("data", {}).get("text/plain", "")
            if plain.startswith("Check yourself:"):
                return plain
    raise AssertionError(f"{notebook}: no 'Check yourself' ledger in the committed outputs")


def broken(record: dict[str, Any], breakage: Breakage) -> dict[str, Any]:
    """A deep copy of `record` with `breakage` applied (it edits the copy in place)."""
    copied = copy.deepcopy(record)
    breakage(copied)
    return copied


def check_suite(module: ModuleType, notebook: str, breakages: dict[str, Breakage],
                variants: dict[str, Breakage] | None = None) -> dict[str, Callable]:
    """The tests of one lesson's checks, to be bound to names in the test module (`globals().update(...)`).

    `breakages` maps a check's words (its claim text in the ledger) to a function that breaks the record for it.
    `variants` maps a name to a function that turns the recorded run into another valid one (other parameters, another
    voice) on which checks skipped by the recorded run are decided; the union of checks over the record and its
    variants must all have breakages.
    """
    record = load_record(notebook)
    variants = variants or {}

    def test_recorded_run_holds_and_is_the_committed_one():
        ledger = module.claims(record)
        assert not ledger.failures, repr(ledger)
        assert repr(ledger) == committed_ledger(notebook), (
            f"tests/records/{notebook}.json is not the committed notebook's run: refresh both with "
            f"tools/refresh_notebooks.py notebooks/{notebook}.ipynb")

    @pytest.mark.parametrize("name", sorted(variants) or ["(none)"])
    def test_variant_runs_hold(name):
        if name == "(none)":
            return
        ledger = module.claims(broken(record, variants[name]))
        assert not ledger.failures, repr(ledger)

    def test_every_check_has_a_breakage():
        words = {row.claim for row in module.claims(record).rows}
        for variant in variants.values():
            words |= {row.claim for row in module.claims(broken(record, variant)).rows}
        assert sorted(words - set(breakages)) == [], "checks no test can make fail"
        assert sorted(set(breakages) - words) == [], "breakages for checks the ledger does not have"

    def decided_on(claim: str) -> dict[str, Any]:
        """The recorded run, or the first variant, on which `claim` is decided (not skipped)."""
        for base in [record] + [broken(record, variant) for variant in variants.values()]:
            if any(r.claim == claim and r.status != "skipped" for r in module.claims(base).rows):
                return base
        raise AssertionError(f"{claim!r} is skipped on the recorded run and on every variant")

    @pytest.mark.parametrize("claim", sorted(breakages))
    def test_each_check_fails_on_its_broken_run(claim):
        rows = [r for r in module.claims(broken(decided_on(claim), breakages[claim])).rows if r.claim == claim]
        assert rows and rows[0].status == "FAILS", f"{claim!r} still {rows[0].status if rows else 'absent'}"

    return {
        "test_recorded_run_holds_and_is_the_committed_one": test_recorded_run_holds_and_is_the_committed_one,
        "test_variant_runs_hold": test_variant_runs_hold,
        "test_every_check_has_a_breakage": test_every_check_has_a_breakage,
        "test_each_check_fails_on_its_broken_run": test_each_check_fails_on_its_broken_run,
    }
