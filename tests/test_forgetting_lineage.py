"""forget() by lineage (issue 18): the messages that state the fact are found by reading them, every artifact that
descends from them goes (or is derived again), nothing else is touched; a reworded copy the byte scan cannot see goes
too, and the paraphrase check agrees; the plan is written first and a failure at any step is reported and finished by
a rerun."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from strands import Agent
from strands.agent.conversation_manager import SummarizingConversationManager
from strands.hooks import AfterInvocationEvent
from strands.memory import InvocationTrigger, MemoryManager, ModelExtractor
from strands.session import FileSessionManager
from strands.storage import LocalFileStorage

import companion.measure.forgetting as forgetting
from companion import OfflineModel
from companion.measure.byte_scan import scan
from companion.measure.forgetting import STORE_NAMES, ForgetError, PartialForget, Stores, fact_counts, forget
from companion.measure.paraphrase_check import paraphrases
from companion.memory.lineage import Lineage, LineageExtractor, LineageRecord, message_lineage
from companion.memory.lineage_markdown import LineageFileMemoryStore, without_lineage
from companion.memory.user_scope import UserScopedVectors
from companion.memory.vector_store import SqliteVecMemoryStore, connect
from companion.models import facts
from companion.models.embeddings import make_embedder
from companion.sessions.session_files import check_session, read_json
from companion.support.messages import message_text

KEY = "home address"
ADDRESS = {"ada": "12 Harbour Lane", "grace": "7 Quay Street"}
PUB = ("favorite pub", "the Harbour Inn")
NOTE = "Lives on Harbour Lane, no. 12."  # ada's address in a second writer's words: no byte of the value in it


def remember_profile(event: AfterInvocationEvent) -> None:
    """The profile hook, with each entry's lineage under state["lineage"]["profile/<key>"]."""
    said = next(m for m in reversed(event.agent.messages) if m["role"] == "user")
    profile = dict(event.agent.state.get("profile") or {})
    records = dict(event.agent.state.get("lineage") or {})
    stamp = message_lineage(said) or {}
    for fact in facts.statements(message_text(said)):
        profile[fact.key] = fact.value
        records[f"profile/{fact.key}"] = LineageRecord("state write", stamp.get("session_id"),
                                                       (stamp["message_index"],)).to_dict()
    event.agent.state.set("profile", profile)
    event.agent.state.set("lineage", records)


def plant(root: Path, embedder, voice: str = "plain") -> Stores:
    root.mkdir(parents=True, exist_ok=True)
    stores = Stores.under(root)
    store = SqliteVecMemoryStore(stores.vectors, embedder)
    model = OfflineModel(voice=voice)
    teams = {"ada": "payments", "grace": "search"}
    pubs = {"ada": PUB[1], "grace": "the Crown"}
    for name in ("ada", "grace"):
        extraction = {"trigger": InvocationTrigger(), "extractor": LineageExtractor(ModelExtractor())}
        sessions = FileSessionManager(session_id=f"{name}-chat", storage_dir=str(stores.sessions))
        agent = Agent(
            model=model, session_manager=sessions,
            conversation_manager=SummarizingConversationManager(
                summary_ratio=0.5, preserve_recent_messages=2, proactive_compression={"compression_threshold": 0.0002}),
            memory_manager=MemoryManager(stores=[
                UserScopedVectors(store, name, extraction=extraction),
                LineageFileMemoryStore(name=name, storage=LocalFileStorage(base_dir=str(stores.markdown)),
                                       extraction=extraction),
            ], search_tool_config=False, injection=False),
            state={"user_id": name}, callback_handler=None, hooks=[Lineage(sessions)])
        agent.add_hook(remember_profile)
        for line in [f"My {KEY} is {ADDRESS[name]}.", f"My favourite pub is {pubs[name]}.",
                     f"My team is {teams[name]}.", f"What is my {KEY}?", "ok"]:
            agent(line)
    note = LineageRecord("extraction", "ada-chat", (0,)).to_dict()
    store.put(NOTE, {"user": "ada", "lineage": note})
    store.close()
    return stores


@pytest.fixture(scope="module")
def embedder():
    return make_embedder("minilm")


@pytest.fixture(scope="module")
def planted(tmp_path_factory, embedder) -> Path:
    return plant(tmp_path_factory.mktemp("lineage") / "stores", embedder).root


@pytest.fixture
def stores(planted, tmp_path) -> Stores:
    return Stores.under(shutil.copytree(planted, tmp_path / "stores"))


def byte_places(stores: Stores, embedder) -> list:
    value = ADDRESS["ada"]
    return scan(stores.root, value, sentence=f"The user's {KEY} is {value}.", embedder=embedder, user="ada").places


def pub_and_team(stores: Stores) -> dict[str, dict[str, int]]:
    return {"pub": fact_counts(stores, "ada", [PUB]), "team": fact_counts(stores, "ada", [("team", "payments")])}


def test_every_artifact_records_its_lineage(stores):
    db, _ = connect(stores.vectors)
    rows = [json.loads(m) for (m,) in db.execute("SELECT metadata FROM memories")]
    db.close()
    assert rows and all(r["lineage"]["session_id"] in ("ada-chat", "grace-chat") and r["lineage"]["messages"]
                        for r in rows)
    lines = [line for p in (stores.markdown / "memory").rglob("*.md") for line in p.read_text().split("\n")]
    assert lines and all("<!-- lineage {" in line for line in lines)
    state = read_json(next(stores.sessions.glob("session_ada-chat/agents/*/agent.json")))["state"]
    assert set(state["lineage"]) == {f"profile/{k}" for k in state["profile"]}


def test_the_lineage_forget_removes_the_reworded_copy_and_keeps_the_pub(stores, embedder):
    before = pub_and_team(stores)
    assert all(before["pub"][s] > 0 for s in STORE_NAMES)
    found = paraphrases(stores.root, ADDRESS["ada"], embedder=embedder, user="ada")
    assert any(p.text == NOTE for p in found.places), "the check finds the note worded another way"
    report = forget(stores, KEY, user="ada", summarizer=OfflineModel())
    assert report.sources == [("ada-chat", 0), ("ada-chat", 1), ("ada-chat", 7)]
    assert byte_places(stores, embedder) == []
    assert paraphrases(stores.root, ADDRESS["ada"], embedder=embedder, user="ada").places == []
    assert pub_and_team(stores) == before, "nothing that does not descend from the sources is touched"
    assert fact_counts(stores, "ada", [(KEY, ADDRESS["ada"])]) == dict.fromkeys(STORE_NAMES, 0)
    assert not stores.plan_file.exists()
    assert check_session(stores.sessions, "ada-chat") > 0


def test_a_text_forget_leaves_the_reworded_copy_which_only_the_paraphrase_check_sees(stores, embedder):
    forget(stores, KEY, user="ada", summarizer=OfflineModel(), by="text")
    assert byte_places(stores, embedder) == [], "no byte of the value is left"
    left = paraphrases(stores.root, ADDRESS["ada"], embedder=embedder, user="ada").places
    assert [p.text for p in left] == [NOTE] and left[0].file == "memory.db"


def test_the_other_user_is_untouched(stores):
    kept = [(KEY, ADDRESS["grace"]), ("favorite pub", "the Crown"), ("team", "search")]
    before = fact_counts(stores, "grace", kept, session="grace-chat")
    folder = stores.sessions / "session_grace-chat"
    digests = {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    forget(stores, KEY, user="ada", summarizer=OfflineModel())
    assert fact_counts(stores, "grace", kept, session="grace-chat") == before
    assert {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()} == digests


def test_a_derived_line_without_lineage_is_judged_by_its_text(stores):
    folder = stores.markdown / "memory" / "ada"
    (folder / "handwritten.md").write_text(f"- ada's {KEY} is {ADDRESS['ada']}.\n- ada likes tea.\n")
    forget(stores, KEY, user="ada", summarizer=OfflineModel())
    assert without_lineage((folder / "handwritten.md").read_text()).strip() == "- ada likes tea."


def test_a_row_whose_lineage_names_no_message_is_judged_by_its_text(stores):
    """A row the SDK's add wrote with no lineage to give (derived "add": its messages unknown) states the address:
    it goes like a row without lineage. Before, any lineage record decided alone, and this one names no source."""
    said = f"The user's {KEY} is {ADDRESS['ada']}, says the CRM."
    unknown = LineageRecord("add", user="ada").to_dict()
    with SqliteVecMemoryStore(stores.vectors, make_embedder("minilm")) as store:
        store.put(said, {"user": "ada", "lineage": unknown})
        store.put("The user's team is payments, says the CRM.", {"user": "ada", "lineage": unknown})
    forget(stores, KEY, user="ada", summarizer=OfflineModel())
    db, _ = connect(stores.vectors)
    left = {c for (c,) in db.execute("SELECT content FROM memories")}
    db.close()
    assert said not in left and "The user's team is payments, says the CRM." in left




STEPS = 7
"""The plan's steps in the planted stores: the rows, VACUUM, agent.json (state and summary), the markdown file, and
message files 0, 1 and 7 (test_the_plan_has_these_steps checks)."""


def test_the_plan_has_these_steps(planted, tmp_path, monkeypatch):
    probe = Stores.under(shutil.copytree(planted, tmp_path / "probe"))
    seen = []
    monkeypatch.setattr(forgetting, "_apply", lambda step: (seen.append(step), step.run()))
    forget(probe, KEY, user="ada", summarizer=OfflineModel())
    assert [s.changes[0].store for s in seen] == ["vector store", "vector store", "agent.state", "markdown",
                                                  "session messages", "session messages", "session messages"]
    assert len(seen) == STEPS


@pytest.mark.parametrize("number", range(STEPS))
def test_a_failure_at_each_step_is_reported_and_a_rerun_finishes(planted, tmp_path, embedder, monkeypatch, number):
    stores = Stores.under(shutil.copytree(planted, tmp_path / "stores"))
    before = pub_and_team(stores)
    real, seen = forgetting._apply, []

    def apply(step):
        seen.append(step)
        if len(seen) == number + 1:
            raise OSError(28, "No space left on device")
        real(step)

    monkeypatch.setattr(forgetting, "_apply", apply)
    with pytest.raises(PartialForget) as caught:
        forget(stores, KEY, user="ada", summarizer=OfflineModel())
    partial = caught.value
    assert partial.done == [c for step in seen[:number] for c in step.changes]
    assert partial.left[0] == partial.failed == seen[number].changes[0]
    assert len(partial.done) + len(partial.left) == len(partial.report.plan)
    assert "No space left on device" in str(partial) and "Run forget() again" in str(partial)
    plan = json.loads(stores.plan_file.read_text())
    assert plan["user"] == "ada" and len(plan["steps"]) == len(partial.report.plan)
    assert ADDRESS["ada"].lower() not in stores.plan_file.read_text().lower(), "the plan never spells the value"
    monkeypatch.setattr(forgetting, "_apply", real)
    forget(stores, KEY, user="ada", summarizer=OfflineModel())  # the rerun finishes
    assert byte_places(stores, embedder) == []
    assert paraphrases(stores.root, ADDRESS["ada"], embedder=embedder, user="ada").places == []
    assert pub_and_team(stores) == before
    assert not stores.plan_file.exists() and check_session(stores.sessions, "ada-chat") > 0


def test_an_interrupted_forget_of_another_fact_blocks_a_new_one(stores):
    stores.plan_file.write_text(json.dumps({"user": "ada", "key": "team", "sources": [["ada-chat", 4]]}))
    with pytest.raises(ForgetError, match="interrupted forget of 'team'"):
        forget(stores, KEY, user="ada")


def test_the_paraphrase_voice(tmp_path, embedder):
    stores = plant(tmp_path / "stores", embedder, voice="paraphrase")
    before = pub_and_team(stores)
    report = forget(stores, KEY, user="ada", summarizer=OfflineModel(voice="paraphrase"))
    assert ("ada-chat", 0) in report.sources
    assert byte_places(stores, embedder) == []
    assert paraphrases(stores.root, ADDRESS["ada"], embedder=embedder, user="ada").places == []
    assert pub_and_team(stores) == before


def test_a_rerun_removes_the_temporary_files_a_killed_forget_left(planted, tmp_path, embedder, monkeypatch):
    """Issue 31, item 12. A forget killed (SIGKILL) between writing a file's new copy and renaming it leaves a
    `.forget_*.tmp` beside the file: before the fix no rerun removed it, and it held the redacted text (here, a copy
    of the message that still states the value, as a kill during the sources' own rewrite would leave). The plan file
    stays from the killed run; the rerun finishes and removes every leftover it finds in the stores' folders."""
    stores = Stores.under(shutil.copytree(planted, tmp_path / "stores"))
    real, seen = forgetting._apply, []

    def killed(step):
        seen.append(step)
        if len(seen) == 5:
            raise KeyboardInterrupt  # stands in for the kill: the plan stays
        real(step)

    monkeypatch.setattr(forgetting, "_apply", killed)
    with pytest.raises(KeyboardInterrupt):
        forget(stores, KEY, user="ada", summarizer=OfflineModel())
    monkeypatch.setattr(forgetting, "_apply", real)
    message = next(stores.sessions.rglob("message_0.json"))
    leftovers = [message.with_name(".forget_k1ll3d.tmp"), stores.markdown / ".forget_a.tmp", stores.root / ".forget_p.tmp"]
    for path in leftovers:
        path.write_text(message.read_text())  # the value's bytes, as a half-done rewrite leaves them
    assert stores.plan_file.is_file()
    seen_by_observer = []
    forget(stores, KEY, user="ada", summarizer=OfflineModel(),
           observe=lambda what, path: seen_by_observer.append((what, path)))
    assert not [p for p in stores.root.rglob(".forget_*.tmp")], "every leftover removed"
    assert {p for what, p in seen_by_observer if what == "leftover temporary file"} == set(leftovers)
    assert byte_places(stores, embedder) == [] and not stores.plan_file.exists()


def test_a_refusal_quotes_at_most_200_characters_of_the_key_or_user(stores):
    """Issue 31, item 12: before the fix a 1 MB key or user id was quoted in full in the message."""
    for call in (lambda: forget(stores, "home " + "A" * 1_000_000, user="ada"),
                 lambda: forget(stores, KEY, user="B" * 1_000_000), lambda: forget(stores, KEY, user="ada", by="C" * 10**6)):
        with pytest.raises(ForgetError) as raised:
            call()
        assert len(str(raised.value)) < 700 and "more characters" in str(raised.value)
