"""No onnxruntime telemetry: a process that embeds for 30 s writes nothing under ~/.cache/Microsoft and sends no DNS query.

onnxruntime 1.32 writes a device id and an event database under ~/.cache/Microsoft/DeveloperTools/.onnxruntime/ on
import and, after about 12 s, looks up mobile.events.data.microsoft.com, unless ORT_DISABLE_TELEMETRY=1 is set before
it loads. companion/embeddings.py sets it itself, so the child below starts WITHOUT it in its environment.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import REPO

SECONDS = 30
EMBED_FOR = f"""
import sys, time
from companion.embeddings import MiniLMEmbedder
embedder = MiniLMEmbedder()
end, count = time.monotonic() + {SECONDS}, 0
while time.monotonic() < end:
    embedder.embed(["The user prefers deployments on Tuesday mornings."])
    count += 1
    time.sleep(0.5)
print("embedded", count)
"""


@pytest.fixture(scope="module")
def embedding_run(tmp_path_factory):
    """One 30-second embedding process with HOME in a temporary directory, under strace when it is installed."""
    home = tmp_path_factory.mktemp("home")
    trace = home.parent / "strace.log"
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
    env.update(HOME=str(home), PYTHONPATH=str(REPO))
    command = [sys.executable, "-c", EMBED_FOR]
    strace = shutil.which("strace")
    if strace:
        command = [strace, "-f", "-qq", "-e", "trace=connect,sendto", "-o", str(trace)] + command
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=SECONDS + 60)
    assert done.returncode == 0 and "embedded" in done.stdout, done.stdout + done.stderr
    return home, (trace.read_text() if strace and trace.exists() else None)


def test_no_telemetry_files_in_home(embedding_run):
    home, _ = embedding_run
    written = [str(p.relative_to(home)) for p in home.rglob("*")]
    assert written == [], f"files written under HOME: {written}"


def test_no_dns_query(embedding_run):
    _, trace = embedding_run
    if trace is None:
        pytest.skip("strace is not installed: the system-call check (no DNS query) did not run (.ci/run installs it)")
    dns = [line for line in trace.splitlines() if re.search(r"(connect|sendto)\(.*htons\(53\)", line)]
    assert dns == [], "DNS queries (port 53):\n" + "\n".join(dns[:5])
    assert "events.data.microsoft" not in trace


def test_every_entry_point_disables_it():
    """The kernel, make's commands, and anything importing the companion set it before onnxruntime can load."""
    makefile = (REPO / "Makefile").read_text()
    assert "--env ORT_DISABLE_TELEMETRY 1" in makefile, "the workbook kernel starts with it"
    assert re.search(r"^export ORT_DISABLE_TELEMETRY", makefile, re.M), "make lab / make test / make notebooks"
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
    done = subprocess.run(  # the evaluation command's import (the package's __init__ runs first for any module)
        [sys.executable, "-c", "import os, companion.recall_eval; print(os.environ.get('ORT_DISABLE_TELEMETRY'))"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )
    assert done.stdout.strip() == "1", (done.stdout, done.stderr)
    embeddings = (REPO / "companion" / "embeddings.py").read_text()
    assert embeddings.index('os.environ["ORT_DISABLE_TELEMETRY"] = "1"') < embeddings.index("import onnxruntime")
