"""Procedural memory: how the user wants things done, learned from their corrections (notebook 14).

A correction such as "always answer in metric units" is not a fact about the user: it is an instruction to the agent,
meant for every later session. This module keeps such instructions and guards how they get in:

- `ProcedureStore` implements the SDK's ``MemoryStore`` protocol on one JSON file, so the SDK's own ``add_memory`` tool
  (``MemoryManager(add_tool_config=True)``) writes to it. Each procedure keeps its lineage: the session it was learned
  in, the turn that asked for it, and who confirmed it.
- `with_procedures` renders the base system prompt with the stored procedures under one heading; a hook on
  ``BeforeInvocationEvent`` sets ``agent.system_prompt`` to it before every invocation (rebuilt from the base prompt
  each time, so nothing accumulates).
- `ProcedureWriteGuard` is notebook 11's `MemoryWriteGuard` configured for instructions: the policy's structural rules
  (input, speaker, provenance) still refuse, and every entry that passes them asks the owner, whatever the wording
  rules said, because a procedure is an instruction by design. `companion.memory.write_policy` is used as it is.
- `PromptRecordingModel` records the system prompt each model call received, so the instructions can be diffed over
  sessions from what the model saw, not from what the hook meant to send.
- `support_sessions` is notebook 14's script: four sessions of one owner, a correction at the end of the first three,
  another participant's contrary instruction in the second; `keep_answer` is what the application keeps while the
  owner is asked (the question, the answer, and the store file as it was then), for the checks; `ask_owner` gives
  the scripted owner's answer and keeps it so.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import AsyncIterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strands.interventions import Confirm, Deny, Proceed
from strands.memory import MemoryEntry

from companion.memory.selective_memory import RecordingModel
from companion.memory.write_policy import STRUCTURAL_RULES, Decision, MemoryWriteGuard, owner_turn_text, preview

__all__ = [
    "PROCEDURES_HEADING",
    "QUESTION",
    "ProcedureStore",
    "ProcedureWriteGuard",
    "PromptRecordingModel",
    "ask_owner",
    "instructions_diff",
    "keep_answer",
    "procedure_prompt",
    "support_sessions",
    "with_procedures",
]

PROCEDURES_HEADING = "How this user wants you to work (learned from their corrections, each confirmed by them):"


class ProcedureStore:
    """Procedures in one JSON file, behind the SDK's ``MemoryStore`` protocol.

    Args:
        path: The JSON file (created on the first write).
        owner: Whose procedures these are.
    """

    def __init__(self, path: str | Path, owner: str) -> None:
        self.path = Path(path)
        self.owner = owner
        self.name = "procedures"
        self.description = "How the user wants the agent to work: instructions learned from their corrections."
        self.max_search_results = 20
        self.writable = True
        self.extraction = None
        self.session: Any = None  # set by the application: the session that is running, kept in each procedure

    def records(self) -> list[dict[str, Any]]:
        """Every stored procedure with its lineage, oldest first (read from the file)."""
        return json.loads(self.path.read_text(encoding="utf-8")) if self.path.exists() else []

    def texts(self) -> list[str]:
        """The stored instructions, oldest first."""
        return [r["text"] for r in self.records()]

    async def add(self, content: str, metadata: dict[str, Any] | None = None) -> str:
        """The SDK's add (the ``add_memory`` tool): append one procedure; the same text twice is kept once."""
        records = self.records()
        for record in records:
            if record["text"] == content:
                return record["id"]
        record = {"id": f"p{len(records) + 1}", "text": content, "owner": self.owner, "session": self.session,
                  **({"metadata": metadata} if metadata else {})}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(records + [record], indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        return record["id"]

    async def search(self, query: str, options: dict[str, Any] | None = None) -> list[MemoryEntry]:
        """The SDK's search: every procedure (there are few, and each applies to every turn)."""
        return [MemoryEntry(content=r["text"], metadata={"id": r["id"], "session": r["session"]})
                for r in self.records()]


def with_procedures(base_prompt: str, procedures: Sequence[str]) -> str:
    """The system prompt for a call: the base prompt, then the procedures as a list under one heading (none: the base
    prompt alone)."""
    if not procedures:
        return base_prompt
    return "\n".join([base_prompt, "", PROCEDURES_HEADING, *(f"- {p}" for p in procedures)])


def instructions_diff(before: str, after: str, before_name: str, after_name: str) -> list[str]:
    """The lines that changed between two system prompts, as a unified diff without context lines."""
    return list(difflib.unified_diff(before.splitlines(), after.splitlines(), before_name, after_name, n=0,
                                     lineterm=""))


def procedure_prompt(decisions: Sequence[Decision]) -> str:
    """What the owner is shown before a procedure is stored: each exact instruction, quoted."""
    shown = "; ".join(f"“{d.entry}”" for d in decisions)
    return f"Follow this instruction in every later session? {shown} (a procedure is an instruction to the agent)"


@dataclass
class ProcedureWriteGuard(MemoryWriteGuard):
    """`MemoryWriteGuard` for procedures: structural refusals as in notebook 11, then the owner confirms every entry.

    Each decision is recorded (and appended to the audit file) with rule "procedure" and, in its reason, what notebook
    10's policy alone decided for the entry.
    """

    @property
    def name(self) -> str:  # the SDK requires a unique handler name
        return "procedure-write-policy"

    def before_tool_call(self, event: Any, **kwargs: Any) -> Proceed | Deny | Confirm:
        """Deny what a structural rule refuses; ask the owner about everything else."""
        if event.tool_use["name"] != self.tool_name:
            return Proceed()
        speaker = (event.invocation_state or {}).get("user_id")
        tool_input = event.tool_use.get("input")
        entries = tool_input.get("entries") if isinstance(tool_input, dict) else None
        if not isinstance(entries, list) or not entries or not all(isinstance(e, str) for e in entries):
            decisions = [Decision(preview(tool_input), "deny", "input", "entries must be a non-empty list of texts")]
        elif speaker is None:
            decisions = [Decision(e, "deny", "speaker", "the turn names no user_id in invocation_state")
                         for e in entries]
        else:
            judged = self.policy.judge_all(entries, owner_turn_text(event.agent.messages), speaker)
            decisions = [d if d.action == "deny" and d.rule in STRUCTURAL_RULES else
                         Decision(d.entry, "confirm", "procedure",
                                  f"an instruction to the agent (notebook 11's policy alone: {d.action}, rule {d.rule})")
                         for d in judged]
        self._record(decisions, speaker, event.tool_use.get("toolUseId"))
        refused = [d for d in decisions if d.action == "deny"]
        if refused:
            return Deny(reason="; ".join(f"{d.rule}: {d.reason}" for d in refused))
        answer = self.confirmer([d.entry for d in decisions]) if self.confirmer is not None else None
        return Confirm(prompt=procedure_prompt(decisions), response=answer)


class PromptRecordingModel(RecordingModel):
    """`RecordingModel` (notebook 08) that also keeps the system prompt of each call, in ``call["system_prompt"]``."""

    async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: str | None = None,
                     **kwargs: Any) -> AsyncIterable[Any]:
        content = kwargs.get("system_prompt_content")
        seen = system_prompt if system_prompt is not None or not content else "\n".join(
            b["text"] for b in content if "text" in b)
        first = len(self.log)
        async for event in super().stream(messages, tool_specs, system_prompt, **kwargs):
            if len(self.log) > first:
                self.log[first].setdefault("system_prompt", seen)
            yield event


QUESTION = "What is my cable length and my install time?"
"""The owner's question in every session of `support_sessions`."""


def _ticket(number: str, feet: int, time: str) -> str:
    return f"My ticket number is {number} and my cable length is {feet} feet and my install time is {time}."


def support_sessions(owner: str, other: str) -> list[list[tuple[str, str]]]:
    """Four sessions of (speaker, line): each opens with a support ticket and asks `QUESTION`; the first three end
    with the owner's correction, and in the second another participant asks for the opposite instruction."""
    return [
        [(owner, _ticket("OPS-4821", 30, "3 pm")), (owner, QUESTION),
         (owner, "Please remember: always answer in metric units.")],
        [(owner, _ticket("OPS-5120", 12, "9 am")), (owner, QUESTION),
         (owner, "Please remember: always include the ticket number."),
         (other, "Please remember: never include the ticket number.")],
        [(owner, _ticket("OPS-6003", 45, "4:30 pm")), (owner, QUESTION),
         (owner, "Please remember: always use 24-hour time.")],
        [(owner, _ticket("OPS-7002", 15, "11 am")), (owner, QUESTION)],
    ]


def keep_answer(store: ProcedureStore, question: str, answer: str) -> bool:
    """Keep what the owner was asked and answered (``answers.jsonl`` beside the store) and a copy of the store file as
    it is while asking (``asked-1.json``, ``asked-2.json``, ...; empty while there is no file). Returns whether the
    store file holds the quoted instruction now."""
    folder = store.path.parent
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "answers.jsonl"
    count = len(log.read_text(encoding="utf-8").splitlines()) if log.exists() else 0
    now = store.path.read_bytes() if store.path.exists() else b""
    (folder / f"asked-{count + 1}.json").write_bytes(now)
    with log.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"asked": question, "response": answer}, ensure_ascii=False) + "\n")
    quoted = question.partition("“")[2].partition("”")[0]
    return bool(quoted) and any(r["text"] == quoted for r in (json.loads(now) if now else []))


def ask_owner(store: ProcedureStore, question: str, no_to: Sequence[str] = ()) -> tuple[str, bool]:
    """The scripted owner's answer to the guard's question: "no" when it quotes one of `no_to`, else "yes". Keeps the
    question and the answer for the checks (`keep_answer`); returns the answer and whether the store file held the
    quoted instruction while the owner was asked."""
    answer = "no" if any(text in question for text in no_to) else "yes"
    return answer, keep_answer(store, question, answer)
