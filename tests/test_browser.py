"""A person's path through JupyterLab, in a real browser: open each notebook, run its first cells, move a slider.

The test starts `jupyter lab` from the venv on loopback (its own JupyterLab workspace and settings folders, its own
workbook workspace root) and drives it in Debian's Chromium (/usr/bin/chromium) with Playwright; it never downloads a
browser. Per notebook it checks: the workbook kernel starts with no "Select Kernel" dialog and no pop-up, its cells up to the
setup (or up to the slider, where it has one) run with zero error outputs, sliders render as controls, and a slider
moved with the keyboard redraws its output (table and plot where it shows them). The whole notebook runs elsewhere
(nbval, its exercises, the class replay), so the browser does not run it a fourth time. At the end: the notebooks
on disk and `git status` are as before (autosave is off in tools/jupyterlab-overrides.json) and every process the test
started has ended. One screenshot per notebook is saved; the folder is printed at the end of the test session.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
CHROMIUM = Path(os.environ.get("WORKBOOK_CHROMIUM", "/usr/bin/chromium"))
# Flags for a root user in a container: no sandbox, no GPU, and nothing that phones home (no QUIC, no background
# networking, no component updates, no sync, no first-run page). Playwright adds a fresh --user-data-dir itself.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
KERNEL_DISPLAY_NAME = "Agent memory (workbook)"
SLIDER_NOTEBOOKS = ("03_",)  # notebooks known to end with sliders; any other notebook with a slider is tried too
RUN_ALL_TIMEOUT = 300  # seconds per notebook, as --nbval-cell-timeout for one cell



def missing_tool(message: str) -> None:
    """Skip the module on a learner's machine; under CI=true fail instead: CI never passes with this test skipped."""
    if os.environ.get("CI"):
        pytest.fail(f"CI: {message}: the browser test cannot run", pytrace=False)
    pytest.skip(f"{message}: the browser test is skipped", allow_module_level=True)


if not CHROMIUM.exists():
    missing_tool(f"No Chromium at {CHROMIUM} (Debian: apt-get install chromium)")
try:
    import playwright.sync_api as playwright_sync  # noqa: E402  (after the Chromium check, as a skip or failure)
except ImportError:
    missing_tool("playwright is not installed: run `make test` (installs .[test])")

NOTEBOOK_NAMES = sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))

# The notebook open in the main area, read from JupyterLab's own models (window.jupyterapp, exposed for the test).
STATE_JS = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  if (!w || !w.content || !w.content.model || !w.sessionContext) return null;
  const cells = Array.from(w.content.model.cells);
  const code = cells.filter(c => c.type === 'code');
  const errors = [];
  cells.forEach((c, i) => {
    if (c.type !== 'code') return;
    for (const o of c.outputs.toJSON()) {
      if (o.output_type === 'error') errors.push(`cell ${i}: ${o.ename}: ${o.evalue}`);
    }
  });
  const kernel = w.sessionContext.session && w.sessionContext.session.kernel;
  return {
    path: w.context.path,
    kernelName: w.sessionContext.kernelDisplayName,
    kernelStatus: kernel ? kernel.status : 'none',
    codeCells: code.length,
    executed: code.filter(c => c.executionCount !== null).length,
    counts: code.map(c => c.executionCount),
    running: code.filter(c => c.executionState === 'running').length,
    errors,
  };
}"""

POPUPS_JS = """() => Array.from(document.querySelectorAll('.jp-Dialog, .Toastify__toast'))
  .map(e => e.innerText.trim().replace(/\\s+/g, ' ').slice(0, 200))"""

# What a widget's output area shows now: its text, its tables and its images, each marked so a redraw is visible.
WIDGET_OUTPUT_JS = """(mark) => {
  const area = document.querySelector('.jp-Notebook .widget-interact');
  if (!area) return null;
  const out = area.querySelector('.widget-output') || area;
  const tables = Array.from(out.querySelectorAll('table'));
  const images = Array.from(out.querySelectorAll('img'));
  const fresh = tables.concat(images).filter(e => !e.dataset.seenByTest).length;
  if (mark) tables.concat(images).forEach(e => { e.dataset.seenByTest = '1'; });
  return {text: out.innerText, tables: tables.length, images: images.map(i => i.src), fresh};
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def repo_snapshot() -> tuple[str, dict[str, str]]:
    """`git status` of notebooks/ (what JupyterLab could save or create) and the bytes of every notebook there.

    Scoped to notebooks/ because the rest of the test suite (other workers, in parallel) may write elsewhere meanwhile."""
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--", "notebooks"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    # While the series is being written, a new numbered notebook may appear meanwhile: it was not opened here.
    status = "\n".join(line for line in status if not (line.endswith(".ipynb") and Path(line[3:]).name[:2].isdigit()
                                                        and Path(line[3:]).name not in NOTEBOOK_NAMES))
    digests = {name: hashlib.sha256((NOTEBOOKS / name).read_bytes()).hexdigest() for name in NOTEBOOK_NAMES}
    return status, digests


def processes_mentioning(text: str) -> list[int]:
    """Process ids whose command line contains `text` (the test's own temp folder: its server and kernels)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def describe_process(pid: int) -> str:
    try:
        command = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        return f"{pid}: {command[:160]}"
    except OSError:
        return f"{pid}: (ended meanwhile)"


class Lab:
    """A JupyterLab server of the test's own and one Chromium page on it."""

    def __init__(self, root: Path):
        self.root = root
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        self.workspace_root = root / "workbook-workspace"
        self.workspace_root.mkdir()
        env = dict(os.environ, WORKBOOK_WORKSPACE_ROOT=str(self.workspace_root), JUPYTER_RUNTIME_DIR=str(root / "runtime"),
                   WORKBOOK_BACKEND="offline", ORT_DISABLE_TELEMETRY="1", AWS_EC2_METADATA_DISABLED="true")
        self.log = open(root / "jupyter-lab.log", "w")  # noqa: SIM115 (closed in stop())
        self.server = subprocess.Popen(
            [str(REPO / ".venv/bin/jupyter"), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
             f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={NOTEBOOKS}", "--allow-root",
             "--LabApp.expose_app_in_browser=True",  # the test reads cell outputs from JupyterLab's models
             f"--LabApp.workspaces_dir={root / 'lab-workspaces'}",  # no saved layout reopens old tabs
             f"--LabApp.user_settings_dir={root / 'lab-user-settings'}"],  # the overrides the venv installs, nothing else
            cwd=REPO, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.playwright = self.context = None
        self.stopped = False
        self.left_running: list[str] | None = None  # what was still running after a clean shutdown, before any kill
        try:
            self._wait_for_server()
            self.playwright = playwright_sync.sync_playwright().start()
            self.context = self.playwright.chromium.launch_persistent_context(
                str(root / "chromium-profile"), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS,
                viewport={"width": 1280, "height": 900})
            self.page = self.context.pages[0] if self.context.pages else self.context.new_page()
            self.page.set_default_timeout(60_000)
            self.page.goto(f"{self.url}/lab?token={self.token}")
            self.page.wait_for_selector(".jp-DirListing-content .jp-DirListing-item")
            self.page.wait_for_function("() => window.jupyterapp && window.jupyterapp.started !== undefined")
        except BaseException:
            self.stop()
            raise

    def _wait_for_server(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.server.returncode}; see {self.log.name}")
            try:
                urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=2).close()
                return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"jupyter lab did not answer within 120 s; see {self.log.name}")

    def state(self) -> dict | None:
        return self.page.evaluate(STATE_JS)

    def popups(self) -> list[str]:
        return self.page.evaluate(POPUPS_JS)

    def open(self, name: str) -> dict:
        """Double-click the notebook in the file browser; wait until its kernel is idle or a dialog asks something."""
        self.page.locator(".jp-DirListing-content .jp-DirListing-item").filter(
            has=self.page.get_by_text(name, exact=True)).dblclick()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            state = self.state()
            if self.popups() or (state and state["path"] == name and state["kernelStatus"] == "idle"):
                return state
            time.sleep(0.25)
        raise AssertionError(f"{name}: the kernel was not idle within 120 s (last state {state})")

    def restart_and_run_all(self) -> dict:
        # The notebook opens with its saved outputs and execution counts, which look like a finished run: record the
        # kernel's statuses from now on, and count the run as finished only after a restart and then a busy kernel.
        self.page.evaluate("""() => {
          const statuses = window.workbookTestStatuses = [];
          window.jupyterapp.shell.currentWidget.sessionContext.statusChanged.connect((_, status) => statuses.push(status));
        }""")
        self.page.get_by_role("menuitem", name="Kernel", exact=True).click()
        self.page.get_by_role("menuitem", name="Restart Kernel and Run All Cells…").click()
        self.page.locator(".jp-Dialog .jp-mod-accept").click()  # "Restart Kernel?" asks first, as it asks a person
        self.page.wait_for_selector(".jp-Dialog", state="detached")
        deadline, stable, state, statuses = time.monotonic() + RUN_ALL_TIMEOUT, 0, None, ""
        while time.monotonic() < deadline:
            state = self.state()
            statuses = self.page.evaluate("() => window.workbookTestStatuses.join(' ')")
            started = "restarting" in statuses and "busy" in statuses.split("restarting", 1)[1]
            done = started and state["kernelStatus"] == "idle" and not state["running"] and (
                state["executed"] == state["codeCells"] or state["errors"])
            stable = stable + 1 if done else 0
            if stable >= 5:  # finished, and still so a second later (four more looks, 0.25 s apart)
                return state
            time.sleep(0.25)
        raise AssertionError(f"Run All did not finish within {RUN_ALL_TIMEOUT} s: {state}; kernel statuses: {statuses}")

    def run_through(self, last_code_cell: int) -> dict:
        """Run the notebook's code cells up to and including the code cell numbered `last_code_cell` (from 0), as a
        person does with Run > Run All Above Selected Cell and then Shift+Enter, and wait until they have run."""
        self.page.evaluate("""async (last) => {
          const notebook = window.jupyterapp.shell.currentWidget.content;
          const cells = Array.from(notebook.model.cells);
          const index = cells.map((c, i) => [c, i]).filter(([c]) => c.type === 'code')[last][1];
          await window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs');  // the saved run's counts go
          notebook.activeCellIndex = index;
          await window.jupyterapp.commands.execute('notebook:run-all-above');
          await window.jupyterapp.commands.execute('notebook:run-cell');
        }""", last_code_cell)
        deadline, stable, state = time.monotonic() + RUN_ALL_TIMEOUT, 0, None
        while time.monotonic() < deadline:
            state = self.state()
            ran = state["counts"][: last_code_cell + 1]
            done = state["kernelStatus"] == "idle" and not state["running"] and (
                all(count is not None for count in ran) or state["errors"])
            stable = stable + 1 if done else 0
            if stable >= 5:
                return state
            time.sleep(0.25)
        raise AssertionError(f"the cells did not finish within {RUN_ALL_TIMEOUT} s: {state}")

    def close_current(self) -> None:
        """Shut down the notebook's kernel and close its tab without saving (a person would choose "Discard")."""
        self.page.evaluate("""async () => {
          const w = window.jupyterapp.shell.currentWidget;
          await w.sessionContext.shutdown();
          w.context.model.dirty = false;
          w.close();
        }""")

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        for close in (lambda: self.context and self.context.close(), lambda: self.playwright and self.playwright.stop()):
            try:
                close()
            except Exception as error:  # the browser may be gone already; the server must still be stopped
                print(f"browser shutdown: {error}", file=sys.stderr)
        clean = True
        if self.server.poll() is None:
            try:  # the server shuts its kernels down on this request
                urllib.request.urlopen(urllib.request.Request(f"{self.url}/api/shutdown?token={self.token}", method="POST"),
                                       timeout=10).close()
                self.server.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                clean = False
                os.killpg(self.server.pid, signal.SIGTERM)
                self.server.wait(30)
        # Before anything is killed: which of the test's processes (server, kernels, browser) did NOT end on their own
        # after the browser closed and the server shut down (a few seconds' grace for kernels to exit).
        deadline = time.monotonic() + 10
        while processes_mentioning(str(self.root)) and time.monotonic() < deadline:
            time.sleep(0.5)
        self.left_running = [describe_process(pid) for pid in processes_mentioning(str(self.root))]
        if not clean:
            self.left_running.append("the server did not answer its shutdown request within 30 s (it was sent SIGTERM)")
        for pid in processes_mentioning(str(self.root)):  # the clean-up, whatever the test says: kernels run in sessions of their own
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.log.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    before = repo_snapshot()
    checkpoints = NOTEBOOKS / ".ipynb_checkpoints"
    had_checkpoints = checkpoints.exists()
    root = tmp_path_factory.mktemp("jupyterlab")
    lab = Lab(root)
    lab.before = before
    # WORKBOOK_SCREENSHOTS names a folder that outlives pytest's rotation of its temp folders (CI artifacts, say).
    chosen = os.environ.get("WORKBOOK_SCREENSHOTS")
    lab.screenshots = Path(chosen) if chosen else tmp_path_factory.mktemp("browser-screenshots")
    lab.screenshots.mkdir(parents=True, exist_ok=True)
    yield lab
    lab.stop()
    if not had_checkpoints and checkpoints.exists():
        shutil.rmtree(checkpoints)


def report_screenshots(request, folder: Path) -> None:
    request.node.user_properties.append(("browser screenshots", str(folder)))
    print(f"screenshots: {folder}")


def cells_to_run(name: str) -> int:
    """The last code cell the browser runs: the slider's cell where the notebook has one, else the setup cell (the
    first code cell after the parameters). Every notebook runs in full under nbval, in its exercises' run and in the
    class replay; here a person's path is what is tested: the kernel, the widgets, nothing saved."""
    code = [c for c in nbformat.read(NOTEBOOKS / name, as_version=4).cells if c.cell_type == "code"]
    slider = [i for i, c in enumerate(code) if "Slider(" in c.source]
    return slider[0] if slider else 1


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_a_person_opens_the_notebook_and_runs_its_first_cells(lab, name, request):
    state = lab.open(name)
    try:
        assert not lab.popups(), f"{name}: a dialog or pop-up appeared on opening: {lab.popups()}"
        assert state["kernelName"] == KERNEL_DISPLAY_NAME, state

        last = cells_to_run(name)
        state = lab.run_through(last)
        assert state["errors"] == [], f"{name}: error outputs: {state['errors']}"
        assert state["counts"][: last + 1] == list(range(1, last + 2)), (
            f"{name}: not every cell ran once, in order: {state['counts']}")
        assert not lab.popups(), f"{name}: a dialog or pop-up appeared during the run: {lab.popups()}"

        source = (NOTEBOOKS / name).read_text()
        if name.startswith(SLIDER_NOTEBOOKS):
            assert "Slider(" in source, f"{name} is expected to offer sliders"
        if "Slider(" in source:
            move_a_slider_with_the_keyboard(lab, name)
        shot = lab.screenshots / f"{Path(name).stem}.png"
        lab.page.screenshot(path=str(shot))
        report_screenshots(request, lab.screenshots)
    finally:
        lab.close_current()


def move_a_slider_with_the_keyboard(lab: Lab, name: str) -> None:
    page = lab.page
    sliders = page.locator(".jp-Notebook .widget-interact .widget-slider")
    assert sliders.count() >= 1, f"{name}: the sliders did not render as controls"
    assert "Slider(" not in page.locator(".jp-Notebook .widget-interact").first.inner_text()
    handle = sliders.first.locator(".noUi-handle")
    handle.scroll_into_view_if_needed()
    readout = sliders.first.locator(".widget-readout")
    value_before = readout.inner_text()
    before = page.evaluate(WIDGET_OUTPUT_JS, True)
    assert before and before["tables"] + len(before["images"]) > 0, f"{name}: the widget shows no table or plot: {before}"

    handle.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        """(before) => {
          const now = (""" + WIDGET_OUTPUT_JS + """)(false);
          return now && now.text !== before.text && now.tables === before.tables && now.images.length === before.images.length
                 && now.fresh === now.tables + now.images.length && now.images.every((src, i) => src !== before.images[i]);
        }""", arg=before, timeout=120_000)
    assert readout.inner_text() != value_before, f"{name}: the slider's value did not change"
    page.locator(".jp-Notebook .widget-interact").first.scroll_into_view_if_needed()
    time.sleep(0.5)  # let the new image paint before the screenshot


def test_the_repository_is_unchanged_and_every_process_ended(lab):
    """Runs after the notebooks (same module, same worker): nothing was saved, nothing written to the repo."""
    saves = [line for line in Path(lab.log.name).read_text().splitlines() if "Saving file at" in line]
    assert saves == [], f"JupyterLab saved files (autosave should be off): {saves}"
    status, digests = repo_snapshot()
    assert status == lab.before[0], f"`git status -- notebooks` changed during the browser session:\n{status}"
    assert digests == lab.before[1], "a notebook on disk changed during the browser session (saved?)"
    assert any(lab.workspace_root.iterdir()), "the notebooks wrote nothing to the test's WORKBOOK_WORKSPACE_ROOT"
    lab.stop()
    assert lab.left_running == [], "after the browser closed and the server shut down, these had not ended on their " \
        "own (they were then killed):\n" + "\n".join(lab.left_running)
    assert lab.server.poll() is not None
    time.sleep(1)
    assert processes_mentioning(str(lab.root)) == [], "processes started by the test are still running"
