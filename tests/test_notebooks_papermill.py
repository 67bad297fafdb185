"""Instructor replays: every notebook run through papermill with non-default parameters; its checks must hold."""

from __future__ import annotations

from pathlib import Path

import nbformat
import papermill
import pytest
from notebook_runs import checks_held, ledger_text

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"

# (notebook, parameters, a text the replay must print because of those parameters)
REPLAYS = [
    (
        "00_orientation.ipynb",
        {"workspace": "pm_00", "user_name": "Grace", "favorite_number": 1815},
        "agent: Your name is Grace and your favorite number is 1815.",
    ),
    (
        "01_restart_test.ipynb",
        {"workspace": "pm_01", "session_id": "papermill-restart", "other_session_id": "nobody", "user_name": "Ada", "favorite_number": 7,
         "writers": 4},
        "restored by each writer: [2, 4, 6, 8]",
    ),
    (
        "02_agent_json_anatomy.ipynb",
        {"workspace": "pm_02", "session_id": "pm-state", "snapshot_session_id": "pm-snapshot", "user_name": "Ada", "plan": "team"},
        "'plan': 'team'",
    ),
    (
        "03_sliding_window.ipynb",
        {"workspace": "pm_03a", "window_size": 4, "codename": "PHOENIX", "interactive": False},
        "turn 1 received by the calls of turns [1, 2, 3]",
    ),
    (
        "03_sliding_window.ipynb",
        {"workspace": "pm_03b", "window_size": 10, "turns": 12, "interactive": False},
        "turn 1 received by the calls of turns [1, 2, 3, 4, 5, 6]",
    ),
    ("04_state_manifest.ipynb", {"workspace": "pm_04", "window_size": 4, "turns": 9, "codename": "PHOENIX"},
     "appended  manifests after 9 invocations: 9"),
    (
        "05_summarization.ipynb",
        {"workspace": "pm_05", "threshold": 0.01, "turns": 9, "codename": "PHOENIX", "small_window": 5_000,
         "preserve_recent_messages": 1, "interactive": False},
        "threshold: 0.01 × 300,000 = 3,000 tokens",
    ),
    (
        "06_vector_recall.ipynb",
        {"workspace": "pm_06", "query": "when should I schedule a call with them?", "top_k": 12, "min_score": -1.0},
        "memories in the call: 5\nthe user message the model received:\nwhen should I schedule a call with them?\n\n\n"
        "<memory>\n<entry source=\"user-memory\">The user is on call every third week.</entry>",
    ),
    (
        "07_cost_of_remembering.ipynb",
        {"workspace": "pm_07", "turns": 12, "payoff_turns": 40, "window_size": 6, "codename": "PHOENIX", "token_budget": 200},
        "every call: payoff turn 28 of 40",
    ),
    (
        "08_what_to_remember.ipynb",
        {"workspace": "pm_08", "turns": 20, "user_a": "lin", "user_b": "sam"},
        "20 turns for lin, 5 for sam",
    ),
    (
        "09_forgetting_on_purpose.ipynb",
        {"workspace": "pm_09", "user": "noor", "other_user": "tomas", "value": "Calle Añil 3", "other_value": "Rua do Sol 9"},
        "noor forgets the home address 'Calle Añil 3'; tomas's is 'Rua do Sol 9'",
    ),
    (
        "10_what_a_delete_leaves_behind.ipynb",
        {"workspace": "pm_10_deep", "user": "noor", "other_user": "tomas", "value": "Calle Añil 3",
         "other_value": "Rua do Sol 9"},
        "noor's home address 'Calle Añil 3' is in the five stores of stores/",
    ),
    (
        "11_memory_you_can_trust.ipynb",
        {"workspace": "pm_11_trust", "owner": "grace", "attacker": "eve", "min_grounding": 0.6, "confirm_sensitive": False},
        "grace is asked: Store this in your long-term memory?",
    ),
    (
        "12_sessions_at_scale.ipynb",
        {"workspace": "pm_12_sessions", "users": 7, "turns": 4, "workers": 3, "writers": 4, "bucket": "pm-12-sessions"},
        "10 messages for 5 turns",
    ),
    (
        "13_episodes.ipynb",
        {"workspace": "pm_13_episodes", "recall_k": 2},
        "episodes recalled at cosine >= 0.7, up to 2 a call",
    ),
    (
        "14_procedures.ipynb",
        {"workspace": "pm_14_procedures", "owner": "grace", "other_participant": "eve"},
        "in the store file: False; grace answers 'yes'",
    ),
    (
        "15_consolidation.ipynb",
        {"workspace": "pm_15_consolidation", "merge_threshold": 0.7},
        "chosen on the tuning pairs: 0.786 | used: 0.7",
    ),
]


def replay(name: str, tmp_path: Path, parameters: dict) -> nbformat.NotebookNode:
    output = tmp_path / name
    papermill.execute_notebook(
        str(NOTEBOOKS / name),
        str(output),
        parameters={"backend": "offline", **parameters},
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
        execution_timeout=300,  # a hung cell fails the test instead of the whole CI run
    )
    return nbformat.read(output, as_version=4)


def printed(notebook: nbformat.NotebookNode) -> str:
    return "".join(
        output.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])
    )


def test_every_notebook_has_a_replay():
    assert sorted({name for name, _, _ in REPLAYS}) == sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))


@pytest.mark.parametrize("name, parameters, expected", REPLAYS, ids=[p["workspace"] for _, p, _ in REPLAYS])
def test_replay_with_other_parameters(name, parameters, expected, tmp_path, workspace_root):
    notebook = replay(name, tmp_path, parameters)
    text = printed(notebook)
    assert checks_held(notebook), "the claims ledger was shown and every row holds"
    assert expected in text + ledger_text(notebook), "the replay used the injected parameters"
    assert (workspace_root / parameters["workspace"]).is_dir(), "it wrote inside its own workspace"
    assert sorted(p.name for p in workspace_root.iterdir()) == [parameters["workspace"]], "and nowhere else"


def test_unsafe_workspace_parameter_stops_the_replay(tmp_path, workspace_root):
    outside = workspace_root.parent / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    with pytest.raises(papermill.PapermillExecutionError, match="UnsafePathError"):
        replay("00_orientation.ipynb", tmp_path, {"workspace": "../precious"})
    assert (outside / "keep.txt").read_text() == "keep"


def test_unsafe_session_id_parameter_stops_the_replay(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="Unsafe session id"):
        replay("01_restart_test.ipynb", tmp_path, {"workspace": "pm_bad", "session_id": "../../escape"})
    assert not (workspace_root.parent / "escape").exists()


def test_odd_window_is_refused_with_a_reason(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="window_size must be an even number"):
        replay("03_sliding_window.ipynb", tmp_path, {"workspace": "pm_odd", "window_size": 5})


def test_unknown_backend_parameter_lists_the_choices(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="Choose one of: offline, bedrock"):
        replay("02_agent_json_anatomy.ipynb", tmp_path, {"backend": "gpt-9"})
