"""The template's checks, each shown failing on a broken run; the run is made here, the way the template makes it."""

from __future__ import annotations

import copy

import pytest
from strands import Agent

from companion import OfflineModel
from companion.checks import template
from companion.models.metering import MeteredModel


@pytest.fixture
def record(tmp_path):
    agent = Agent(model=MeteredModel(OfflineModel()), callback_handler=None)
    agent("My codename is ORION.")
    agent("What is my codename?")
    return template.record(agent, codename="ORION", workspace_dir=tmp_path)


def test_the_run_holds(record):
    assert not template.claims(record).failures


@pytest.mark.parametrize("claim, breakage", [
    ("the last call received the codename in a user message",
     lambda r: r["calls"][-1]["messages"].__setitem__(0, ["user", "My codename is a secret."])),
    ("the reply names the codename", lambda r: r["calls"][-1].update(reply="I cannot see your codename.")),
])
def test_each_check_fails_on_its_broken_run(record, claim, breakage):
    broken = copy.deepcopy(record)
    breakage(broken)
    assert template.claims(broken).row(claim).status == "FAILS"
