"""The workspace guard: every notebook writes inside its own folder under the workspace root, nowhere else."""

from __future__ import annotations

import os

import pytest

from companion.support.workspace import MARKER, UnsafePathError, check_session_id, inside_root, reset_workspace
from companion.support.workspace import workspace_root as configured_root


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
    assert [p.name for p in again.iterdir()] == [MARKER], "emptied, and marked as the workbook's own"


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


def test_inside_root_resolves_names_and_paths_inside(workspace_root):
    assert inside_root("x") == workspace_root / "x"
    assert inside_root(workspace_root / "x" / "y") == workspace_root / "x" / "y"


@pytest.mark.parametrize("session_id", ["restart-demo", "a", "Session_2.v1"])
def test_safe_session_ids(session_id):
    assert check_session_id(session_id) == session_id


@pytest.mark.parametrize("session_id", ["", "../etc", "a/b", "a\\\\b", "..", ".hidden", "a..b", "x" * 129, "spa ce", None])
def test_unsafe_session_ids(session_id):
    with pytest.raises(UnsafePathError, match="Unsafe session id"):
        check_session_id(session_id)


# ---------------------------------------------------------------- issue 8.5: names, symlinks, the root itself


@pytest.mark.parametrize("session_id", ["session_abc\n", "abc\n", "a\nb", "abc\r"])
def test_session_ids_with_a_newline_are_refused(session_id):
    with pytest.raises(UnsafePathError, match="Unsafe session id"):
        check_session_id(session_id)


@pytest.mark.parametrize("name", ["a/b", "x/../y", "a\\b", "..", "./a", "a/", ".hidden", "bad\n"])
def test_workspace_names_with_separators_or_dots_are_refused(workspace_root, name):
    with pytest.raises(UnsafePathError, match="Nothing was written or deleted"):
        reset_workspace(name)
    assert list(workspace_root.iterdir()) == []


def test_reset_does_not_follow_a_workspace_symlinked_to_another_workspace(workspace_root):
    other = reset_workspace("other")
    (other / "keep.txt").write_text("precious")
    (workspace_root / "00_orientation").symlink_to(other, target_is_directory=True)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        reset_workspace("00_orientation")
    assert (other / "keep.txt").read_text() == "precious"
    assert (workspace_root / "00_orientation").is_symlink()


def test_a_symlink_on_the_way_down_is_refused(workspace_root, tmp_path):
    outside = tmp_path / "outside"
    (outside / "inner").mkdir(parents=True)
    (outside / "inner" / "keep.txt").write_text("precious")
    reset_workspace("ws")
    (workspace_root / "ws" / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        reset_workspace(workspace_root / "ws" / "link" / "inner")
    assert (outside / "inner" / "keep.txt").exists()


def test_a_root_that_is_a_symlink_is_refused(tmp_path, monkeypatch):
    outside = tmp_path / "outside"
    (outside / "00_orientation").mkdir(parents=True)
    (outside / "00_orientation" / "keep.txt").write_text("precious")
    link = tmp_path / "workspace"
    link.symlink_to(outside, target_is_directory=True)
    monkeypatch.setenv("WORKBOOK_WORKSPACE_ROOT", str(link))
    with pytest.raises(UnsafePathError, match="symbolic link"):
        reset_workspace("00_orientation")
    assert (outside / "00_orientation" / "keep.txt").exists()


def test_the_repository_workspace_may_not_be_a_symlink(tmp_path, monkeypatch):
    import companion.support.workspace as ws

    repo = tmp_path / "repo"
    (repo / "companion").mkdir(parents=True)
    outside = tmp_path / "outside"
    (outside / "00_orientation").mkdir(parents=True)
    (outside / "00_orientation" / "keep.txt").write_text("precious")
    (repo / "workspace").symlink_to(outside, target_is_directory=True)
    monkeypatch.delenv("WORKBOOK_WORKSPACE_ROOT", raising=False)
    monkeypatch.setattr(ws, "REPOSITORY_WORKSPACE", repo / "workspace")
    with pytest.raises(UnsafePathError, match="symbolic link"):
        reset_workspace("00_orientation")
    assert (outside / "00_orientation" / "keep.txt").exists()


@pytest.mark.parametrize("root", ["/", "~", "file"])
def test_a_root_the_workbook_does_not_own_is_refused(tmp_path, monkeypatch, root):
    home = tmp_path / "home"
    (home / "00_orientation").mkdir(parents=True)
    (home / "00_orientation" / "thesis.tex").write_text("precious")
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv("HOME", str(home))
    configured = {"/": "/", "~": str(home), "file": str(tmp_path / "file")}[root]
    monkeypatch.setenv("WORKBOOK_WORKSPACE_ROOT", configured)
    with pytest.raises(UnsafePathError, match="WORKBOOK_WORKSPACE_ROOT"):
        reset_workspace("00_orientation")
    assert (home / "00_orientation" / "thesis.tex").exists()


def test_a_new_or_empty_root_is_taken_and_then_recognised(tmp_path, monkeypatch):
    root = tmp_path / "new-root"
    monkeypatch.setenv("WORKBOOK_WORKSPACE_ROOT", str(root))
    reset_workspace("00_orientation")
    reset_workspace("01_restart_test")
    assert reset_workspace("00_orientation") == root / "00_orientation"
    assert sorted(p.name for p in root.iterdir()) == ["00_orientation", "01_restart_test"]
    (root / "stray.txt").write_text("someone else's")
    with pytest.raises(UnsafePathError, match="stray.txt"):
        reset_workspace("00_orientation")


def test_a_foreign_directory_in_a_configured_root_is_never_deleted(workspace_root):
    (workspace_root / "00_orientation").mkdir()
    (workspace_root / "00_orientation" / "keep.txt").write_text("precious")
    with pytest.raises(UnsafePathError, match="WORKBOOK_WORKSPACE_ROOT"):
        reset_workspace("00_orientation")
    assert (workspace_root / "00_orientation" / "keep.txt").exists()


def test_a_folder_inside_an_unmarked_entry_may_be_reset(workspace_root):
    """What a subprocess wrote under `inside_root(...)` (e.g. sessions/ and a barrier/ beside it) can be reset."""
    storage = inside_root(workspace_root / "w" / "sessions")
    storage.mkdir(parents=True)
    assert reset_workspace(storage.parent / "barrier") == workspace_root / "w" / "barrier"
    assert storage.is_dir()
