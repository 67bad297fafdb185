"""Issue 18: the shared lineage record, its helpers, and lineage on summaries, state entries and markdown lines."""

from __future__ import annotations

import json

import pytest
from strands import Agent
from strands.agent.state import AgentState
from strands.memory import InvocationTrigger, MemoryManager, ModelExtractor
from strands.session import FileSessionManager

from companion.memory.lineage import (
    DERIVATIONS,
    STATE_LINEAGE_KEY,
    Lineage,
    LineageExtractor,
    LineageRecord,
    derived_lineage,
    lineage_of_messages,
    manifest_state,
    markdown_line,
    message_id,
    message_lineage,
    messages_named,
    read_markdown_lineage,
    state_lineage,
    write_state,
)
from companion.models.converse_rules import ConverseSummarizingConversationManager
from companion.models.offline_model import OfflineModel
from companion.sessions.session_files import agent_dir, message_files


def test_the_record_round_trips_and_refuses_an_unknown_derivation():
    record = LineageRecord("extraction", "s1", (5, 4, 4), ("b", "a", "b"), user="ada", at="2026-01-05T09:00:00")
    assert record.messages == (4, 5) and record.message_ids == ("b", "a"), "indexes sorted, ids deduplicated"
    data = record.to_dict()
    assert data == {"derived": "extraction", "session_id": "s1", "messages": [4, 5], "message_ids": ["b", "a"],
                    "user": "ada", "at": "2026-01-05T09:00:00"}
    assert LineageRecord.from_dict(json.loads(json.dumps(data))) == record
    assert LineageRecord.from_dict({**data, "replaced_by": {"id": "m2"}}) == record, "a reader's keys are ignored"
    assert LineageRecord("direct write").to_dict() == {"derived": "direct write", "session_id": None, "messages": []}
    with pytest.raises(ValueError, match="derived must be one of"):
        LineageRecord("guess")
    assert set(DERIVATIONS) >= {"extraction", "summary", "state write", "tool call", "embedding", "direct write"}
    assert messages_named(data) == "session s1, messages 4, 5"
    assert record.named() == "extraction from session s1, messages 4, 5"


def test_the_hook_stamps_every_message_with_its_session_index_and_the_sdk_keeps_its_tracking_id(tmp_path):
    session = FileSessionManager(session_id="ada-chat", storage_dir=str(tmp_path))
    agent = Agent(model=OfflineModel(), session_manager=session, hooks=[Lineage(session)], callback_handler=None)
    agent("My editor is Vim.")
    agent("ok")
    files = message_files(tmp_path, "ada-chat")
    assert len(files) == len(agent.messages) == 4
    for index, path in enumerate(files):
        assert message_lineage(agent.messages[index]) == {"session_id": "ada-chat", "message_index": index,
                                                          "message_id": message_id(agent.messages[index])}
        stored = json.loads(path.read_text(encoding="utf-8"))["message"]
        assert message_id(stored) and message_id(stored) == message_id(agent.messages[index]), "the file holds the id"
    origin = lineage_of_messages(agent.messages[:2], "extraction", user="ada")
    assert origin.session_id == "ada-chat" and origin.messages == (0, 1) and origin.user == "ada"
    assert origin.message_ids == tuple(message_id(m) for m in agent.messages[:2])


def test_messages_of_two_sessions_are_refused():
    a = {"role": "user", "content": [], "metadata": {"custom": {"lineage": {"session_id": "a", "message_index": 0}}}}
    b = {"role": "user", "content": [], "metadata": {"custom": {"lineage": {"session_id": "b", "message_index": 0}}}}
    with pytest.raises(ValueError, match="several sessions"):
        lineage_of_messages([a, b], "extraction")


def test_the_extractor_wrapper_gives_each_fact_the_messages_of_its_batch(tmp_path):
    from companion.memory.selective_memory import SelectiveMemoryStore, lineage

    session = FileSessionManager(session_id="ada-x", storage_dir=str(tmp_path / "s"))
    store = SelectiveMemoryStore(tmp_path / "m.json", user="ada",
                                 extraction={"trigger": InvocationTrigger(), "extractor": ModelExtractor()})
    assert isinstance(store.extraction["extractor"], LineageExtractor)
    agent = Agent(model=OfflineModel(), session_manager=session, hooks=[Lineage(session)], callback_handler=None,
                  memory_manager=MemoryManager(stores=[store], search_tool_config=False, injection=False))
    agent("ok")
    agent("My editor is Vim.")
    (record,) = store.records()
    origin = lineage(record)
    assert origin["derived"] == "extraction" and origin["session_id"] == "ada-x" and origin["user"] == "ada"
    files = message_files(tmp_path / "s", "ada-x")
    said = [json.loads(files[i].read_text(encoding="utf-8"))["message"] for i in origin["messages"]]
    assert any("Vim" in b.get("text", "") for m in said for b in m["content"])
    assert origin["message_ids"] == [message_id(m) for m in said]


def summarizing_run(tmp_path, turns, stamp=True):
    session = FileSessionManager(session_id="ada-sum", storage_dir=str(tmp_path))
    manager = ConverseSummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
    agent = Agent(model=OfflineModel(), session_manager=session, conversation_manager=manager,
                  hooks=[Lineage(session)] if stamp else [], state={"user_id": "ada"}, callback_handler=None)
    for turn in range(turns):
        agent(f"My number {turn} is {turn * 7}.")
        if turn % 2:
            manager.reduce_context(agent)  # summarize now, as an overflow would
    agent("ok")  # the session saves agent.json (and the summary in it) after an invocation
    return agent, manager


@pytest.mark.parametrize("stamp", [True, False], ids=["with the Lineage hook", "without"])
def test_a_summary_names_the_messages_it_folded_also_through_an_earlier_summary(tmp_path, stamp):
    agent, manager = summarizing_run(tmp_path, 4, stamp)
    summary = manager._summary_message
    record = derived_lineage(summary)
    assert record is not None and record.derived == "summary" and record.user == "ada"
    assert record.session_id == "ada-sum"
    assert record.parents, "the second summary folded the first one"
    files = {int(p.stem.split("_")[1]): json.loads(p.read_text(encoding="utf-8"))["message"]
             for p in message_files(tmp_path, "ada-sum")}
    folded = manager.removed_message_count
    assert record.messages == tuple(range(folded)), "every message folded so far, by its session index"
    assert record.message_ids == tuple(message_id(files[i]) for i in range(folded)), "and by its tracking id"
    kept = [m for m in agent.messages[1:]]
    assert all(message_id(m) not in record.message_ids for m in kept), "no kept message is named"
    saved = json.loads((agent_dir(tmp_path, "ada-sum") / "agent.json").read_text(encoding="utf-8"))
    on_disk = saved["conversation_manager_state"]["summary_message"]
    assert derived_lineage(on_disk) == record, "the lineage is saved with the summary in agent.json"


def test_the_summary_lineage_never_reaches_the_model(tmp_path):
    from companion.models.metering import MeteredModel

    session = FileSessionManager(session_id="ada-sum", storage_dir=str(tmp_path))
    manager = ConverseSummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
    metered = MeteredModel(OfflineModel())
    agent = Agent(model=metered, session_manager=session, conversation_manager=manager,
                  hooks=[Lineage(session)], callback_handler=None)
    for turn in range(3):
        agent(f"My number {turn} is {turn * 7}.")
    manager.reduce_context(agent)
    agent("What is my number 0?")
    assert "lineage" in json.dumps(agent.messages[0]["metadata"])
    assert not any("lineage" in json.dumps(x["messages"]) for x in metered.exchanges)


def test_state_entries_keep_their_lineage_beside_them_and_out_of_the_manifest():
    state = AgentState({"plan": "team"})
    origin = LineageRecord("state write", "ada-chat", (4,), user="ada", at="2026-01-05T09:00:00")
    write_state(state, "codename", "ORION", origin)
    assert state.get("codename") == "ORION" and state_lineage(state, "codename") == origin
    assert state_lineage(state, "plan") is None, "an entry set without write_state has no lineage"
    assert manifest_state(state) == {"plan": "team", "codename": "ORION"}
    assert manifest_state(state.get()) == manifest_state(state)
    assert state_lineage(state.get(), "codename") == origin, "readable from agent.json's dict too"
    with pytest.raises(ValueError, match="reserved|holds lineage"):
        write_state(state, STATE_LINEAGE_KEY, 1, origin)


def test_markdown_lines_carry_their_lineage_in_a_comment():
    origin = LineageRecord("extraction", "ada-selective", (8, 9), user="ada", at="2026-01-05T10:34:00")
    line = markdown_line("The user's editor is Vim.", origin)
    assert line.startswith("- The user's editor is Vim. <!-- lineage {") and line.endswith("} -->")
    text = "\n".join(["# Facts about ada", line, markdown_line("A line without lineage.", None)])
    shown = LineageRecord("extraction", "ada-selective", (8, 9), at="2026-01-05T10:34:00")  # the file is ada's
    assert read_markdown_lineage(text) == [("The user's editor is Vim.", shown), ("A line without lineage.", None)]


def test_the_hook_stamps_a_summary_the_sdk_s_own_manager_made(tmp_path):
    from strands.agent.conversation_manager import SummarizingConversationManager

    session = FileSessionManager(session_id="ada-sdk", storage_dir=str(tmp_path))
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
    agent = Agent(model=OfflineModel(), session_manager=session, conversation_manager=manager,
                  hooks=[Lineage(session)], state={"user_id": "ada"}, callback_handler=None)
    for turn in range(4):
        agent(f"My number {turn} is {turn * 7}.")
        if turn % 2:
            manager.reduce_context(agent)
    agent("ok")
    saved = json.loads((agent_dir(tmp_path, "ada-sdk") / "agent.json").read_text(encoding="utf-8"))
    record = derived_lineage(saved["conversation_manager_state"]["summary_message"])
    files = {int(p.stem.split("_")[1]): json.loads(p.read_text(encoding="utf-8"))["message"]
             for p in message_files(tmp_path, "ada-sdk")}
    folded = manager.removed_message_count
    assert record is not None and record.derived == "summary" and record.user == "ada"
    assert record.session_id == "ada-sdk" and record.messages == tuple(range(folded)) and folded > 2
    assert record.message_ids == tuple(message_id(files[i]) for i in range(folded))
