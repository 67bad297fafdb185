"""A session killed in the middle of a tool call: what the SDK restores, what Bedrock refuses, and the file repair."""

from __future__ import annotations

import json

import pytest
from strands import Agent, tool
from strands.session import FileSessionManager
from strands.session.repository_session_manager import RepositorySessionManager

from companion.models.converse_rules import ValidationException, violations
from companion.models.offline_model import OfflineModel
from companion.sessions.crash_repair import (
    INTERRUPTED_REPLY,
    PartialRepairError,
    RepairRefusedError,
    RequestLog,
    digests,
    repair_interrupted_tool_use,
    repair_plan_path,
    sdk_excerpt,
    trailing_tool_use_ids,
    unanswered_tool_uses,
)
from companion.sessions.restart_runner import kill_during_tool
from companion.sessions.session_files import CorruptSessionError, message_files, message_rows
from companion.support.workspace import UnsafePathError

QUESTION = "What is my codename?"


@tool
def search_memory(query: str) -> str:
    """Search the user's saved memories."""
    return json.dumps([{"content": "The user's codename is VEGA."}])


def crashed(storage, session_id="crash"):
    """A session as a killed tool call leaves it: the user's question and the assistant's toolUse, nothing after."""
    agent = Agent(model=OfflineModel(), tools=[search_memory], callback_handler=None,
                  session_manager=FileSessionManager(session_id=session_id, storage_dir=str(storage)))
    agent(QUESTION)
    for path in message_files(storage, session_id)[2:]:
        path.unlink()
    return storage


def resume(storage, session_id="crash"):
    log = RequestLog(OfflineModel(validate_requests=True))
    agent = Agent(model=log, tools=[search_memory], callback_handler=None,
                  session_manager=FileSessionManager(session_id=session_id, storage_dir=str(storage)))
    return agent, log


def roles(messages):
    return [m["role"] for m in messages]


def test_a_killed_process_leaves_the_tool_use_without_a_result(workspace_root):
    storage = workspace_root / "crash" / "sessions"
    result = kill_during_tool(QUESTION, backend="offline", session_id="killed", storage_dir=storage)
    assert result.returncode == -9, "killed by SIGKILL"
    assert result.stdout == "messages restored: 0\n"
    rows = message_rows(storage, "killed")
    assert [(r["file"], r["role"], r["blocks"]) for r in rows] == [
        ("message_0.json", "user", "text"), ("message_1.json", "assistant", "toolUse search_memory")]
    assert trailing_tool_use_ids(storage, "killed") == ["tooluse_offline_1"]


def test_the_sdk_restore_leads_to_two_user_messages_which_bedrock_refuses(tmp_path):
    storage = crashed(tmp_path / "s")
    agent, log = resume(storage)
    assert roles(agent.messages) == ["user", "assistant"], "the trailing toolUse is restored as it is"
    with pytest.raises(ValidationException, match="must alternate between user and assistant roles"):
        agent(QUESTION)
    (request,) = log.requests
    assert roles(request) == ["user", "assistant", "user", "user"]
    assert [rule for rule, _ in violations(request)] == ["alternating-roles"]
    assert request[2]["content"][0]["toolResult"]["content"] == [{"text": "Tool was interrupted."}]


def test_the_repair_writes_the_result_and_a_reply_and_keeps_every_file(tmp_path):
    storage = crashed(tmp_path / "s")
    before = digests(message_files(storage, "crash"))
    written = repair_interrupted_tool_use(storage, "crash")
    assert [p.name for p in written] == ["message_2.json", "message_3.json"]
    rows = message_rows(storage, "crash")
    assert [(r["role"], r["blocks"]) for r in rows] == [
        ("user", "text"), ("assistant", "toolUse search_memory"), ("user", "toolResult error"), ("assistant", "text")]
    result = json.loads(written[0].read_text())["message"]["content"][0]["toolResult"]
    assert result == {"toolUseId": "tooluse_offline_1", "status": "error",
                      "content": [{"text": "Tool was interrupted."}]}
    assert json.loads(written[1].read_text())["message"]["content"] == [{"text": INTERRUPTED_REPLY}]
    agent, log = resume(storage)
    assert "VEGA" in str(agent(QUESTION))
    assert all(violations(request) == [] for request in log.requests)
    after = digests(message_files(storage, "crash"))
    assert {name: after[name] for name in before} == before, "no old file changed"
    assert len(after) == 8


def test_nothing_to_repair_writes_nothing(tmp_path):
    storage = tmp_path / "s"
    Agent(model=OfflineModel(), callback_handler=None,
          session_manager=FileSessionManager(session_id="fine", storage_dir=str(storage)))("My name is Pin.")
    files = sorted(p for p in storage.rglob("*") if p.is_file())
    before = {p: p.read_bytes() for p in files}
    assert repair_interrupted_tool_use(storage, "fine") == []
    assert {p: p.read_bytes() for p in sorted(q for q in storage.rglob("*") if q.is_file())} == before
    crashed(storage, "twice")
    assert len(repair_interrupted_tool_use(storage, "twice")) == 2
    assert repair_interrupted_tool_use(storage, "twice") == [], "a repaired session needs no second repair"


def test_a_missing_session_is_refused_and_not_created(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing written"):
        repair_interrupted_tool_use(tmp_path / "s", "nobody")
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("bad", ["../x", "a/b", "..", ""])
def test_an_unsafe_session_id_is_refused(tmp_path, bad):
    with pytest.raises(UnsafePathError):
        repair_interrupted_tool_use(tmp_path, bad)
    assert list(tmp_path.iterdir()) == []


def test_a_corrupt_file_is_named_and_nothing_is_written(tmp_path):
    storage = crashed(tmp_path / "s")
    damaged = message_files(storage, "crash")[0]
    damaged.write_text(damaged.read_text()[:50])
    with pytest.raises(CorruptSessionError, match="message_0.json"):
        repair_interrupted_tool_use(storage, "crash")
    assert [p.name for p in message_files(storage, "crash")] == ["message_0.json", "message_1.json"]
    assert len(damaged.read_text()) == 50, "the damaged file is left as it was"


def test_a_trailing_user_message_is_not_touched(tmp_path):
    storage = crashed(tmp_path / "s")
    agent, _ = resume(storage)
    with pytest.raises(ValidationException):
        agent(QUESTION)  # the SDK's own fix leaves user(toolResult), user(text) on disk
    assert repair_interrupted_tool_use(storage, "crash") == []


def test_sdk_excerpt_shows_numbered_lines():
    text = sdk_excerpt(RepositorySessionManager._fix_broken_tool_use, "Trailing message excluded", "]")
    lines = text.splitlines()
    assert lines[0].startswith("strands/session/repository_session_manager.py, ")
    assert "Trailing message excluded" in lines[1] and lines[-1].strip().endswith("]")
    assert all(line[:5].strip().isdigit() for line in lines[1:])


# Issue 31, item 6: every unanswered toolUse, a plan first and a rerun that finishes, a clear error for a missing id.


def add_messages(storage, session_id, *messages):
    """Append messages to a session's files as an agent would (the SDK's repository, the next numbers)."""
    from strands.types.content import _ensure_tracking_id
    from strands.types.session import SessionMessage

    repository = FileSessionManager(session_id=session_id, storage_dir=str(storage))
    last = repository.list_messages(session_id, "default")[-1].message_id
    for offset, message in enumerate(messages, start=1):
        _ensure_tracking_id(message)
        repository.create_message(session_id, "default", SessionMessage.from_message(message, last + offset))


def test_an_unanswered_tool_use_in_the_middle_is_answered_in_the_next_user_message(tmp_path):
    """Before the fix the repair looked at the last message only: it returned [] and the session stayed refused."""
    storage = crashed(tmp_path / "s")
    add_messages(storage, "crash", {"role": "user", "content": [{"text": "Are you there?"}]},
                 {"role": "assistant", "content": [{"text": "Yes."}]})
    agent, _ = resume(storage)
    with pytest.raises(ValidationException):
        agent(QUESTION)  # the SDK's restore inserts a user toolResult before the user's text: two users in a row
    storage = crashed(tmp_path / "t")
    add_messages(storage, "crash", {"role": "user", "content": [{"text": "Are you there?"}]},
                 {"role": "assistant", "content": [{"text": "Yes."}]})
    before = digests(message_files(storage, "crash"))
    written = repair_interrupted_tool_use(storage, "crash")
    assert [p.name for p in written] == ["message_2.json"]
    content = json.loads(written[0].read_text())["message"]["content"]
    assert content == [{"toolResult": {"toolUseId": "tooluse_offline_1", "status": "error",
                                       "content": [{"text": "Tool was interrupted."}]}}, {"text": "Are you there?"}]
    after = digests(message_files(storage, "crash"))
    assert {n for n in before if before[n] != after[n]} == {"message_2.json"}, "only the answering file changed"
    agent, log = resume(storage)
    assert "VEGA" in str(agent(QUESTION)) and all(violations(r) == [] for r in log.requests)
    assert repair_interrupted_tool_use(storage, "crash") == [], "nothing left to answer"


def test_every_unanswered_tool_use_is_answered_in_one_repair(tmp_path):
    storage = crashed(tmp_path / "s")
    add_messages(storage, "crash", {"role": "user", "content": [{"text": "Are you there?"}]},
                 {"role": "assistant", "content": [{"toolUse": {"toolUseId": "late", "name": "search_memory",
                                                                "input": {"query": "codename"}}}]})
    assert unanswered_tool_uses(storage, "crash") == [("message_1.json", ["tooluse_offline_1"]),
                                                      ("message_3.json", ["late"])]
    written = repair_interrupted_tool_use(storage, "crash")
    assert [p.name for p in written] == ["message_2.json", "message_4.json", "message_5.json"]
    assert unanswered_tool_uses(storage, "crash") == []
    agent, log = resume(storage)
    assert "VEGA" in str(agent(QUESTION)) and all(violations(r) == [] for r in log.requests)


def test_a_tool_use_followed_by_an_assistant_message_is_refused_naming_the_files(tmp_path):
    storage = crashed(tmp_path / "s")
    add_messages(storage, "crash", {"role": "assistant", "content": [{"text": "Hm."}]})
    before = digests(message_files(storage, "crash"))
    with pytest.raises(RepairRefusedError, match=r"message_1\.json.*message_2\.json.*Nothing was written"):
        repair_interrupted_tool_use(storage, "crash")
    assert digests(message_files(storage, "crash")) == before


def test_a_failed_second_write_is_reported_and_finished_by_a_rerun(tmp_path, monkeypatch):
    """Before the fix an ENOSPC on the second file left the user's toolResult last: a rerun saw no trailing toolUse,
    reported nothing to do, and the session could never resume."""
    storage = crashed(tmp_path / "s")
    real, calls = FileSessionManager.create_message, []

    def full_disk(self, *args, **kwargs):
        calls.append(args)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(FileSessionManager, "create_message", full_disk)
    with pytest.raises(PartialRepairError) as caught:
        repair_interrupted_tool_use(storage, "crash")
    assert "No space left on device" in str(caught.value) and "message_3.json" in str(caught.value)
    assert [p.name for p in caught.value.done] == ["message_2.json"]
    assert [p.name for p in caught.value.left] == ["message_3.json"]
    assert repair_plan_path(storage, "crash").is_file(), "the plan stays for the rerun"
    monkeypatch.setattr(FileSessionManager, "create_message", real)
    written = repair_interrupted_tool_use(storage, "crash")  # the rerun finishes the plan
    assert [p.name for p in written] == ["message_2.json", "message_3.json"]
    assert not repair_plan_path(storage, "crash").exists()
    agent, log = resume(storage)
    assert "VEGA" in str(agent(QUESTION)) and all(violations(r) == [] for r in log.requests)


def test_a_tool_use_without_an_id_is_a_clear_error(tmp_path):
    """Before the fix: KeyError: 'toolUseId'."""
    storage = crashed(tmp_path / "s")
    path = message_files(storage, "crash")[1]
    data = json.loads(path.read_text())
    del data["message"]["content"][0]["toolUse"]["toolUseId"]
    path.write_text(json.dumps(data))
    for call in (repair_interrupted_tool_use, trailing_tool_use_ids):
        with pytest.raises(CorruptSessionError, match=r"message_1\.json.*toolUseId"):
            call(storage, "crash")
    assert len(message_files(storage, "crash")) == 2, "nothing written"
