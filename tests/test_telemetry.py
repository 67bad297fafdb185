"""No onnxruntime telemetry: a process that embeds for 30 s writes nothing under ~/.cache/Microsoft and sends no DNS query.

onnxruntime 1.32 writes a device id and an event database under ~/.cache/Microsoft/DeveloperTools/.onnxruntime/ on
import and, after about 12 s, looks up mobile.events.data.microsoft.com, unless ORT_DISABLE_TELEMETRY=1 is set before
it loads. companion/models/embeddings.py sets it itself, so the child below starts WITHOUT it in its environment.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import background
import pytest

from conftest import REPO

SECONDS = 30
EMBED_FOR = f"""
import sys, time
from companion.models.embeddings import MiniLMEmbedder
embedder = MiniLMEmbedder()
end, count = time.monotonic() + {SECONDS}, 0
while time.monotonic() < end:
    embedder.embed(["The user prefers deployments on Tuesday mornings."])
    count += 1
    time.sleep(0.5)
print("embedded", count)
"""


def embedding_process(folder: Path) -> dict:
    """The 30-second embedding process: HOME is an empty folder of its own, under strace when it is installed."""
    home = folder / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
    env.update(HOME=str(home), PYTHONPATH=str(REPO))
    command = [sys.executable, "-c", EMBED_FOR]
    strace = shutil.which("strace")
    if strace:
        command = [strace, "-f", "-qq", "-e", "trace=connect,sendto", "-o", str(folder / "strace.log")] + command
    return {"args": command, "cwd": REPO, "env": env}


# Started when the session starts (tests/background.py) and run beside the other tests: its 30 seconds are mostly
# sleep, and no worker waits on them; the fixture below reads what it did.
BACKGROUND = {"telemetry-embedding": embedding_process}


@pytest.fixture(scope="module")
def embedding_run(request):
    """The 30-second embedding process's HOME and its strace log (None without strace)."""
    done = background.result(request.config, "telemetry-embedding", embedding_process, timeout=SECONDS + 180)
    assert done["returncode"] == 0 and "embedded" in done["stdout"], done["stdout"] + done["stderr"]
    trace = done["folder"] / "strace.log"
    return done["folder"] / "home", (trace.read_text() if shutil.which("strace") and trace.exists() else None)


def test_no_telemetry_files_in_home(embedding_run):
    home, _ = embedding_run
    written = [str(p.relative_to(home)) for p in home.rglob("*")]
    assert written == [], f"files written under HOME: {written}"


def test_no_dns_query(embedding_run):
    _, trace = embedding_run
    if trace is None:
        message = "strace is not installed: the system-call check (no DNS query) did not run (.ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(f"CI: {message}")  # in CI a missing tool fails the run; it never passes with the check skipped
        pytest.skip(message)
    dns = [line for line in trace.splitlines() if re.search(r"(connect|sendto)\(.*htons\(53\)", line)]
    assert dns == [], "DNS queries (port 53):\n" + "\n".join(dns[:5])
    assert "events.data.microsoft" not in trace


def test_every_entry_point_disables_it():
    """The kernel, make's commands, and anything importing the companion set it before onnxruntime can load."""
    makefile = (REPO / "Makefile").read_text()
    # The kernel is registered by tools/workbook.py (make's set-up calls it) and by tools/wheelhouse.py's offline
    # install, both with the variable in the kernel spec; the kernel spec installed in this environment has it.
    spec = importlib.util.spec_from_file_location("workbook_tool", REPO / "tools" / "workbook.py")
    workbook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(workbook)
    kernel_install = workbook.install_commands("python", [])[1]
    assert kernel_install[kernel_install.index("--env"):][:3] == ["--env", "ORT_DISABLE_TELEMETRY", "1"]
    assert "tools/workbook.py setup" in makefile, "make's set-up registers the kernel through the script"
    assert '"--env", "ORT_DISABLE_TELEMETRY", "1"' in (REPO / "tools" / "wheelhouse.py").read_text(), "the offline install"
    installed = Path(sys.prefix) / "share" / "jupyter" / "kernels" / workbook.KERNEL / "kernel.json"
    if installed.exists():
        assert json.loads(installed.read_text())["env"]["ORT_DISABLE_TELEMETRY"] == "1", installed
    assert re.search(r"^export ORT_DISABLE_TELEMETRY", makefile, re.M), "make lab / make test / make notebooks"
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
    done = subprocess.run(  # the evaluation command's import (the package's __init__ runs first for any module)
        [sys.executable, "-c", "import os, companion.measure.recall_eval; print(os.environ.get('ORT_DISABLE_TELEMETRY'))"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )
    assert done.stdout.strip() == "1", (done.stdout, done.stderr)
    embeddings = (REPO / "companion" / "models" / "embeddings.py").read_text()
    assert embeddings.index('os.environ["ORT_DISABLE_TELEMETRY"] = "1"') < embeddings.index("import onnxruntime")


def test_ci_fails_when_a_tool_it_installs_is_missing(tmp_path):
    """.ci/run stops with an error, before the tests, when strace or Chromium cannot be installed: CI never goes on
    with the no-DNS check or the browser test skipped. Run here with stand-ins: an apt-get that fails and a `make`
    that only records that it was reached."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("dirname", "env"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    (bin_dir / "apt-get").write_text("#!/bin/sh\necho 'E: Unable to locate package' >&2\nexit 100\n")
    (bin_dir / "make").write_text(f"#!/bin/sh\n: > {tmp_path / 'make-ran'}\n")
    (bin_dir / "strace").write_text("#!/bin/sh\nexit 0\n")
    for stub in ("apt-get", "make", "strace"):
        (bin_dir / stub).chmod(0o755)
    chromium = tmp_path / "chromium"
    chromium.write_text("#!/bin/sh\nexit 0\n")
    chromium.chmod(0o755)
    bash = shutil.which("bash")

    def ci(*, strace: bool, chromium_at) -> subprocess.CompletedProcess:
        if not strace:
            (bin_dir / "strace").unlink(missing_ok=True)
        env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "WORKBOOK_CHROMIUM": str(chromium_at)}
        return subprocess.run([bash, str(REPO / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)

    ran = ci(strace=True, chromium_at=chromium)  # both tools present: the tests run
    assert ran.returncode == 0 and (tmp_path / "make-ran").exists(), ran.stderr
    (tmp_path / "make-ran").unlink()

    no_chromium = ci(strace=True, chromium_at=tmp_path / "no-chromium")
    assert no_chromium.returncode != 0 and "Chromium could not be installed" in no_chromium.stderr, no_chromium.stderr
    assert not (tmp_path / "make-ran").exists(), "the tests ran without Chromium: the browser test would be skipped"

    no_strace = ci(strace=False, chromium_at=chromium)
    assert no_strace.returncode != 0 and "strace could not be installed" in no_strace.stderr, no_strace.stderr
    assert not (tmp_path / "make-ran").exists(), "the tests ran without strace: the no-DNS check would be skipped"
