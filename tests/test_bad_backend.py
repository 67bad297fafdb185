"""An unknown backend is a bad parameter like any other: every notebook refuses it with a message that names the
choices, before its workspace folder is created or emptied (nothing of an earlier run is lost to a typo)."""

from __future__ import annotations

import papermill
import pytest
from notebook_runs import NOTEBOOKS, refuse

NAMES = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))


@pytest.mark.parametrize("name", NAMES)
def test_an_unknown_backend_stops_before_the_workspace_is_touched(name, tmp_path, workspace_root):
    earlier = workspace_root / "earlier-run"
    earlier.mkdir()
    (earlier / "kept.txt").write_text("from an earlier run")
    with pytest.raises(papermill.PapermillExecutionError, match="Unknown model backend 'nova'"):
        refuse(name, {"backend": "nova", "workspace": "earlier-run"})
    assert (earlier / "kept.txt").read_text() == "from an earlier run", "the workspace was emptied before the refusal"
