"""Notebook 00's checks (companion/checks/orientation.py), each shown failing on a broken copy of the recorded run; and
the two pages notebook 00 links (docs/offline-model.md, docs/bedrock.md) showing the data and the run they describe."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from checks_harness import broken, check_suite, load_record

from companion.checks import orientation
from companion.models import aws, converse_rules, facts
from companion.models.converse_rules import NOVA_PRO_CONTEXT_WINDOW

FACT = ["user", "My name is Pin and my favorite number is 42."]


def calls(record):
    return record["calls"]


def real_model(record):
    """The same run on a real model: other words, and the offline model's own rules not checked."""
    record["offline_rules"] = False
    calls(record)[2]["reply"] = "I don't know that. Could you tell me?"
    record["second_kept"][1][1] = "I don't know that. Could you tell me?"
    record["fresh_replies"] = ["(not asked)"] * 3


def another_model_id(record):
    record["bedrock"]["model_id_variable"] = record["bedrock"]["model_id"] = "amazon.nova-lite-v1:0"
    record["bedrock"]["without_credentials"] = record["bedrock"]["without_credentials"].replace(
        "amazon.nova-pro-v1:0", "amazon.nova-lite-v1:0")


def missing_profile(record):
    record["bedrock"]["error"] = "The AWS profile 'nobody' (from AWS_PROFILE) does not exist."
    record["bedrock"]["model_id"] = None


BREAKAGES = {
    # the first agent's list lost the turn that told the facts (a window of one message)
    "the first agent's recall call received the name and the number":
        lambda r: calls(r)[1]["messages"].__delitem__(slice(0, 2)),
    "and the model answered with both":
        lambda r: calls(r)[1].update(reply="I cannot see your name in this conversation."),
    # a second agent built on another model object
    "the second agent called the same model object":
        lambda r: r.update(same_model=False),
    # a store that leaked the fact into the second agent's call
    "the second agent's call received neither fact":
        lambda r: calls(r)[2]["messages"].insert(0, FACT),
    # a reply that names the fact although its call did not hold it (a guess, or a leak)
    "so the model could not answer with them":
        lambda r: calls(r)[2].update(reply="Your name is Pin."),
    # a copy of the list that lost the turn telling the facts
    "a third agent handed the first agent's list received the facts and answered with them":
        lambda r: r["heir"].update(messages=r["heir"]["messages"][2:]),
    # an agent that sent only the last message, not its whole list
    "the recall call received the whole conversation so far, then the question":
        lambda r: calls(r)[1]["messages"].pop(1),
    "that list is agent.messages: after two turns it holds what the calls sent and got":
        lambda r: r["first_kept"].pop(),
    # a second agent that did not start empty
    "the second agent's list started empty: its call received only its question":
        lambda r: calls(r)[2]["messages"].insert(0, ["user", "Hello."]),
    # a model that guesses a name
    "its reply depends on the call alone: fresh models give the same three replies":
        lambda r: r["fresh_replies"].__setitem__(2, "Your name is Pin."),
    # a model that guesses other values when the call held none
    "the offline model does not guess: asked for what no call stated, its replies state no value":
        lambda r: calls(r)[2].update(reply="Your name is Sam and your favorite number is 7."),
    # a model that knows a fact it was not told
    "the paraphrase voice's replies differ from the plain voice's":
        lambda r: r["voices"]["paraphrase"].__setitem__(0, r["voices"]["plain"][0]),
    # a paraphrase that lost the number
    "and both give this run's name and number":
        lambda r: r["voices"]["paraphrase"].__setitem__(1, "You asked about your name: it is Pin."),
    "backend='bedrock', or WORKBOOK_BACKEND=bedrock with backend=None, picks Bedrock":
        lambda r: r["switch"].update(variable="offline"),
    "the Bedrock backend builds a subclass of Strands' BedrockModel":
        lambda r: r["bedrock"].update(subclass=False),
    "on Amazon Nova Pro":
        lambda r: r["bedrock"].update(model_id="amazon.nova-lite-v1:0"),
    # a backend that goes on without credentials (and fails later, at the first call)
    "without AWS credentials it stops, naming what to set and the model to enable":
        lambda r: r["bedrock"].update(without_credentials="no error: the Bedrock backend was built without credentials"),
    # a file left by an earlier run
    "the workspace folder holds only this run's files":
        lambda r: r["workspace"]["names"].append("map.json"),
    "none is older than this run: the folder was emptied at the top":
        lambda r: r["workspace"]["ages"].append(-3600.0),
}

VARIANTS = {"a real model": real_model, "WORKBOOK_MODEL_ID set": another_model_id,
            "an AWS_PROFILE that does not exist": missing_profile}

globals().update(check_suite(orientation, "00_orientation", BREAKAGES, VARIANTS))


def test_a_real_model_skips_only_the_offline_models_own_rules():
    ledger = orientation.claims(broken(load_record("00_orientation"), real_model))
    skipped = [row.claim for row in ledger.rows if row.status == "skipped"]
    assert skipped == [claim for claim in BREAKAGES if claim.startswith(
        ("the offline model does not guess", "its reply depends on the call alone", "a fresh offline model reads"))]


# --- the pages notebook 00 links: docs/offline-model.md and docs/bedrock.md show the data and the run they describe ---

DOCS = Path(__file__).resolve().parent.parent / "docs"


def table(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                     + ["| " + " | ".join(row) + " |" for row in rows])


def grammar_table() -> str:
    """companion.models.facts.rule_rows() as docs/offline-model.md shows it: examples and results as code, and a
    tag in a form escaped so that it shows as text."""
    return table(["kind", "form", "example", "the model"],
                 [[r["kind"], r["form"].replace("<", "&lt;"), f"`{r['example']}`", f"`{r['the model']}`"]
                  for r in facts.rule_rows()])


def refusals_table() -> str:
    return table(["rule", "checks", "message (as reported)"],
                 [[r["rule"], r["checks"], r["Bedrock says"]] for r in converse_rules.rule_rows()])


def test_the_offline_model_page_shows_every_rule_and_refusal():
    page = (DOCS / "offline-model.md").read_text(encoding="utf-8")
    assert grammar_table() in page, "docs/offline-model.md's grammar table differs from facts.rule_rows():\n" + grammar_table()
    assert refusals_table() in page, "its refusals table differs from converse_rules.rule_rows():\n" + refusals_table()


def test_the_bedrock_page_shows_what_its_local_run_prints(tmp_path):
    page = (DOCS / "bedrock.md").read_text(encoding="utf-8")
    code = re.search(r"Run from the repository root with `\.venv/bin/python`:\n\n```python\n(.*?)```", page, re.S).group(1)
    shown = re.search(r"On strands-agents [\d.]+ it prints:\n\n```\n(.*?)```", page, re.S).group(1)
    env = {**os.environ, "WORKBOOK_WORKSPACE_ROOT": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", code], cwd=DOCS.parent, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout == shown


def test_the_bedrock_page_shows_the_call_the_backend_makes():
    page = (DOCS / "bedrock.md").read_text(encoding="utf-8")
    bedrock = load_record("00_orientation")["bedrock"]
    assert f"model_id={bedrock['model_id']!r}" in page and f"{bedrock['class'][1]}" in page
    assert f"connect_timeout={aws.CONNECT_TIMEOUT}, read_timeout={aws.READ_TIMEOUT}" in page
    assert f"'total_max_attempts': {aws.MAX_ATTEMPTS}" in page
    assert f"context_window_limit={NOVA_PRO_CONTEXT_WINDOW}" in page


def test_the_bedrock_page_shows_the_message_without_credentials(monkeypatch):
    """Notebook 00 no longer prints it: docs/bedrock.md shows it, as make_model("bedrock") says it with no region set."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "WORKBOOK_MODEL_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    message = orientation.bedrock_without_credentials()
    assert message.startswith("The bedrock backend needs AWS credentials") and "in us-east-1" in message, message
    page = (DOCS / "bedrock.md").read_text(encoding="utf-8")
    assert f"\n  ```\n  {message}\n  ```\n" in page, message
