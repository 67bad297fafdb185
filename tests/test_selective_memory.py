"""The selective memory store of notebook 08: scope, superseding updates, expiry, the SDK protocol, and the script."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import matplotlib
import pytest
from strands import Agent
from strands.agent.conversation_manager import SlidingWindowConversationManager
from strands.memory import InvocationTrigger, MemoryManager, ModelExtractor
from strands.session import FileSessionManager

from companion.memory.lineage import read_markdown_lineage
from companion.memory.selective_memory import (
    START,
    Clock,
    Lineage,
    LineageExtractor,
    RecordingModel,
    SelectiveMemoryStore,
    as_markdown,
    call_for,
    contradictions,
    extraction_for,
    history_markdown,
    injected_entries,
    injected_tokens,
    lineage,
    memory_map,
    read_records,
    read_searches,
    selective_script,
    tokens,
    words,
)
from companion.models.offline_model import OfflineModel
from companion.sessions.session_files import message_files
from tests.conftest import user

matplotlib.use("Agg")


def test_plain_store_keeps_both_values_and_supersede_ends_the_old(tmp_path):
    clock = Clock()
    plain = SelectiveMemoryStore(tmp_path / "plain.json", user="ada", clock=clock)
    plain.write("The user's programming language is Python.")
    plain.write("The user's programming language is Go.")
    assert len(plain.records()) == 2
    assert contradictions([r["content"] for r in plain.records()]) == {"programming language": {"python", "go"}}

    selective = SelectiveMemoryStore(tmp_path / "selective.json", user="ada", clock=clock, supersede=True)
    first = selective.write("The user's programming language is Python.")
    clock.advance(minutes=5)
    second = selective.write("The user's programming language is Go.")
    assert [r["content"] for r in selective.records()] == ["The user's programming language is Go."]
    old = selective.records(history=True)
    assert [r["id"] for r in old] == [first] and old[0]["superseded_by"] == second
    assert old[0]["valid_until"] == (START + timedelta(minutes=5)).isoformat()
    assert selective.write("The user's programming language is Go.") == second, "the same fact twice is stored once"
    assert len(read_records(selective.path)) == 2
    assert read_records(selective.path)[1]["replaces"] == first
    selective.write("The user's editor is Vim.")
    clock.advance(minutes=1)
    selective.write("The user's programming language is Rust.")
    current = selective.records()
    assert as_markdown("ada", current, with_lineage=False).splitlines()[1:] == [
        "- The user's programming language is Rust.", "- The user's editor is Vim."], "an update keeps its line"
    before = START + timedelta(minutes=1)
    assert [r["content"] for r in selective.records(at=before)] == ["The user's programming language is Python."]


def test_supersede_is_per_user(tmp_path):
    a = SelectiveMemoryStore(tmp_path / "s.json", user="ada", supersede=True)
    b = a.view(user="grace")
    a.write("The user's editor is Vim.")
    b.write("The user's editor is Emacs.")
    assert [r["content"] for r in a.records()] == ["The user's editor is Vim."]
    assert [r["content"] for r in b.records()] == ["The user's editor is Emacs."]


def test_scoped_search_never_returns_another_users_memory_and_is_logged(tmp_path):
    a = SelectiveMemoryStore(tmp_path / "s.json", user="ada")
    b = a.view(user="grace")
    a.write("The user's editor is Vim.")
    b.write("The user's editor is Emacs.")
    assert [r["user"] for r in a.find("What is my editor?")] == ["ada"]
    assert {r["user"] for r in a.view(user=None).find("What is my editor?")} == {"ada", "grace"}
    log = read_searches(a.path)
    assert [entry["scope"] for entry in log] == ["ada", None]
    assert log[0]["returned"] == [["m001", "ada"]]


def test_ttl_expires_on_the_injected_clock_and_keeps_history(tmp_path):
    clock = Clock()
    store = SelectiveMemoryStore(tmp_path / "s.json", user="ada", clock=clock, ttl=timedelta(days=7))
    store.write("The user's desk this week is B-12.")
    assert store.find("desk") and store.records()[0]["valid_until"] == (START + timedelta(days=7)).isoformat()
    clock.advance(days=7)
    assert store.find("desk") == [] and len(store.records(history=True)) == 1
    assert "expired" in history_markdown("ada", store.records(history=True))


def test_explicit_valid_until_wins_over_ttl_and_empty_text_is_refused(tmp_path):
    store = SelectiveMemoryStore(tmp_path / "s.json", ttl=timedelta(days=1))
    store.write("The user's plan is pro.", {"valid_until": (START + timedelta(hours=1)).isoformat()})
    assert read_records(store.path)[0]["valid_until"] == (START + timedelta(hours=1)).isoformat()
    with pytest.raises(ValueError, match="some text"):
        store.write("   ")


def test_memory_store_protocol_add_add_messages_search(tmp_path):
    store = SelectiveMemoryStore(tmp_path / "s.json", user="ada", max_search_results=1)
    assert asyncio.run(store.add("The user's team is payments.")) == "m001"
    ids = asyncio.run(store.add_messages([user("ok"), {"role": "assistant", "content": [{"text": "Noted."}]},
                                          {"role": "user", "content": [{"toolResult": {"toolUseId": "x", "content": []}}]}]))
    assert ids == ["m002", "m003"], "each message with text becomes one memory"
    entries = asyncio.run(store.search("team", {"max_search_results": 5}))
    assert [e.content for e in entries] == ["The user's team is payments."]
    assert {r["source"] for r in store.records()} == {"add", "add_messages"}


def test_keyword_search_ignores_stopwords_and_ranks_by_shared_words(tmp_path):
    store = SelectiveMemoryStore(tmp_path / "s.json")
    store.write("The user's home city is Lima.")
    store.write("The city bus is late.")
    assert "my" not in words("What is my home city?") and words("What is my home city?") == {"home", "city"}
    assert [r["content"] for r in store.find("What is my home city?")][0] == "The user's home city is Lima."
    assert store.find("What is it?") == []


def test_script_spreads_fact_turns_and_refuses_too_few_turns():
    for turns in (12, 30, 61):
        script = selective_script(turns)
        assert len(script.turns) == turns
        assert script.turns[0] == "My editor is Vim." and script.turns[-1].endswith("programming language is Go.")
        assert sum("remember" in t.lower() or t.startswith("My ") for t in script.turns) == 8
    assert script.expected["programming language"] == "Go" and script.history["programming language"] == ["Python", "Go"]
    assert set(script.questions) == set(script.expected)
    with pytest.raises(ValueError, match="at least"):
        selective_script(5)


def test_three_policies_write_what_the_notebook_says(tmp_path):
    model = OfflineModel()
    script = selective_script(12)

    def run(store, **options):
        recorder = RecordingModel(model)
        agent = Agent(model=recorder, memory_manager=MemoryManager(stores=[store], search_tool_config=False, injection=False,
                                                                   **options), callback_handler=None)
        for line in script.turns:
            agent(line)
        return recorder

    dump = SelectiveMemoryStore(tmp_path / "dump.json", user="ada", extraction={"trigger": InvocationTrigger()})
    extracted = SelectiveMemoryStore(tmp_path / "x.json", user="ada",
                                     extraction={"trigger": InvocationTrigger(), "extractor": ModelExtractor()})
    saved = SelectiveMemoryStore(tmp_path / "save.json", user="ada")
    run(dump)
    recorder = run(extracted)
    run(saved, add_tool_config=True)
    assert len(dump.records()) == 2 * len(script.turns), "every user and assistant message"
    assert sum(c["kind"] == "extraction" for c in recorder.log) == len(script.turns)
    assert {r["content"] for r in extracted.records()} >= {"The user's editor is Vim.", "The user's programming language is Go."}
    assert all(r["content"].startswith("The user") for r in saved.records())
    assert len(saved.records()) == sum(t.startswith("Please remember") for t in script.turns)


def test_injection_is_seen_at_the_model_and_the_map_reads_the_agent(tmp_path):
    store = SelectiveMemoryStore(tmp_path / "m.json", name="long-term", user="ada")
    store.write("The user's home city is Lima.")
    recorder = RecordingModel(OfflineModel())
    session = FileSessionManager(session_id="map", storage_dir=str(tmp_path / "sessions"))
    agent = Agent(model=recorder, session_manager=session, conversation_manager=SlidingWindowConversationManager(window_size=2),
                  memory_manager=MemoryManager(stores=[store], search_tool_config=False), state={"user_id": "ada"},
                  callback_handler=None)
    agent("My editor is Vim.")
    reply = agent("What is my home city?")
    call = call_for(recorder, "What is my home city?")
    assert "Lima" in str(reply) and injected_entries(call["messages"]) == ["The user's home city is Lima."]
    assert injected_tokens(call["messages"]) > 0 and "<memory>" not in json.dumps(agent.messages)
    figure = memory_map(agent, call["messages"], session_manager=session)
    texts = " ".join(t.get_text() for t in figure.axes[0].texts)
    for expected in ("FileSessionManager: 4 messages stored", "window_size=2", "2 messages kept", "1 entry injected",
                     "SelectiveMemoryStore 'long-term': 1 memory", "agent.state keys: user_id", "3 messages in this call",
                     "read back from the session: user_id", "keys found in this call: none", "OfflineModel"):
        assert expected in texts, expected


def test_the_map_reads_durable_state_back_from_the_session_files(tmp_path):
    """The durable-state box says what the session's files hold, not what the agent holds in memory."""
    session = FileSessionManager(session_id="map", storage_dir=str(tmp_path / "sessions"))
    recorder = RecordingModel(OfflineModel())
    agent = Agent(model=recorder, session_manager=session, state={"user_id": "ada"}, callback_handler=None)
    agent("My editor is Vim.")
    agent.state.set("plan", "pro")  # set after the last save: in the agent, not yet in the session's files
    texts = " ".join(t.get_text() for t in memory_map(agent, recorder.log[-1]["messages"], session_manager=session).axes[0].texts)
    assert "agent.state keys: plan, user_id" in texts and "read back from the session: user_id" in texts
    agent_json = next((tmp_path / "sessions").rglob("agent.json"))
    assert json.loads(agent_json.read_text())["state"] == {"user_id": "ada"}
    sent = memory_map(agent, [user("my user_id is 7")], session_manager=session).axes[0].texts
    assert "keys found in this call: user_id" in " ".join(t.get_text() for t in sent), "a key that is sent is found"
    without = " ".join(t.get_text() for t in memory_map(agent, recorder.log[-1]["messages"]).axes[0].texts)
    assert "no session manager: not saved" in without


def test_extraction_for_finds_the_extraction_call_of_a_line(tmp_path):
    store = SelectiveMemoryStore(tmp_path / "x.json", user="ada",
                                 extraction={"trigger": InvocationTrigger(), "extractor": ModelExtractor()})
    recorder = RecordingModel(OfflineModel())
    agent = Agent(model=recorder, memory_manager=MemoryManager(stores=[store], search_tool_config=False, injection=False),
                  callback_handler=None)
    agent("My editor is Vim.")
    agent("I moved the team from Python to Go this week.")
    assert extraction_for(recorder, "My editor is Vim.")["reply"] == '[{"content": "The user\'s editor is Vim."}]'
    assert extraction_for(recorder, "I moved the team from Python to Go this week.")["reply"] == "[]"
    assert [r["content"] for r in store.records()] == ["The user's editor is Vim."]
    with pytest.raises(LookupError, match="No recorded extraction"):
        extraction_for(recorder, "never said")


def test_markdown_and_token_helpers():
    records = [{"id": "m001", "content": "The user's editor is Vim."}]
    assert as_markdown("ada", records) == "# Facts about ada\n- The user's editor is Vim.\n", "no lineage, no comment"
    origin = {"derived": "extraction", "session_id": "s1", "messages": [2, 3], "message_ids": ["x", "y"],
              "user": "ada", "at": "2026-01-05T09:00:00", "replaced_by": {"id": "m002"}}
    text = as_markdown("ada", [{**records[0], "metadata": {"lineage": origin}}])
    assert text.splitlines()[1] == ("- The user's editor is Vim. <!-- lineage {\"derived\": \"extraction\", "
                                    "\"session_id\": \"s1\", \"messages\": [2, 3], \"at\": \"2026-01-05T09:00:00\"} -->")
    ((line, read),) = read_markdown_lineage(text)
    assert line == "The user's editor is Vim." and read.messages == (2, 3) and read.derived == "extraction"
    assert tokens("abcde") == 2


def test_every_record_carries_its_lineage_and_supersede_names_the_replacing_messages(tmp_path):
    """Issue 18: each record names its session, the indexes of the messages it came from, how and when it was derived;
    the named message files exist and state the record's value; a superseded record names the messages that replaced
    it, and the history file says so."""
    clock = Clock()
    lines = ["My editor is Vim.", "ok", "Please remember that my programming language is Python.",
             "Please remember that my programming language is Go."]
    every = InvocationTrigger()
    stores = {
        "dump": SelectiveMemoryStore(tmp_path / "dump.json", user="ada", clock=clock, extraction={"trigger": every}),
        "extraction": SelectiveMemoryStore(tmp_path / "x.json", user="ada", clock=clock, supersede=True,
                                           extraction={"trigger": every, "extractor": ModelExtractor()}),
        "tool call": SelectiveMemoryStore(tmp_path / "save.json", user="ada", clock=clock, supersede=True),
    }
    for derived, store in stores.items():
        session = FileSessionManager(session_id=f"ada-{derived.replace(' ', '-')}", storage_dir=str(tmp_path / "s"))
        agent = Agent(model=OfflineModel(), session_manager=session, hooks=[Lineage(session)], callback_handler=None,
                      memory_manager=MemoryManager(stores=[store], search_tool_config=False, injection=False,
                                                   add_tool_config=derived == "tool call"))
        for line in lines:
            agent(line)
            clock.advance(minutes=1)
        files = {int(p.stem.split("_")[1]): json.loads(p.read_text(encoding="utf-8"))["message"]
                 for p in message_files(tmp_path / "s", session.session_id)}
        records = read_records(store.path)
        assert records and all(lineage(r)["derived"] == derived for r in records)
        for record in records:
            origin = lineage(record)
            assert origin["session_id"] == session.session_id and origin["at"] == record["written_at"]
            named = " ".join(json.dumps(files[i]) for i in origin["messages"])  # every named file exists
            assert (record["value"] or record["content"]) in named, f"{record['content']!r} is not in {origin}"
        if derived == "dump":
            assert [lineage(r)["messages"] for r in records] == [[i] for i in range(len(files))]
            continue
        python, go = (next(r for r in records if r["value"] == v) for v in ("Python", "Go"))
        replaced = lineage(python)["replaced_by"]
        assert replaced["id"] == go["id"] == python["superseded_by"] and replaced["messages"] == lineage(go)["messages"]
        assert "Please remember that my programming language is Go." in json.dumps([files[i] for i in replaced["messages"]])
        assert f"superseded by {go['id']} from session {session.session_id}, messages " in history_markdown(
            "ada", store.records(history=True))
    assert lineage(read_records(stores["tool call"].path)[0])["tool_use_id"], "a tool call names its toolUse"


def test_lineage_without_an_agent_hook_says_so_and_a_restated_fact_is_noted(tmp_path):
    store = SelectiveMemoryStore(tmp_path / "s.json", user="ada", supersede=True)
    store.write("The user's editor is Vim.")
    asyncio.run(store.add("The user's team is payments."))
    first, second = read_records(store.path)
    assert lineage(first) == {"derived": "direct write", "session_id": None, "messages": [], "user": "ada",
                              "at": first["written_at"]}
    assert lineage(second)["derived"] == "add", "an add with no extractor or tool call behind it"
    store.write("The user's editor is Vim.", {"lineage": {"derived": "extraction", "session_id": "s1", "messages": [4]}})
    assert len(read_records(store.path)) == 2
    assert lineage(read_records(store.path)[0])["restated_in"][0]["messages"] == [4]
    extractor = SelectiveMemoryStore(tmp_path / "x.json", extraction={"extractor": ModelExtractor()}).extraction["extractor"]
    assert isinstance(extractor, LineageExtractor) and isinstance(extractor.inner, ModelExtractor)
    later = SelectiveMemoryStore(tmp_path / "later.json")
    later.extraction = {"trigger": InvocationTrigger(), "extractor": extractor}
    assert later.extraction["extractor"] is extractor, "set after construction: wrapped once, not twice"
    later.extraction = {"trigger": InvocationTrigger(), "extractor": ModelExtractor()}
    assert isinstance(later.extraction["extractor"], LineageExtractor)
