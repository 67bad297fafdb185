"""Instructor replays: every notebook run through papermill with non-default parameters; its checks must hold."""

from __future__ import annotations

from pathlib import Path

import nbformat
import papermill
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"

REPLAYS = {
    "00_orientation.ipynb": {"workspace": "pm_00", "user_name": "Ada", "favorite_number": 7},
    "01_restart_test.ipynb": {
        "workspace": "pm_01",
        "session_id": "papermill-restart",
        "other_session_id": "nobody",
        "user_name": "Ada",
        "favorite_number": 7,
    },
    "02_agent_json_anatomy.ipynb": {
        "workspace": "pm_02",
        "session_id": "pm-state",
        "snapshot_session_id": "pm-snapshot",
        "user_name": "Ada",
        "plan": "team",
    },
}


def replay(name: str, tmp_path: Path, parameters: dict) -> nbformat.NotebookNode:
    output = tmp_path / name
    papermill.execute_notebook(
        str(NOTEBOOKS / name),
        str(output),
        parameters={"backend": "offline", **parameters},
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
    )
    return nbformat.read(output, as_version=4)


def printed(notebook: nbformat.NotebookNode) -> str:
    return "".join(
        output.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])
    )


def test_every_notebook_has_a_replay():
    assert sorted(REPLAYS) == sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))


@pytest.mark.parametrize("name", sorted(REPLAYS))
def test_replay_with_other_parameters(name, tmp_path, workspace_root):
    notebook = replay(name, tmp_path, REPLAYS[name])
    text = printed(notebook)
    assert "All checks passed." in text
    assert "Ada" in text and "Pin" not in text, "the replay used the injected parameters"
    assert (workspace_root / REPLAYS[name]["workspace"]).is_dir(), "it wrote inside its own workspace"


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


def test_unknown_backend_parameter_lists_the_choices(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="Choose one of: offline, bedrock"):
        replay("02_agent_json_anatomy.ipynb", tmp_path, {"backend": "gpt-9"})
