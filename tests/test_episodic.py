"""Episodic memory (companion/memory/episodic.py) and its measurement (companion/measure/experience_eval.py), and the
scripted set of recurring tasks in data/experience/tasks.jsonl."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from strands import Agent
from strands.memory import MemoryManager

from companion import OfflineModel
from companion.measure.experience_eval import CONFIRMATION, load_tasks, mistake_rates, run_tasks
from companion.memory.episodic import CachedEmbedder, Episode, EpisodeStore
from companion.models.embeddings import make_embedder
from companion.models.facts import asked_keys, latest_facts
from companion.support.paths import data_path

TASKS = load_tasks(data_path("experience", "tasks.jsonl"))


@pytest.fixture(scope="module")
def embedder():
    return CachedEmbedder(make_embedder("minilm"))


def episode(task: dict, reply: str, right: bool, number: int = 1) -> Episode:
    return Episode(f"e{number:02d}", task["session"], task["situation"], reply, "right" if right else "wrong",
                   CONFIRMATION if right else task["correction"])


def test_the_set_recurs_once_per_session_with_unique_situations():
    families = Counter(t["family"] for t in TASKS)
    assert len(TASKS) == 36 and set(families.values()) == {4}
    assert len({t["situation"] for t in TASKS}) == len(TASKS)
    for family in families:
        assert sorted(t["session"] for t in TASKS if t["family"] == family) == [1, 2, 3, 4]
    assert sum(t["stale"] != t["right"] for t in TASKS) == 24


@pytest.mark.parametrize("task", TASKS, ids=[t["id"] for t in TASKS])
def test_each_task_states_its_data_asks_its_key_and_its_correction_states_the_right_value(task):
    assert asked_keys(task["situation"]) == [task["key"]]
    assert latest_facts([task["situation"]]) == {task["key"]: task["stale"]}
    assert latest_facts([task["correction"]]) == {task["key"]: task["right"]}


@pytest.mark.parametrize("voice", ["plain", "paraphrase"])
def test_without_memory_the_offline_model_answers_from_the_tasks_own_data(voice):
    model = OfflineModel(voice=voice)
    for task in TASKS:
        reply = model.respond([{"role": "user", "content": [{"text": task["situation"]}]}])["text"]
        assert task["stale"] in reply


def test_episode_renders_its_four_parts_in_order():
    text = Episode("e07", 2, "Situation text.", "Did this.", "wrong", "My deploy region is eu-west-1.").render()
    assert text.startswith("Past episode e07 (session 2). ")
    positions = [text.index(part) for part in ("Situation:", "What I did:", "Outcome: wrong.", "Feedback:")]
    assert positions == sorted(positions)


def test_cached_embedder_gives_the_inner_models_vectors(embedder):
    texts = ["Deploying billing.", "Invoice for Acme.", "Deploying billing."]
    inner = embedder.inner.embed(texts)
    assert np.allclose(embedder.embed(texts), inner, atol=1e-6)
    assert embedder.embed([]).shape == (0, embedder.dimensions)


def test_store_recalls_by_situation_above_the_threshold_and_logs_to_disk(tmp_path, embedder):
    billing, search = TASKS[0], next(t for t in TASKS if t["family"] == "search-deploy")
    again = next(t for t in TASKS if t["family"] == "billing-deploy" and t["session"] == 2)
    store = EpisodeStore(tmp_path / "e.sqlite", embedder, min_similarity=0.0, max_search_results=2,
                         log_path=tmp_path / "e.jsonl")
    store.record(episode(billing, "Your deploy region is us-east-1.", False, 1))
    store.record(episode(search, "Your deploy region is ap-south-1.", True, 2))
    recalled = store.recall(again["situation"])
    assert recalled[0][0].situation == billing["situation"] and recalled[0][1] >= recalled[1][1]
    strict = EpisodeStore(tmp_path / "e.sqlite", embedder, min_similarity=0.99)
    strict.episodes = store.episodes
    assert strict.recall(again["situation"]) == []
    logged = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert [e["id"] for e in logged] == ["e01", "e02"] and logged[0]["feedback"] == billing["correction"]


@pytest.mark.parametrize("voice", ["plain", "paraphrase"])
def test_memory_manager_injects_the_episode_and_the_agent_follows_its_feedback(tmp_path, embedder, voice):
    first, again = [t for t in TASKS if t["family"] == "billing-deploy"][:2]
    store = EpisodeStore(tmp_path / "e.sqlite", embedder, min_similarity=0.5)
    store.record(episode(first, "Your deploy region is us-east-1.", False))
    agent = Agent(model=OfflineModel(voice=voice), callback_handler=None,
                  memory_manager=MemoryManager(stores=[store], search_tool_config=False, injection={"max_entries": 1}))
    reply = str(agent(again["situation"]))
    assert again["right"] in reply and again["stale"] not in reply
    assert all("<memory>" not in str(m["content"]) for m in agent.messages), "injection is for the call only"


def test_without_recall_every_recurrence_repeats_and_recall_cuts_repeats(embedder):
    subset = [t for t in TASKS if t["family"] in ("billing-deploy", "search-deploy", "acme-invoice")]
    without, _ = run_tasks(subset, OfflineModel())
    rates = mistake_rates(without)
    assert rates == {"first mistakes": (2, 2), "repeated mistakes": (6, 6), "borrowed": (0, 4)}
    store = EpisodeStore(":memory:", embedder, min_similarity=0.7)
    with_recall, recorder = run_tasks(subset, OfflineModel(), store)
    assert mistake_rates(with_recall)["repeated mistakes"][0] < 6
    assert len(store.episodes) == len(subset)
    assert sum(c["kind"] == "turn" for c in recorder.log) == len(subset)


def test_mistake_rates_counts_from_the_outcomes():
    from companion.measure.experience_eval import TaskOutcome

    stale, sound = TASKS[0], next(t for t in TASKS if t["stale"] == t["right"])
    outcomes = [TaskOutcome(stale, "x", False), TaskOutcome(stale, "x", False, corrected_before=True),
                TaskOutcome(stale, "x", True, corrected_before=True), TaskOutcome(sound, "x", False)]
    assert mistake_rates(outcomes) == {"first mistakes": (1, 1), "repeated mistakes": (1, 2),
                                       "borrowed": (1, 1)}
