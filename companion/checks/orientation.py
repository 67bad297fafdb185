"""Notebook 00's ledger: an agent remembers only what reaches the model in a call, checked at the model and on disk.

The evidence never comes from the replies the lesson prints: each call's messages and reply are the ones the model
itself received and streamed (the `MeteredModel` inside the agents), the offline model's rules are asked again of fresh
models (the same calls, every statement form with and without its statement), a reply to what no call stated is
read with the model's own statement grammar for any value it names, the voices' replies are the ones
their agents kept, the Bedrock
backend is built with its model class replaced by a recorder (no credentials, no network), and the workspace is listed
and dated on disk.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from unittest import mock

from strands import Agent
from strands.models.bedrock import BedrockModel as StrandsBedrockModel

from companion.checks import save_record, texts
from companion.models import aws, backends, facts
from companion.models.offline_model import OfflineModel
from companion.support.ledger import Ledger
from companion.support.workspace import MARKER

CLAIMS = {
    "C1": "a second agent on the same model cannot answer what the first was told",
    "S1": "an agent's memory is its message list, sent whole with every call; a copy carries it",
    "S2": "the offline model knows only what is stated in the call, and never guesses",
    "S3": "the paraphrase voice gives the plain voice's answers in other words",
    "S4": "backend='bedrock' switches to Strands' BedrockModel on Nova Pro; it needs AWS credentials",
    "S5": "this notebook writes only in its own workspace folder, emptied at the top",
}
NOVA_PRO = "amazon.nova-pro-v1:0"


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"text": text}]}


def bedrock_without_credentials() -> str:
    """What `make_model("bedrock")` says on a machine with no AWS credentials (the check is made to find none)."""
    with mock.patch.object(aws, "has_credentials", return_value=False):
        try:
            backends.make_model("bedrock", bedrock_endpoint="aws")
        except backends.BackendError as error:
            return str(error)
    return "no error: the Bedrock backend was built without credentials"


def _bedrock_call() -> dict[str, Any]:
    """The class `make_model("bedrock")` builds and the arguments it passes, recorded instead of building it: no
    boto3 client is made, so no credentials are looked up and nothing is sent."""
    passed: dict[str, Any] = {}

    def recorder():
        return lambda **arguments: passed.update(arguments)

    error = None
    with mock.patch.object(aws, "has_credentials", return_value=True), \
            mock.patch.object(backends, "_guarded_bedrock_class", recorder):
        try:
            backends.make_model("bedrock", bedrock_endpoint="aws")
        except backends.BackendError as raised:  # an AWS_PROFILE that does not exist here
            error = str(raised)
    built = backends._guarded_bedrock_class()
    return {
        "class": [f"{c.__module__}.{c.__name__}" for c in built.__mro__[:2]],
        "subclass": issubclass(built, StrandsBedrockModel) and built is not StrandsBedrockModel,
        "model_id": passed.get("model_id"),
        "error": error,
        "model_id_variable": os.environ.get("WORKBOOK_MODEL_ID"),
    }


def _switch() -> dict[str, str]:
    """What the backend parameter resolves to: set, or None with $WORKBOOK_BACKEND set."""
    with mock.patch.dict(os.environ, {backends.BACKEND_ENV: "bedrock"}):
        by_variable = backends.resolve_backend(None)
    with mock.patch.dict(os.environ, {backends.BACKEND_ENV: ""}):
        by_parameter, unset = backends.resolve_backend("bedrock"), backends.resolve_backend(None)
    return {"parameter": by_parameter, "variable": by_variable, "neither": unset}


def _files(workspace_dir: Path, started: float) -> dict[str, Any]:
    paths = [workspace_dir, *workspace_dir.rglob("*")]
    return {"names": sorted(p.name for p in workspace_dir.iterdir()),
            "ages": [round(p.stat().st_mtime - started, 3) for p in paths]}


def record(first: Agent, second: Agent, heir: Agent, voices: dict[str, Agent], *, backend: str | None,
           user_name: str, favorite_number: int, workspace_dir: Path,
           started: float | None = None) -> dict[str, Any]:
    """The evidence of notebook 00's run. `first` was told the facts and asked them back; `second` was asked on the
    same model (a `MeteredModel`, which kept each call); `heir` was built with a copy of `first`'s messages and asked
    again; `voices` maps "plain" and "paraphrase" to the agents of the
    three-turn voice run.

    Only the first three calls of `first.model` and the first messages of each agent are read, so running this again
    after the exercises (which add turns) gives the same record. `started` defaults to the time the workspace was
    reset (its marker file's), so every file this run wrote is at least that new."""
    if started is None:
        started = (workspace_dir / MARKER).stat().st_mtime
    calls = [{"messages": texts(e["messages"]), "system_prompt": e["system_prompt"], "reply": e["reply"]}
             for e in first.model.exchanges[:3]]
    fresh = [OfflineModel().respond(e["messages"], e["system_prompt"])["text"] for e in first.model.exchanges[:3]]
    offline_rules = (backends.resolve_backend(backend) == "offline"
                     or backends.resolve_bedrock_endpoint() == "local")
    evidence = {
        "user_name": user_name,
        "favorite_number": favorite_number,
        "offline_rules": offline_rules,
        "calls": calls,
        "same_model": second.model is first.model,
        "first_kept": texts(first.messages[:4]),
        "second_kept": texts(second.messages[:2]),
        "fresh_replies": fresh,
        "heir": _heir_call(first, heir),
        "voices": {voice: [text for role, text in texts(agent.messages[:6]) if role == "assistant"]
                   for voice, agent in voices.items()},
        "bedrock": {**_bedrock_call(), "without_credentials": bedrock_without_credentials()},
        "switch": _switch(),
        "workspace": _files(workspace_dir, started),
    }
    return save_record(evidence, workspace_dir)


def _heir_call(first: Agent, heir: Agent) -> dict[str, Any]:
    """What the heir's first call received and replied, found at the model by the messages the heir holds."""
    held = texts(heir.messages[:5])
    for exchange in first.model.exchanges:
        if texts(exchange["messages"]) == held:
            return {"messages": held, "reply": exchange["reply"], "inherited": texts(first.messages[:4])}
    return {"messages": [], "reply": "", "inherited": texts(first.messages[:4])}


def _said(messages: list[list[str]]) -> str:
    return " ".join(text for _, text in messages)


_ROLE_NAMES = {"user": "the question", "assistant": "the reply"}


def _count(messages: list) -> str:
    return f"{len(messages)} message" + ("" if len(messages) == 1 else "s")


def _listing(names: list[str]) -> str:
    """The folder's files, each said with what it is when it is one this run writes."""
    said = {MARKER: f"{MARKER} (the marker reset_workspace writes)", "record.json": "record.json (this ledger's record)"}
    return " and ".join(said.get(name, f"{name} (left by an earlier run)") for name in names) or "nothing"


def _gives(text: str, value: str) -> bool:
    """Whether a reply holds the value as written, as whole words."""
    return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text) is not None


def claims(record: dict[str, Any]) -> Ledger:
    """Every check of notebook 00, decided from `record` alone."""
    ledger = Ledger(claims=CLAIMS)
    name, number = record["user_name"], str(record["favorite_number"])

    def names_a_fact(text: str) -> bool:
        return _gives(text, name) or _gives(text, number)

    plant, recall, stranger = record["calls"]
    ledger.check("C1", "the first agent's recall call received the name and the number",
                 evidence=f"{len(recall['messages'])} messages: {_said(recall['messages'])!r}",
                 holds=_gives(_said(recall["messages"]), name) and _gives(_said(recall["messages"]), number))
    ledger.check("C1", "and the model answered with both", evidence=f"the model streamed {recall['reply']!r}",
                 holds=_gives(recall["reply"], name) and _gives(recall["reply"], number))
    ledger.check("C1", "the second agent called the same model object",
                 evidence=f"second.model is first.model: {record['same_model']}", holds=record["same_model"])
    ledger.check("C1 S1", "the second agent's call received neither fact",
                 evidence=f"{len(stranger['messages'])} message: {_said(stranger['messages'])!r}",
                 holds=not names_a_fact(_said(stranger["messages"])))
    ledger.check("C1 S2", "so the model could not answer with them",
                 evidence=f"the model streamed {stranger['reply']!r}", holds=not names_a_fact(stranger["reply"]))
    heir = record["heir"]
    ledger.check("C1 S1", "a third agent handed the first agent's list received the facts and answered with them",
                 evidence=f"its call received {_count(heir['messages'])}, the first agent's "
                          f"{len(heir['inherited'])} first; it answered {heir['reply']!r}",
                 holds=heir["messages"][:4] == heir["inherited"] and len(heir["inherited"]) == 4
                 and _gives(heir["reply"], name) and _gives(heir["reply"], number))

    so_far = plant["messages"] + [["assistant", plant["reply"]]]
    ledger.check("S1", "the recall call received the whole conversation so far, then the question",
                 evidence=f"{len(so_far)} messages before the question; received {len(recall['messages'])}",
                 holds=recall["messages"][:-1] == so_far and recall["messages"][-1][0] == "user")
    conversation = recall["messages"] + [["assistant", recall["reply"]]]
    ledger.check("S1", "that list is agent.messages: after two turns it holds what the calls sent and got",
                 evidence=f"agent.messages holds {len(record['first_kept'])} of them, the same: "
                          f"{record['first_kept'] == conversation}",
                 holds=record["first_kept"] == conversation)
    kept = record["second_kept"]
    ledger.check("S1", "the second agent's list started empty: its call received only its question",
                 evidence=f"its call received {_count(stranger['messages'])}, the question; afterwards "
                          f"stranger.messages holds {_count(kept)}: "
                          f"{' then '.join(_ROLE_NAMES.get(role, role) for role, _ in kept)}",
                 holds=len(stranger["messages"]) == 1
                 and record["second_kept"] == stranger["messages"] + [["assistant", stranger["reply"]]])

    guess = "the offline model does not guess: asked for what no call stated, its replies state no value"
    if record["offline_rules"]:
        same = [f == c["reply"] for f, c in zip(record["fresh_replies"], record["calls"])]
        ledger.check("S2", "its reply depends on the call alone: fresh models give the same three replies",
                     evidence=f"{sum(same)} of {len(same)} replies the same from a fresh OfflineModel",
                     holds=len(same) == 3 and all(same))
        # the stranger's question, and each voice's codename question: no call held a statement of what was asked
        unstated = [("the stranger", stranger["reply"])] + [
            (f"{voice}'s codename reply", replies[2]) for voice, replies in record["voices"].items()
            if len(replies) == 3]
        stated = {who: [f"your {f.key} is {f.value}" for f in facts.statements(reply)] for who, reply in unstated}
        ledger.check("S2", guess,
                     evidence="'your X is Y' statements read (the offline model's own grammar): " + "; ".join(
                         f"{who} {found or 'none'}" for who, found in stated.items()),
                     holds=len(stated) == 3 and not any(stated.values()))
    else:
        reason = "a real model decides what to say; the C1 checks above read the values"
        ledger.skip("S2", "its reply depends on the call alone: fresh models give the same three replies",
                    reason=reason)
        ledger.skip("S2", guess, reason=reason)

    plain, paraphrase = record["voices"]["plain"], record["voices"]["paraphrase"]
    ledger.check("S3", "the paraphrase voice's replies differ from the plain voice's",
                 evidence=f"{sum(p != q for p, q in zip(plain, paraphrase))} of {len(plain)} replies differ",
                 holds=len(plain) == len(paraphrase) == 3 and all(p != q for p, q in zip(plain, paraphrase)))
    ledger.check("S3", "and both give this run's name and number",
                 evidence="name and number in the recall reply: " + ", ".join(
                     f"{voice} {_gives(replies[1], name) and _gives(replies[1], number)}"
                     for voice, replies in (("plain", plain), ("paraphrase", paraphrase))),
                 holds=all(_gives(replies[1], name) and _gives(replies[1], number) for replies in (plain, paraphrase)))

    bedrock, switch = record["bedrock"], record["switch"]
    ledger.check("S4", "backend='bedrock', or WORKBOOK_BACKEND=bedrock with backend=None, picks Bedrock",
                 evidence=f"parameter: {switch['parameter']}; variable: {switch['variable']}; "
                          f"neither: {switch['neither']}",
                 holds=(switch["parameter"], switch["variable"], switch["neither"]) == ("bedrock", "bedrock", "offline"))
    ledger.check("S4", "the Bedrock backend builds a subclass of Strands' BedrockModel",
                 evidence=f"{bedrock['class'][0]}, a subclass of {bedrock['class'][1]}", holds=bedrock["subclass"])
    if bedrock["model_id_variable"] or bedrock["error"]:
        ledger.skip("S4", "on Amazon Nova Pro", reason=bedrock["error"] or
                    f"WORKBOOK_MODEL_ID picks {bedrock['model_id_variable']} on this machine")
    else:
        ledger.equal("S4", "on Amazon Nova Pro", observed=bedrock["model_id"], expected=NOVA_PRO,
                     what="model_id passed to it")
    message, needs = bedrock["without_credentials"], "without AWS credentials it stops, naming what to set and the model to enable"
    if bedrock["error"]:
        ledger.skip("S4", needs, reason=bedrock["error"])
    else:
        parts = ["needs AWS credentials", "aws configure", f"{bedrock['model_id']} is enabled for your account"]
        found = [part for part in parts if part in message]
        ledger.check("S4", needs, evidence=f"make_model('bedrock') stopped; its message says {found}"
                     if found else f"make_model('bedrock') said {message!r}",
                     holds=found == parts)

    files = record["workspace"]
    expected = sorted([MARKER, *(["record.json"] if "record.json" in files["names"] else [])])
    ledger.check("S5", "the workspace folder holds only this run's files",
                 evidence=f"it holds {_listing(files['names'])}", holds=files["names"] == expected)
    # file times may lag the clock by milliseconds; a file left by an earlier run is seconds older
    newer = [age for age in files["ages"] if age > -1]
    ledger.check("S5", "none is older than this run: the folder was emptied at the top",
                 evidence=f"{len(newer)} of {len(files['ages'])} paths (the folder and what it holds) written "
                          "after the run began",
                 holds=len(newer) == len(files["ages"]) > 1)
    return ledger
