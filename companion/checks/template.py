"""The template's checks, the shape every lesson's module keeps: `record` reads the run, `claims` decides from it.

Copy this file to companion/checks/<lesson>.py for a new notebook, and tests/test_checks_template.py beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from strands import Agent

from companion.checks import save_record, texts
from companion.support.ledger import Ledger

CLAIMS = {"C1": "a fact stated in this conversation reaches the model", "S1": "the reply names the codename"}


def record(agent: Agent, *, codename: str, workspace_dir: Path) -> dict[str, Any]:
    """What each call received and replied, at the model (the agent's model is a `MeteredModel`)."""
    calls = [{"messages": texts(e["messages"]), "reply": e["reply"]} for e in agent.model.exchanges]
    return save_record({"codename": codename, "calls": calls}, workspace_dir)


def claims(record: dict[str, Any]) -> Ledger:
    ledger = Ledger(claims=CLAIMS)
    codename, last = record["codename"], record["calls"][-1]
    received = " ".join(text for role, text in last["messages"] if role == "user")
    ledger.check("C1", "the last call received the codename in a user message",
                 evidence=f"{codename!r} in the user messages: {codename in received}", holds=codename in received)
    ledger.check("S1", "the reply names the codename", evidence=last["reply"].strip(), holds=codename in last["reply"])
    return ledger
