"""Opening and saving a notebook in JupyterLab must not change it: the overrides and the refresh tool's output form."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import nbformat
import pytest

from conftest import REPO

# Where JupyterLab installed its settings schemas: this environment's data folder (the .venv of `make test`, or the
# conda/Binder environment of `tools/workbook.py setup --here`) and the repository's .venv.
JUPYTER_DIRS = list(dict.fromkeys([Path(sys.prefix) / "share" / "jupyter", REPO / ".venv" / "share" / "jupyter"]))
OVERRIDES = json.loads((REPO / "tools" / "jupyterlab-overrides.json").read_text())

spec = importlib.util.spec_from_file_location("refresh_notebooks", REPO / "tools" / "refresh_notebooks.py")
refresh = importlib.util.module_from_spec(spec)
spec.loader.exec_module(refresh)


def schema_of(plugin_id: str) -> dict:
    """The settings schema JupyterLab installed for `plugin_id` ("@scope/package:plugin").

    A missing schema FAILS: a misspelt or renamed id is exactly what this check exists to catch (JupyterLab silently
    ignores settings of a plugin it does not have). Only when JupyterLab itself is not installed here is it skipped,
    and under CI=true that fails too."""
    package, _, plugin = plugin_id.partition(":")
    for root in JUPYTER_DIRS:
        for path in (root / "lab" / "schemas" / package / f"{plugin}.json",
                     root / "labextensions" / package / "schemas" / package / f"{plugin}.json"):
            if path.is_file():
                return json.loads(path.read_text())
    if not any((root / "lab" / "schemas" / "@jupyterlab").is_dir() for root in JUPYTER_DIRS):
        message = f"JupyterLab's settings schemas are not installed in {JUPYTER_DIRS} (run `make lab` or `make test` first)"
        if os.environ.get("CI"):
            pytest.fail(f"CI: {message}")
        pytest.skip(message)
    pytest.fail(f"no installed schema for {plugin_id!r} in {JUPYTER_DIRS}: a misspelt or renamed plugin id? "
                "JupyterLab ignores settings of a plugin it does not have")


def test_a_misspelt_plugin_id_fails_not_skips():
    assert "autosave" in schema_of("@jupyterlab/docmanager-extension:plugin")["properties"]
    for wrong in ("@jupyterlab/docmanager-extension:plugn", "@jupyterlab/docmanager-extensions:plugin", "no-colon"):
        try:
            schema_of(wrong)
        except pytest.fail.Exception as failure:
            assert "no installed schema for" in str(failure)
        except pytest.skip.Exception as skipped:
            raise AssertionError(f"{wrong}: skipped instead of failing ({skipped})") from None
        else:
            raise AssertionError(f"{wrong}: a schema was found for an id JupyterLab does not have")


def test_autosave_is_off_and_widget_state_is_not_saved():
    assert OVERRIDES["@jupyterlab/docmanager-extension:plugin"] == {"autosave": False}
    assert OVERRIDES["@jupyter-widgets/jupyterlab-manager:plugin"] == {"saveState": False}


@pytest.mark.parametrize("plugin_id", sorted(OVERRIDES))
def test_every_override_is_a_key_of_the_installed_schema(plugin_id):
    properties = schema_of(plugin_id)["properties"]
    for key, value in OVERRIDES[plugin_id].items():
        assert key in properties, f"{plugin_id} has no setting {key!r}: JupyterLab would ignore it"
        spec = properties[key]
        allowed = [choice["const"] for choice in spec.get("oneOf", []) if "const" in choice]
        if allowed:
            assert value in allowed, (plugin_id, key, value, allowed)
        else:
            expected = {"boolean": bool, "string": str, "number": (int, float)}[spec["type"]]
            assert isinstance(value, expected), (plugin_id, key, value, spec["type"])


def sample() -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.nbformat_minor = 4
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {"m": {"max": -2.0}}}}
    cell = nbformat.v4.new_code_cell("interactive_plot")
    cell.metadata["execution"] = {"iopub.status.busy": "2026-11-30T10:00:00Z"}
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stderr", text="warning one\n"),
        nbformat.v4.new_output("stream", name="stderr", text="warning two\n"),
        nbformat.v4.new_output("stream", name="stdout", text="10%\r50%\r100%\n"),
        nbformat.v4.new_output(
            "display_data",
            data={
                "application/vnd.jupyter.widget-view+json": {"model_id": "abc123", "version_major": 2, "version_minor": 0},
                "text/plain": "interactive(children=(FloatSlider(value=-4.3, description='log10(threshold)'),))",
            },
        ),
        nbformat.v4.new_output("execute_result", data={"application/json": {"ratio": 2.0, "small": 0.5}}, execution_count=1),
    ]
    notebook.cells = [cell, nbformat.v4.new_markdown_cell("# Title")]
    for c in notebook.cells:
        c.pop("id", None)
    return notebook


def jupyterlab_save(path) -> str:
    """What a JupyterLab save does to the file: JSON through JavaScript (2.0 -> 2), streams merged, nbformat's writer."""
    content = json.loads(path.read_text(), parse_float=lambda text: int(float(text)) if float(text).is_integer() else float(text))
    for cell in content["cells"]:
        merged = []
        for output in cell.get("outputs", []):
            if merged and output["output_type"] == merged[-1]["output_type"] == "stream" and output["name"] == merged[-1]["name"]:
                merged[-1]["text"] = "".join(merged[-1]["text"]) + "".join(output["text"])
            else:
                merged.append(output)
        cell["outputs"] = merged if cell["cell_type"] == "code" else cell.get("outputs")
        if cell["cell_type"] != "code":
            cell.pop("outputs", None)
    content["nbformat_minor"] = max(content["nbformat_minor"], 5)
    out = path.with_suffix(".saved.ipynb")
    nbformat.write(nbformat.from_dict(content), out, version=nbformat.NO_CONVERT)
    return out.read_text()


def test_refresh_writes_what_jupyterlab_writes(tmp_path):
    path = tmp_path / "n.ipynb"
    refresh.write(sample(), path)
    text = path.read_text()
    assert text.endswith("}\n") and text.startswith('{\n "cells": [\n  {\n')
    notebook = json.loads(text)
    assert (notebook["nbformat"], notebook["nbformat_minor"]) == (4, 5)
    assert all(cell.get("id") for cell in notebook["cells"])
    assert "widgets" not in notebook["metadata"] and "abc123" not in text and "execution" not in notebook["cells"][0]["metadata"]
    assert not re.search(r"-?\d+\.0\b", text.replace("version_minor", "")), "no whole-number floats"
    outputs = notebook["cells"][0]["outputs"]
    assert [(o["output_type"], o.get("name")) for o in outputs] == [
        ("stream", "stderr"), ("stream", "stdout"), ("execute_result", None)
    ], "the widget's output is dropped, the others kept in order"
    assert "".join(outputs[0]["text"]) == "warning one\nwarning two\n"
    assert "".join(outputs[1]["text"]) == "100%\n"
    assert outputs[2]["data"]["application/json"] == {"ratio": 2, "small": 0.5}
    assert jupyterlab_save(path) == text, "a save in JupyterLab changes nothing"


def test_refresh_is_idempotent(tmp_path):
    first, second = tmp_path / "a.ipynb", tmp_path / "b.ipynb"
    refresh.write(sample(), first)
    refresh.write(nbformat.read(first, as_version=nbformat.NO_CONVERT), second)
    assert first.read_text() == second.read_text()


def test_refresh_keeps_cell_ids_and_sources(tmp_path):
    notebook = sample()
    notebook.nbformat_minor = 5
    for index, cell in enumerate(notebook.cells):
        cell["id"] = f"cell-{index}"
    path = tmp_path / "n.ipynb"
    refresh.write(copy.deepcopy(notebook), path)
    written = nbformat.read(path, as_version=4)
    assert [c.id for c in written.cells] == ["cell-0", "cell-1"]
    assert [c.source for c in written.cells] == [c.source for c in notebook.cells]


@pytest.mark.parametrize("path", sorted((REPO / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_committed_notebooks_are_in_jupyterlab_form(path, tmp_path):
    """`make notebooks` (tools/refresh_notebooks.py) writes this form; a JupyterLab save must not change the file."""
    text = path.read_text()
    copy_path = tmp_path / path.name
    copy_path.write_text(text)
    assert jupyterlab_save(copy_path) == text, f"{path.name}: refresh it with tools/refresh_notebooks.py"
    assert "application/vnd.jupyter.widget-view+json" not in text and '"widgets"' not in text
