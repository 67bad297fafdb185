"""forget() and the byte scan behind notebook 09: every place gone, the other user untouched, the session restorable,
and bad input refused with a clear message and nothing changed."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from strands import Agent
from strands.agent.conversation_manager import SummarizingConversationManager
from strands.hooks import AfterInvocationEvent
from strands.memory import InvocationTrigger, MemoryManager, ModelExtractor
from strands.session import FileSessionManager
from strands.storage import LocalFileStorage
from strands.vended_memory_stores.file_memory_store import FileMemoryStore

from companion import OfflineModel
from companion.measure.byte_scan import scan, slug
from companion.measure.forgetting import (
    FORGOTTEN,
    STORE_NAMES,
    ForgetError,
    NothingToForgetError,
    Stores,
    StoreUnavailableError,
    UnknownUserError,
    fact_counts,
    forget,
    redact_text,
)
from companion.memory.user_scope import UserScopedVectors
from companion.memory.vector_store import SqliteVecMemoryStore, connect
from companion.models import facts
from companion.models.embeddings import make_embedder
from companion.sessions.session_files import check_session, read_json
from companion.support.messages import message_text

KEY = "home address"
USERS = {"ada": ("12 Harbour Lane", [("team", "payments"), ("editor", "Vim")]),
         "grace": ("7 Quay Street", [("team", "search"), ("editor", "Emacs")])}


def manager() -> SummarizingConversationManager:
    return SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2,
                                          proactive_compression={"compression_threshold": 0.0002})


def profile(event: AfterInvocationEvent) -> None:
    said = next(m for m in reversed(event.agent.messages) if m["role"] == "user")
    event.agent.state.set("profile", {**(event.agent.state.get("profile") or {}),
                                      **{f.key: f.value for f in facts.statements(message_text(said))}})


@pytest.fixture(scope="module")
def embedder():
    return make_embedder("minilm")


@pytest.fixture(scope="module")
def planted(tmp_path_factory, embedder) -> Path:
    """Both users' conversations through the same agents as notebook 09, planted once."""
    root = tmp_path_factory.mktemp("planted")
    stores = Stores.under(root)
    store = SqliteVecMemoryStore(stores.vectors, embedder)
    model = OfflineModel()
    for name, (value, others) in USERS.items():
        extraction = {"trigger": InvocationTrigger(), "extractor": ModelExtractor()}
        agent = Agent(
            model=model,
            session_manager=FileSessionManager(session_id=f"{name}-chat", storage_dir=str(stores.sessions)),
            conversation_manager=manager(),
            memory_manager=MemoryManager(stores=[
                UserScopedVectors(store, name, extraction=extraction),
                FileMemoryStore(name=name, storage=LocalFileStorage(base_dir=str(stores.markdown)), extraction=extraction),
            ], search_tool_config=False, injection=False),
            state={"user_id": name},
            callback_handler=None,
        )
        agent.add_hook(profile)
        for line in [f"My {KEY} is {value}.", *(f"My {k} is {v}." for k, v in others), f"What is my {KEY}?", "ok"]:
            agent(line)
    store.close()
    return root


@pytest.fixture
def stores(planted, tmp_path) -> Stores:
    copy = tmp_path / "stores"
    shutil.copytree(planted, copy)
    return Stores.under(copy)


def digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def places(stores, embedder, name="ada"):
    value = USERS[name][0]
    return scan(stores.root, value, sentence=f"The user's {KEY} is {value}.", embedder=embedder, user=name).places


def kinds(found) -> set[str]:
    def kind(place):
        if place.file.startswith("sessions/"):
            return "session messages" if "/messages/" in place.file else ("summary" if "summary_message" in place.where else "agent.state")
        return "vector store" if place.file == "memory.db" else "markdown"
    return {kind(p) for p in found}


def test_forget_removes_every_place_and_leaves_the_other_user(stores, embedder):
    assert kinds(places(stores, embedder)) == set(STORE_NAMES), "the fact landed in all five stores"
    kept = [(KEY, USERS["grace"][0]), *USERS["grace"][1]]
    grace_before = fact_counts(stores, "grace", kept)
    grace_files = {k: v for k, v in digest(stores.root).items() if "grace" in k}
    report = forget(stores, KEY, user="ada", summarizer=OfflineModel())
    assert report.values == [USERS["ada"][0]]
    assert places(stores, embedder) == []
    assert fact_counts(stores, "ada", [(KEY, USERS["ada"][0])]) == dict.fromkeys(STORE_NAMES, 0)
    assert fact_counts(stores, "ada", USERS["ada"][1])["vector store"] == 2, "ada's other facts stay"
    assert fact_counts(stores, "grace", kept) == grace_before and all(grace_before.values())
    assert {k: v for k, v in digest(stores.root).items() if "grace" in k} == grace_files, "grace's files untouched byte for byte"
    assert kinds(places(stores, embedder, "grace")) == set(STORE_NAMES)


def test_the_rewritten_session_restores_in_a_fresh_agent(stores):
    folder = stores.sessions / "session_ada-chat" / "agents" / "agent_default"
    files = len(list((folder / "messages").glob("message_*.json")))
    forget(stores, KEY, user="ada", summarizer=OfflineModel())
    assert len(list((folder / "messages").glob("message_*.json"))) == files, "no message file was deleted"
    assert check_session(stores.sessions, "ada-chat") == files + 2
    removed = read_json(folder / "agent.json")["conversation_manager_state"]["removed_message_count"]
    agent = Agent(model=OfflineModel(), conversation_manager=manager(), callback_handler=None,
                  session_manager=FileSessionManager(session_id="ada-chat", storage_dir=str(stores.sessions)))
    assert len(agent.messages) == 1 + files - removed
    assert USERS["ada"][0] not in json.dumps(agent.messages) and "payments" in message_text(agent.messages[0])
    assert "cannot see" in str(agent(f"What is my {KEY}?")) and "payments" in str(agent("What is my team?"))


def test_without_a_summarizer_the_summary_loses_only_the_fact(stores):
    report = forget(stores, KEY, user="ada")
    assert any(c.store == "summary" and "cut out" in c.what for c in report.changes)
    summary = message_text(read_json(stores.sessions / "session_ada-chat/agents/agent_default/agent.json")
                           ["conversation_manager_state"]["summary_message"])
    assert USERS["ada"][0] not in summary and "payments" in summary


def test_a_forget_that_skips_the_summary_is_caught_by_the_scan(stores, embedder):
    forget(stores, KEY, user="ada", summarizer=OfflineModel(), rewrite_summaries=False)
    missed = places(stores, embedder)
    assert missed and all("summary_message" in p.where for p in missed)


def test_a_forget_without_the_user_scope_erases_the_other_user(stores, embedder):
    before = fact_counts(stores, "grace", [(KEY, USERS["grace"][0])])
    report = forget(stores, KEY, user=None, summarizer=OfflineModel())
    assert sorted(report.values) == sorted(v for v, _ in USERS.values())
    assert sum(before.values()) > 0 and fact_counts(stores, "grace", [(KEY, USERS["grace"][0])]) == dict.fromkeys(STORE_NAMES, 0)
    assert fact_counts(stores, "grace", USERS["grace"][1])["vector store"] == 2, "only the key's values went"


# ---------------------------------------------------------------------- bad input: a clear message, nothing changed


def test_a_fact_that_is_not_stored(stores):
    before = digest(stores.root)
    with pytest.raises(NothingToForgetError, match=r"No store holds a 'shoe size' for user 'ada'.*Nothing was changed"):
        forget(stores, "shoe size", user="ada", summarizer=OfflineModel())
    assert digest(stores.root) == before


def test_an_unknown_user(stores):
    before = digest(stores.root)
    with pytest.raises(UnknownUserError, match=r"user 'bob' \(the stores hold: ada, grace\)\. Nothing was changed"):
        forget(stores, KEY, user="bob")
    assert digest(stores.root) == before


def test_an_empty_key(stores):
    with pytest.raises(ForgetError, match="needs the fact's key"):
        forget(stores, " ", user="ada")


def test_a_locked_store_file(stores):
    before = digest(stores.root)
    holder = subprocess.Popen(  # another process holds the write lock (an unfinished transaction)
        [sys.executable, "-c", "import sqlite3, sys; db = sqlite3.connect(sys.argv[1], isolation_level=None); "
         "db.execute('BEGIN IMMEDIATE'); print('locked', flush=True); sys.stdin.read()", str(stores.vectors)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(StoreUnavailableError, match=rf"is locked by process {holder.pid} .*Nothing was changed in any store"):
            forget(stores, KEY, user="ada", summarizer=OfflineModel(), busy_timeout=0.1)
        assert digest(stores.root) == before, "no message, state, summary or markdown file was touched"
    finally:
        holder.communicate("")
    forget(stores, KEY, user="ada", summarizer=OfflineModel())  # once the lock is released it works


@pytest.mark.parametrize("missing", ["vectors", "sessions", "markdown"])
def test_a_missing_store(stores, missing):
    path = getattr(stores, missing)
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    before = digest(stores.root)
    with pytest.raises(StoreUnavailableError, match=rf"{path} is missing\. Nothing was changed"):
        forget(stores, KEY, user="ada")
    assert digest(stores.root) == before and not path.exists(), "nothing was created in its place either"


# ---------------------------------------------------------------------- the pieces


def test_redact_text_cuts_only_the_sentences_about_the_fact():
    text = "My home address is 12 Harbour Lane. My team is payments.\n* The user's editor is Vim."
    assert redact_text(text, KEY, ["12 Harbour Lane"]) == "My team is payments.\n* The user's editor is Vim."
    assert redact_text("Noted: your home address is 12 Harbour Lane.", KEY, ["12 Harbour Lane"]) == FORGOTTEN
    assert redact_text("I live at 12 harbour lane now!", KEY, ["12 Harbour Lane"]) == FORGOTTEN, "any case"


def test_scan_reads_escaped_json_file_names_journals_and_free_pages(tmp_path):
    value = "Calle Añil 3"
    (tmp_path / "a.json").write_text(json.dumps({"m": {"text": f"at {value}"}}), encoding="utf-8")  # ensure_ascii: \u00f1
    (tmp_path / f"{slug(value)}.md").write_text("nothing here\n", encoding="utf-8")
    db = sqlite3.connect(tmp_path / "memory.db")
    db.execute("PRAGMA secure_delete = OFF")  # the default of some builds (sqlean's), not of Debian's
    db.execute("CREATE TABLE t (x TEXT)")
    db.executemany("INSERT INTO t VALUES (?)", [(value + "!" * 3000,)] * 4)  # overflow pages
    db.commit()
    db.execute("DELETE FROM t")
    db.commit()
    db.close()
    (tmp_path / "memory.db-journal").write_bytes(b"\0" * 10 + value.encode())  # as a crash would leave it
    found = scan(tmp_path, value).places
    where = {(p.file, p.where) for p in found}
    assert ("a.json", "m.text") in where
    assert (f"{slug(value)}.md", "file name") in where
    assert ("memory.db-journal", "SQLite rollback journal") in where
    assert any(p.file == "memory.db" and "free page" in p.where for p in found), where


def test_user_scoped_vectors_search_only_their_user(tmp_path, embedder):
    import asyncio

    store = SqliteVecMemoryStore(tmp_path / "m.db", embedder)
    ada, grace = UserScopedVectors(store, "ada"), UserScopedVectors(store, "grace")
    asyncio.run(ada.add("The user's home address is 12 Harbour Lane."))
    asyncio.run(grace.add("The user's home address is 7 Quay Street."))
    hits = asyncio.run(ada.search("Where does the user live?"))
    assert [h.content for h in hits] == ["The user's home address is 12 Harbour Lane."]
    assert [c for _, c in grace.rows()] == ["The user's home address is 7 Quay Street."]
    db, _ = connect(store.path)
    assert {json.loads(m)["user"] for (m,) in db.execute("SELECT metadata FROM memories")} == {"ada", "grace"}
    db.close()
    store.close()


def test_a_lock_held_in_this_process_through_the_standard_sqlite3(stores):
    """Issue 19.4: the store's SQLite (sqlean) cannot see a lock this process holds through the standard sqlite3;
    before the fix forget() reported success and the other connection's commit failed with "disk I/O error"."""
    other = sqlite3.connect(stores.vectors, isolation_level=None)  # the standard library's SQLite, this process
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO store_info VALUES ('written by', 'the other connection')")
    # Reading memory.db here would close a file descriptor on it, which drops every POSIX lock this process holds
    # on the file (the other connection's too): the database is compared by its rows below instead.
    def files():
        return {p.relative_to(stores.root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(stores.root.rglob("*")) if p.is_file() and not p.name.startswith("memory.db")}

    before = files()
    try:
        with pytest.raises(StoreUnavailableError, match=rf"locked by a connection in this same process \(process {os.getpid()}"):
            forget(stores, KEY, user="ada", summarizer=OfflineModel(), busy_timeout=0.2)
        assert files() == before, "no session or markdown file was changed while the lock was held"
        other.execute("COMMIT")  # the other connection's write goes through (before the fix: "disk I/O error")
    finally:
        other.close()
    check = sqlite3.connect(stores.vectors)
    assert ("written by", "the other connection") in check.execute("SELECT * FROM store_info").fetchall()
    assert check.execute("SELECT count(*) FROM memories WHERE content LIKE '%Harbour Lane%'").fetchone()[0] == 1
    check.close()
    report = forget(stores, KEY, user="ada", summarizer=OfflineModel())  # once it is released, forget works
    assert any(c.store == "vector store" for c in report.changes)


def test_forget_shows_its_transient_files_while_they_exist(stores, embedder):
    """The plan file, the rollback journal, the old files and the temporary files are scanned while they exist (the observer)."""
    seen = []

    def observe(what, path):
        seen.append((what, path.name, len(scan(path, USERS["ada"][0]).places)))

    forget(stores, KEY, user="ada", summarizer=OfflineModel(), observe=observe)
    kinds_seen = {what for what, _, _ in seen}
    assert kinds_seen == {"plan file", "rollback journal", "old file", "temporary file", "database before VACUUM"}, seen
    assert all(n > 0 for what, _, n in seen if what == "rollback journal"), "the journal holds the deleted rows' pages"
    assert all(n == 0 for what, _, n in seen if what in ("plan file", "temporary file", "database before VACUUM")), seen
    assert not stores.vectors.with_name("memory.db-journal").exists() and not list(stores.root.rglob(".forget_*"))


def test_the_scan_normalises_case_whitespace_and_unicode(tmp_path):
    """The scan does not share forget()'s matching: NFKC, case folding and whitespace runs are normalised."""
    (tmp_path / "a.md").write_text("* lives at １２　HARBOUR\tlane\n", encoding="utf-8")  # full-width digits and space
    (tmp_path / "b.txt").write_text("12 Harbour\nLane", encoding="utf-8")  # across a line
    found = scan(tmp_path, "12 Harbour Lane").places
    assert ("a.md", "line 1") in {(p.file, p.where) for p in found}
    assert ("b.txt", "across a page or line boundary") in {(p.file, p.where) for p in found}
    assert redact_text("* lives at １２　HARBOUR\tlane", KEY, ["12 Harbour Lane"]) != FORGOTTEN, (
        "forget's own matching misses it: the scan is a second method")


# ---------------------------------------------------------------------- issue 18: only the fact, and honest failures


PUB = ("favorite pub", "the Harbour Inn")


@pytest.fixture(scope="module")
def harbour(tmp_path_factory, embedder) -> Path:
    """ada's home address is "The Harbour"; her unrelated favourite pub is "the Harbour Inn" (the words overlap)."""
    root = tmp_path_factory.mktemp("harbour")
    stores = Stores.under(root)
    store = SqliteVecMemoryStore(stores.vectors, embedder)
    for name, address in [("ada", "The Harbour"), ("grace", "7 Quay Street")]:
        extraction = {"trigger": InvocationTrigger(), "extractor": ModelExtractor()}
        agent = Agent(
            model=OfflineModel(),
            session_manager=FileSessionManager(session_id=f"{name}-chat", storage_dir=str(stores.sessions)),
            conversation_manager=manager(),
            memory_manager=MemoryManager(stores=[
                UserScopedVectors(store, name, extraction=extraction),
                FileMemoryStore(name=name, storage=LocalFileStorage(base_dir=str(stores.markdown)), extraction=extraction),
            ], search_tool_config=False, injection=False),
            state={"user_id": name},
            callback_handler=None,
        )
        agent.add_hook(profile)
        for line in [f"My {KEY} is {address}.", "My favourite pub is the Harbour Inn.", "My team is payments.",
                     f"What is my {KEY}?", "What is my favourite pub?", "ok"]:
            agent(line)
    store.close()
    return root


def pub_places(stores: Stores) -> dict[str, int]:
    """Where ada's pub is stated: message files, vector rows, markdown lines, the profile entry."""
    folder = stores.sessions / "session_ada-chat" / "agents" / "agent_default"
    def states_pub(text: str) -> bool:
        return any(facts.normalise_key(f.key) == PUB[0] and f.value == PUB[1] for f in facts.statements(text))

    db, _ = connect(stores.vectors)
    rows = [c for c, m in db.execute("SELECT content, metadata FROM memories") if json.loads(m)["user"] == "ada"]
    db.close()
    return {
        "messages": sum(states_pub(message_text(read_json(p)["message"])) for p in (folder / "messages").glob("*.json")),
        "vector rows": sum(states_pub(c) for c in rows),
        "markdown lines": sum(states_pub(line) for p in (stores.markdown / "memory" / "ada").glob("*.md")
                              for line in p.read_text(encoding="utf-8").split("\n")),
        "profile": int(read_json(folder / "agent.json")["state"]["profile"].get(PUB[0]) == PUB[1]),
    }


def test_forgetting_an_address_keeps_the_pub_whose_name_shares_its_words(harbour, tmp_path):
    """Issue 18: values were matched as substrings, so forgetting the home address "The Harbour" also deleted "My
    favourite pub is the Harbour Inn." from every store (before the fix: messages 3 -> 0, vector rows, markdown lines
    and the profile entry 1 -> 0)."""
    stores = Stores.under(shutil.copytree(harbour, tmp_path / "stores"))
    before = pub_places(stores)
    assert before["messages"] >= 3 and before["vector rows"] == 1 and before["markdown lines"] == 1 and before["profile"]
    forget(stores, KEY, user="ada", summarizer=OfflineModel())
    assert fact_counts(stores, "ada", [(KEY, "The Harbour")]) == dict.fromkeys(STORE_NAMES, 0), "the address is gone"
    assert pub_places(stores) == before, "the pub is stated exactly where it was"
    assert fact_counts(stores, "ada", [PUB])["summary"] == 1, "the re-written summary still has the pub"


def test_mentions_needs_the_fact_not_a_substring():
    from companion.measure.forgetting import mentions

    assert not mentions("My favourite pub is the Harbour Inn.", KEY, ["The Harbour"])
    assert not mentions("Noted: your favorite pub is the Harbour Inn.", KEY, ["The Harbour"])
    assert not mentions("My team is 12 Harbour Lanes.", KEY, ["12 Harbour Lane"]), "a whole value, not a prefix"
    assert mentions("I live at the harbour now!", KEY, ["The Harbour"]), "no statement read: the whole value counts"
    assert mentions("My home address is The Harbour.", KEY, ["The Harbour"])
    assert redact_text("the user's favorite pub = the Harbour Inn; the user's home address = The Harbour", KEY,
                       ["The Harbour"]).startswith("the user's favorite pub = the Harbour Inn")


def failing_at(monkeypatch, number: int, error: Exception | None = None) -> list[str]:
    """Make the plan's step `number` (0-based) raise; returns the steps seen."""
    import companion.measure.forgetting as forgetting

    seen, real = [], forgetting._apply

    def apply(step):
        seen.append(step.changes[0].what)
        if len(seen) == number + 1:
            raise error or OSError(28, "No space left on device")
        real(step)

    monkeypatch.setattr(forgetting, "_apply", apply)
    return seen


def test_a_failure_at_every_step_reports_what_is_done_and_left_and_a_rerun_finishes(planted, tmp_path, embedder,
                                                                                    monkeypatch):
    """Issue 18: a failure after the database commit surfaced as a raw OSError with no report. Now every step of the
    plan can fail: PartialForget names what was done and what is left, and running forget() again finishes."""
    import companion.measure.forgetting as forgetting

    probe = Stores.under(shutil.copytree(planted, tmp_path / "probe"))
    seen = failing_at(monkeypatch, 10**6)  # counts the steps, fails none
    forget(probe, KEY, user="ada", summarizer=OfflineModel())
    steps = len(seen)
    assert steps >= 5, f"rows, VACUUM, message files, agent.json, markdown: {seen}"
    kept = [(KEY, USERS["grace"][0]), *USERS["grace"][1]]
    for number in range(steps):
        stores = Stores.under(shutil.copytree(planted, tmp_path / f"step-{number}"))
        grace = fact_counts(stores, "grace", kept)
        failing_at(monkeypatch, number)
        with pytest.raises(forgetting.PartialForget) as caught:
            forget(stores, KEY, user="ada", summarizer=OfflineModel())
        partial = caught.value
        assert len(partial.done) + len(partial.left) == len(partial.report.plan), "done and left are the whole plan"
        assert partial.left[0] == partial.failed and isinstance(partial.__cause__, OSError)
        assert "No space left on device" in str(partial) and "Run forget() again" in str(partial)
        assert [c.what for c in partial.done] == [c.what for c in partial.report.plan[: len(partial.done)]]
        assert not list(stores.root.rglob(".forget_*")) and not stores.vectors.with_name("memory.db-journal").exists()
        monkeypatch.setattr(forgetting, "_apply", lambda step: step.run())
        forget(stores, KEY, user="ada", summarizer=OfflineModel())  # the rerun finishes
        assert places(stores, embedder) == [], f"step {number}: the rerun left a place"
        assert fact_counts(stores, "grace", kept) == grace
        assert check_session(stores.sessions, "ada-chat") > 0


def test_a_file_rewrite_that_raises_after_the_commit_is_a_partial_forget(stores, embedder, monkeypatch):
    """The case of the issue: os.replace raising after the rows are committed."""
    import companion.measure.forgetting as forgetting

    real = os.replace
    calls = []

    def replace(source, target):
        if Path(target) != stores.plan_file:  # the plan is written first, through the same rename
            calls.append(target)
        if len(calls) == 2:
            raise PermissionError(13, "Permission denied", str(target))
        real(source, target)

    monkeypatch.setattr(forgetting.os, "replace", replace)
    with pytest.raises(forgetting.PartialForget) as caught:
        forget(stores, KEY, user="ada", summarizer=OfflineModel())
    done = [c.what for c in caught.value.done]
    assert any("row(s)" in w and "deleted" in w for w in done) and any("VACUUM" in w for w in done) and len(done) >= 3
    assert caught.value.left and "Permission denied" in str(caught.value)
    monkeypatch.setattr(forgetting.os, "replace", real)
    forget(stores, KEY, user="ada", summarizer=OfflineModel())
    assert places(stores, embedder) == []
