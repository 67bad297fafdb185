"""The workspace guard: every notebook writes inside its own folder under the workspace root, nowhere else."""

from __future__ import annotations

import os

import pytest

from companion.workspace import UnsafePathError, check_session_id, inside_root, reset_workspace
from companion.workspace import workspace_root as configured_root


def test_root_comes_from_the_environment(workspace_root):
    assert os.environ["WORKBOOK_WORKSPACE_ROOT"].endswith("workspace")
    assert configured_root() == workspace_root


def test_default_root_is_the_repository_workspace(monkeypatch):
    monkeypatch.delenv("WORKBOOK_WORKSPACE_ROOT", raising=False)
    assert configured_root().name == "workspace"
    assert (configured_root().parent / "companion").is_dir()


def test_reset_empties_and_recreates(workspace_root):
    target = reset_workspace("01_restart_test")
    (target / "leftover.json").write_text("{}")
    (target / "sub").mkdir()
    again = reset_workspace("01_restart_test")
    assert again == target == workspace_root / "01_restart_test"
    assert list(again.iterdir()) == []


def test_reset_accepts_an_absolute_path_inside_the_root(workspace_root):
    assert reset_workspace(workspace_root / "a" / "b") == workspace_root / "a" / "b"


@pytest.mark.parametrize("path", ["..", "../elsewhere", "a/../../elsewhere", ".", "", "/tmp"])
def test_reset_refuses_paths_outside_the_root(workspace_root, path):
    sibling = workspace_root.parent / "elsewhere"
    sibling.mkdir(exist_ok=True)
    (sibling / "keep.txt").write_text("precious")
    with pytest.raises(UnsafePathError, match="Nothing was written or deleted"):
        reset_workspace(path)
    assert (sibling / "keep.txt").read_text() == "precious"


def test_reset_refuses_a_symlink_out_of_the_root(workspace_root):
    outside = workspace_root.parent / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("precious")
    (workspace_root / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePathError):
        reset_workspace("link")
    assert (outside / "keep.txt").exists()


def test_inside_root_resolves_names(workspace_root):
    assert inside_root("x/y") == workspace_root / "x" / "y"


@pytest.mark.parametrize("session_id", ["restart-demo", "a", "Session_2.v1"])
def test_safe_session_ids(session_id):
    assert check_session_id(session_id) == session_id


@pytest.mark.parametrize("session_id", ["", "../etc", "a/b", "a\\\\b", "..", ".hidden", "a..b", "x" * 129, "spa ce", None])
def test_unsafe_session_ids(session_id):
    with pytest.raises(UnsafePathError, match="Unsafe session id"):
        check_session_id(session_id)
