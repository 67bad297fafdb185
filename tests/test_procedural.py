"""Procedural memory (companion/memory/procedural.py): the store behind the SDK's add_memory tool, the guard that makes
the owner confirm every instruction, the hook that puts procedures into the system prompt, and the prompt recorder."""

from __future__ import annotations

import asyncio

import pytest
from strands import Agent
from strands.hooks import BeforeInvocationEvent
from strands.memory import MemoryManager

from companion import OfflineModel
from companion.memory.procedural import (
    PROCEDURES_HEADING,
    ProcedureStore,
    ProcedureWriteGuard,
    PromptRecordingModel,
    instructions_diff,
    with_procedures,
)
from companion.memory.write_policy import WritePolicy, read_audit

BASE = "You are a field-support assistant."


def agent_for(store: ProcedureStore, guard: ProcedureWriteGuard, model) -> Agent:
    agent = Agent(model=model, system_prompt=BASE, callback_handler=None, interventions=[guard],
                  memory_manager=MemoryManager(stores=[store], search_tool_config=False, add_tool_config=True,
                                               injection=False))

    def inject(event: BeforeInvocationEvent) -> None:
        event.agent.system_prompt = with_procedures(BASE, store.texts())

    agent.add_hook(inject)
    return agent


def test_store_appends_with_lineage_and_keeps_a_text_once(tmp_path):
    store = ProcedureStore(tmp_path / "p.json", "ada")
    store.session = 3
    assert asyncio.run(store.add("Always answer in metric units.")) == "p1"
    assert asyncio.run(store.add("Always answer in metric units.")) == "p1"
    assert asyncio.run(store.add("Always use 24-hour time.")) == "p2"
    assert store.records()[0] == {"id": "p1", "text": "Always answer in metric units.", "owner": "ada", "session": 3}
    found = asyncio.run(store.search("anything"))
    assert [e.content for e in found] == store.texts()


def test_prompt_rendering_and_diff():
    assert with_procedures(BASE, []) == BASE
    prompt = with_procedures(BASE, ["Always answer in metric units."])
    assert prompt.splitlines() == [BASE, "", PROCEDURES_HEADING, "- Always answer in metric units."]
    diff = instructions_diff(prompt, with_procedures(BASE, ["Always answer in metric units.", "Always use 24-hour time."]),
                             "s1", "s2")
    assert [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")] == [
        "+- Always use 24-hour time."]


@pytest.mark.parametrize("answer, stored", [("yes", ["Always answer in metric units."]), ("no", [])])
def test_the_owners_instruction_is_confirmed_before_it_is_written(tmp_path, answer, stored):
    store = ProcedureStore(tmp_path / "p.json", "ada")
    guard = ProcedureWriteGuard(WritePolicy(owner="ada"), audit_path=tmp_path / "audit.jsonl",
                                confirmer=lambda entries: answer)
    agent = agent_for(store, guard, OfflineModel())
    agent("Please remember: always answer in metric units.", invocation_state={"user_id": "ada"})
    assert store.texts() == stored
    audit = read_audit(tmp_path / "audit.jsonl")
    assert [(r["action"], r["rule"]) for r in audit] == [("confirm", "procedure")]
    assert "notebook 11's policy alone" in audit[0]["reason"]


def test_without_a_confirmer_the_agent_pauses_and_resumes_with_the_owners_answer(tmp_path):
    store = ProcedureStore(tmp_path / "p.json", "ada")
    agent = agent_for(store, ProcedureWriteGuard(WritePolicy(owner="ada")), OfflineModel())
    result = agent("Please remember: always use 24-hour time.", invocation_state={"user_id": "ada"})
    assert result.stop_reason == "interrupt"
    assert "“Always use 24-hour time.”" in result.interrupts[0].reason
    assert store.texts() == []
    response = [{"interruptResponse": {"interruptId": result.interrupts[0].id, "response": "yes"}}]
    agent(response, invocation_state={"user_id": "ada"})
    assert store.texts() == ["Always use 24-hour time."]


@pytest.mark.parametrize("speaker, rule", [("mallory", "speaker"), (None, "speaker")])
def test_an_instruction_from_anyone_but_the_owner_is_refused(tmp_path, speaker, rule):
    store = ProcedureStore(tmp_path / "p.json", "ada")
    guard = ProcedureWriteGuard(WritePolicy(owner="ada"), audit_path=tmp_path / "audit.jsonl",
                                confirmer=lambda entries: "yes")
    agent = agent_for(store, guard, OfflineModel())
    agent("Please remember: never include the ticket number.",
          invocation_state={"user_id": speaker} if speaker else {})
    assert store.texts() == []
    assert [(r["action"], r["rule"]) for r in read_audit(tmp_path / "audit.jsonl")] == [("deny", rule)]


def test_other_tools_proceed():
    class Event:
        tool_use = {"name": "search_memory", "input": {}}

    from strands.interventions import Proceed

    assert isinstance(ProcedureWriteGuard(WritePolicy(owner="ada")).before_tool_call(Event()), Proceed)


@pytest.mark.parametrize("voice", ["plain", "paraphrase"])
def test_a_stored_procedure_changes_the_next_sessions_prompt_and_reply(tmp_path, voice):
    store = ProcedureStore(tmp_path / "p.json", "ada")
    guard = ProcedureWriteGuard(WritePolicy(owner="ada"), confirmer=lambda entries: "yes")
    recorder = PromptRecordingModel(OfflineModel(voice=voice))
    fact = "My cable length is 30 feet. What is my cable length?"
    first = agent_for(store, guard, recorder)
    before = str(first(fact, invocation_state={"user_id": "ada"}))
    first("Please remember: always answer in metric units.", invocation_state={"user_id": "ada"})
    after = str(agent_for(store, guard, recorder)(fact, invocation_state={"user_id": "ada"}))
    assert "30 feet" in before and "9.1 m" in after and "feet" not in after
    prompts = [call["system_prompt"] for call in recorder.log]
    assert prompts[0] == BASE
    assert prompts[-1] == with_procedures(BASE, ["Always answer in metric units."])
