"""Listing a session, reading agent.json's blocks, and refusing damaged files without deleting them."""

from __future__ import annotations

import json

import pytest
from strands import Agent
from strands.session import FileSessionManager

from companion.models.offline_model import OfflineModel
from companion.sessions.session_files import (
    CorruptSessionError,
    agent_dir,
    agent_json_blocks,
    check_session,
    files_with_sizes,
    message_files,
    session_dir,
    show_agent_json,
    tree,
)
from companion.support.workspace import UnsafePathError


@pytest.fixture
def session(tmp_path):
    agent = Agent(
        model=OfflineModel(),
        session_manager=FileSessionManager(session_id="demo", storage_dir=str(tmp_path / "sessions")),
        callback_handler=None,
    )
    agent.state.set("plan", "pro")
    agent("My name is Pin.")
    return tmp_path / "sessions"


def test_tree_shows_relative_paths_and_byte_sizes(session, tmp_path):
    text = tree(session, tmp_path)
    assert text.splitlines()[0] == "sessions/"
    assert "session_demo/" in text
    size = (agent_dir(session, "demo") / "agent.json").stat().st_size
    assert f"agent.json  ({size:,} bytes)" in text
    assert str(tmp_path) not in text


def test_tree_without_sizes_lists_the_same_names(session, tmp_path):
    with_sizes, names_only = tree(session, tmp_path).splitlines(), tree(session, tmp_path, sizes=False).splitlines()
    assert [line.split("  (")[0] for line in with_sizes] == names_only
    assert not any("bytes" in line for line in names_only) and any("agent.json" in line for line in names_only)


def test_tree_of_a_missing_directory(tmp_path):
    assert tree(tmp_path / "nope", tmp_path) == "nope/  (does not exist)"


def test_files_sort_naturally(tmp_path):
    for index in [10, 2, 1]:
        (tmp_path / f"message_{index}.json").write_text("{}")
    assert list(files_with_sizes(tmp_path)) == ["message_1.json", "message_2.json", "message_10.json"]
    assert tree(tmp_path).splitlines()[1:] == [
        "├── message_1.json  (2 bytes)",
        "├── message_2.json  (2 bytes)",
        "└── message_10.json  (2 bytes)",
    ]


def test_message_files_follow_messages(session):
    assert [p.name for p in message_files(session, "demo")] == ["message_0.json", "message_1.json"]
    assert message_files(session, "other") == []


def test_agent_json_blocks(session):
    blocks = agent_json_blocks(agent_dir(session, "demo") / "agent.json")
    assert list(blocks) == ["state", "conversation_manager_state", "_internal_state"]
    assert blocks["state"] == {"plan": "pro"}
    shown = show_agent_json(agent_dir(session, "demo") / "agent.json")
    assert "created_at" not in shown and '"removed_message_count": 0' in shown


def test_check_session_counts_files(session):
    assert check_session(session, "demo") == 4


def test_corrupt_file_is_named_and_kept(session):
    damaged = message_files(session, "demo")[1]
    damaged.write_text('{"message": ')
    with pytest.raises(CorruptSessionError, match="message_1.json is not valid JSON") as raised:
        check_session(session, "demo")
    assert "Nothing was deleted" in str(raised.value)
    assert damaged.read_text() == '{"message": '


def test_a_file_that_is_json_but_not_an_object(session):
    (agent_dir(session, "demo") / "agent.json").write_text("[1, 2]")
    with pytest.raises(CorruptSessionError, match="holds list, not a JSON object"):
        agent_json_blocks(agent_dir(session, "demo") / "agent.json")


def test_a_foreign_json_file_is_not_an_agent_json(tmp_path):
    path = tmp_path / "agent.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(CorruptSessionError, match="not an agent.json"):
        agent_json_blocks(path)


def test_binary_garbage_is_reported(tmp_path):
    path = tmp_path / "agent.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CorruptSessionError):
        agent_json_blocks(path)
    assert path.exists()


def test_unsafe_ids_never_become_paths(tmp_path):
    with pytest.raises(UnsafePathError):
        session_dir(tmp_path, "../outside")
    with pytest.raises(UnsafePathError):
        agent_dir(tmp_path, "demo", "../../x")


# ---------------------------------------------------------------- issue 8.6: valid JSON of the wrong shape, and more

AGENT = "agents/agent_default/agent.json"
MESSAGE = "agents/agent_default/messages/message_1.json"


def agent(**fields):
    return {"agent_id": "default", "state": {}, "conversation_manager_state": {}, **fields}


def message(role="assistant", content=(), message_id=1):
    return {"message": {"role": role, "content": list(content)}, "message_id": message_id}


SHAPES = [
    (AGENT, {}, "agent.json", "agent_id"),
    (AGENT, agent(state=[]), "agent.json", "state"),
    (AGENT, agent(conversation_manager_state=3), "agent.json", "conversation_manager_state"),
    (AGENT, agent(agent_id=7), "agent.json", "agent_id"),
    (MESSAGE, {"message": "hi", "message_id": 1}, "message_1.json", "message"),
    (MESSAGE, message(message_id="1"), "message_1.json", "message_id"),
    (MESSAGE, message(role="robot"), "message_1.json", "message.role"),
    (MESSAGE, {"message": {"role": "user", "content": "hi"}, "message_id": 1}, "message_1.json", "message.content"),
    (MESSAGE, message(content=["hi"]), "message_1.json", "message.content[0]"),
    ("agents/agent_default/messages/message_abc.json", message(message_id=2), "message_abc.json", "file name"),
    ("session.json", {"session_id": 5, "session_type": "AGENT"}, "session.json", "session_id"),
    ("session.json", [], "session.json", "not a JSON object"),
]


@pytest.mark.parametrize("relative, content, named, field", SHAPES, ids=[f"{s[2]}-{s[3]}" for s in SHAPES])
def test_wrong_shapes_are_named_with_their_field(session, relative, content, named, field):
    path = session / "session_demo" / relative
    path.write_text(json.dumps(content))
    with pytest.raises(CorruptSessionError) as raised:
        check_session(session, "demo")
    message = str(raised.value)
    assert named in message and field in message and "Nothing was deleted" in message, message
    assert path.read_text() == json.dumps(content), "the file is left as it was"


def test_non_utf8_bytes_are_named(session):
    path = message_files(session, "demo")[0]
    path.write_bytes(path.read_bytes().replace(b"Pin", b"P\xffn"))
    with pytest.raises(CorruptSessionError, match="message_0.json.*UTF-8"):
        check_session(session, "demo")


def test_a_dangling_symlink_is_named(session):
    agent_json = agent_dir(session, "demo") / "agent.json"
    agent_json.unlink()
    agent_json.symlink_to(session / "gone.json")
    with pytest.raises(CorruptSessionError, match="agent.json is a symbolic link"):
        check_session(session, "demo")
    assert agent_json.is_symlink()


def test_a_symlink_to_a_good_file_is_named_too(session, tmp_path):
    agent_json = agent_dir(session, "demo") / "agent.json"
    copy = tmp_path / "copy.json"
    copy.write_bytes(agent_json.read_bytes())
    agent_json.unlink()
    agent_json.symlink_to(copy)
    with pytest.raises(CorruptSessionError, match="agent.json is a symbolic link"):
        check_session(session, "demo")


def test_a_checked_session_restores(session):
    """What check_session accepts, the SDK restores: the shapes checked are the ones FileSessionManager reads."""
    assert check_session(session, "demo") == 4
    agent = Agent(
        model=OfflineModel(),
        session_manager=FileSessionManager(session_id="demo", storage_dir=str(session)),
        callback_handler=None,
    )
    assert len(agent.messages) == 2 and agent.state.get("plan") == "pro"
