"""Notebook 06's exercises replayed: each parameter exercise with papermill (its checks must still pass and it must
show what the exercise says), each code exercise's hidden solution executed against the notebook's own cells."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import re
from pathlib import Path

import nbformat
import papermill
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NAME = "06_vector_recall.ipynb"
DEPLOY = "The user prefers deployments to happen on Tuesday mornings."


def replay(tmp_path: Path, parameters: dict) -> str:
    output = tmp_path / NAME
    papermill.execute_notebook(
        str(NOTEBOOKS / NAME),
        str(output),
        parameters={"backend": "offline", **parameters},
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
        execution_timeout=300,
    )
    notebook = nbformat.read(output, as_version=4)
    return "".join(
        output.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])
    )


def test_exercise_1_another_paraphrase(tmp_path, workspace_root):
    text = replay(tmp_path, {"workspace": "ex_06a", "query": "Which day suits them for pushing to production?"})
    assert "All checks passed." in text
    assert "the answer ranks 1 of 12 at cosine 0.528" in text, "the solution's cosine and rank"
    assert "Top hit 'The user's production cluster is called atlas-prod in eu-west-1.'" in text, "FTS5 lifts the cluster"
    assert "'production'" in text


def test_exercise_2_threshold_above_every_score(tmp_path, workspace_root):
    text = replay(tmp_path, {"workspace": "ex_06b", "min_score": 0.6})
    assert "All checks passed." in text
    assert "injected: 0 memories (none reached min_score)" in text
    assert "agent: I cannot see anything about that in this conversation." in text
    assert "the answer ranks 1 of 12 at cosine 0.494" in text, "the best score, below 0.6"


def test_exercise_3_empty_query_is_refused(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="query must be a non-empty text"):
        replay(tmp_path, {"workspace": "ex_06c", "query": ""})
    assert not (workspace_root / "ex_06c").exists(), "stopped before the workspace was reset"


@pytest.mark.parametrize("parameters, message", [
    ({"top_k": 0}, "top_k must be a whole number from 1 to 12"),
    ({"min_score": 1.5}, "min_score must be a number in"),
    ({"embedder": "word2vec"}, "embedder must be one of"),
])
def test_invalid_parameters_are_refused_up_front(tmp_path, workspace_root, parameters, message):
    with pytest.raises(papermill.PapermillExecutionError, match=message):
        replay(tmp_path, {"workspace": "ex_06d", **parameters})


# ---------------------------------------------------------------- code exercises: the hidden solutions, executed


def _cells():
    return nbformat.read(NOTEBOOKS / NAME, as_version=4).cells


def _solutions() -> list[str]:
    """The python blocks inside the notebook's <details> solutions, in order."""
    details = next(c.source for c in _cells() if c.cell_type == "markdown" and "<details><summary>Solutions" in c.source)
    return re.findall(r"```python\n(.*?)```", details, re.DOTALL)


def _run(source: str, namespace: dict) -> None:
    """Run notebook code (top-level await allowed) in `namespace`."""
    code = compile(source, "<notebook>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)  # noqa: S307 - the notebook's own code
    if asyncio.iscoroutine(result):
        asyncio.run(result)


@pytest.fixture
def notebook_namespace(workspace_root, monkeypatch):
    """The notebook's parameters, setup and NumpyMemoryStore cells run in-process, from notebooks/."""
    monkeypatch.chdir(NOTEBOOKS)
    namespace: dict = {}
    cells = {c.id: c.source for c in _cells() if c.cell_type == "code"}
    parameters = next(c.source for c in _cells() if "parameters" in c.metadata.get("tags", []))
    _run(parameters + '\nbackend = "offline"\nworkspace = "ex_06_code"', namespace)
    with contextlib.redirect_stdout(io.StringIO()):
        _run(cells["d3a78d9c"], namespace)
    _run(cells["c06-numpy-store"], namespace)
    return namespace


def test_solution_4_own_pairs_scored_through_the_protocol(notebook_namespace):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _run(_solutions()[0], notebook_namespace)
    scored = notebook_namespace["scored"]
    assert scored["memories"] == 47 and len(scored["ranks"]) == 47
    assert all(rank is not None for rank in scored["ranks"]), "every fact comes back (all memories are returned)"
    assert "recall@1" in out.getvalue()
    assert (notebook_namespace["workspace_dir"] / "my_pairs.jsonl").is_file(), "the copy lives in the workspace"


def test_solution_5_numpy_store_with_a_threshold(notebook_namespace):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _run(_solutions()[1], notebook_namespace)
    received = "".join(b.get("text", "") for b in notebook_namespace["strict_model"].last_messages[-1]["content"])
    entries = re.findall(r"<entry[^>]*>(.*?)</entry>", received)
    assert entries == [DEPLOY], "at min_score 0.3 only the deployment memory (0.494) reaches the model"
    assert "Tuesday" in out.getvalue()


def test_numpy_store_cell_is_about_thirty_lines():
    source = next(c.source for c in _cells() if c.id == "c06-numpy-store")
    assert len(source.splitlines()) <= 32
