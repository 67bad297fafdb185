"""The test command runs offline whatever the shell says: no Bedrock calls, no paid calls, no telemetry."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from conftest import REPO


def test_this_run_is_offline():
    """Holds in every test process: the repository's root conftest.py forces the offline backend before any test or
    kernel starts (what a fresh process of a bedrock shell sees is tested below)."""
    assert os.environ.get("WORKBOOK_BACKEND") == "offline"
    assert os.environ.get("ORT_DISABLE_TELEMETRY") == "1"


PROBE_CODE = (
    "import os\n"
    "from companion import make_model\n"
    "print(os.environ.get('WORKBOOK_BACKEND'), os.environ.get('ORT_DISABLE_TELEMETRY'),"
    " os.environ.get('AWS_EC2_METADATA_DISABLED'), type(make_model()).__name__)"
)
OFFLINE_LINE = "offline 1 true OfflineModel\n"


def probe_files(folder: Path) -> list[str]:
    """A one-cell notebook whose committed output is what an offline kernel prints (nbval compares it), and a one-test
    file asserting the same in the pytest process; both outside tests/ and notebooks/, so only the root conftest.py
    can make them offline."""
    import nbformat

    cell = nbformat.v4.new_code_cell(PROBE_CODE, execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=OFFLINE_LINE)]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, folder / "probe.ipynb")
    (folder / "test_probe.py").write_text(
        "import os\nfrom companion import make_model\n\n\ndef test_probe():\n"
        "    seen = (os.environ.get('WORKBOOK_BACKEND'), os.environ.get('ORT_DISABLE_TELEMETRY'),"
        " os.environ.get('AWS_EC2_METADATA_DISABLED'), type(make_model()).__name__)\n"
        f"    assert ' '.join(seen) + '\\n' == {OFFLINE_LINE!r}, seen\n",
        encoding="utf-8",
    )
    return ["probe.ipynb", "test_probe.py"]


def test_a_shell_asking_for_bedrock_still_gets_offline():
    """`pytest <a notebook or test file>` started from a shell that exports WORKBOOK_BACKEND=bedrock (with credentials,
    telemetry on, the metadata probe allowed) runs offline, in the pytest process and in the notebook's kernel.
    The probe lives in a folder of its own under the repository (replays/, ignored by git), so the root conftest.py is
    the only one that applies. The control run with --noconftest shows the probe does see a bedrock shell."""
    env = {k: v for k, v in os.environ.items() if k != "AWS_EC2_METADATA_DISABLED"}
    env.update(WORKBOOK_BACKEND="bedrock", AWS_ACCESS_KEY_ID="AKIAEXAMPLEEXAMPLE", AWS_SECRET_ACCESS_KEY="not-a-real-secret",
               AWS_REGION="us-east-1", ORT_DISABLE_TELEMETRY="0")
    folder = REPO / "replays" / f"offline-probe-{uuid.uuid4().hex[:12]}"
    folder.mkdir(parents=True)
    try:
        files = probe_files(folder)

        def pytest_run(*extra: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-m", "pytest", *files, "--nbval", "--nbval-current-env", "-p", "no:cacheprovider",
                 "-p", "no:xdist", "-q", *extra],
                cwd=folder, env=env, capture_output=True, text=True, timeout=180,
            )

        done = pytest_run()
        assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr
        control = pytest_run("--noconftest")
        assert control.returncode == 1 and "2 failed" in control.stdout, control.stdout + control.stderr
        assert "bedrock" in control.stdout and "BedrockModel" in control.stdout, control.stdout
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_make_test_sets_the_offline_environment():
    """`make test` names the backend on the test command itself, so a shell's WORKBOOK_BACKEND cannot reach it."""
    env = dict(os.environ, WORKBOOK_BACKEND="bedrock")
    done = subprocess.run(
        ["make", "-n", "-o", ".venv/.installed", "test"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    (command,) = [line for line in done.stdout.splitlines() if "pytest" in line]
    assert "WORKBOOK_BACKEND=offline" in command and "ORT_DISABLE_TELEMETRY=1" in command, command
