"""The class replay (`python -m companion.replay`): the series with the sample class file passes, a broken check is
named and fails the run, an interrupted replay leaves the committed notebooks alone, and the Bedrock estimate is shown
before anything is sent. Also the opt-in usage log that make_model attaches when $WORKBOOK_USAGE_LOG is set."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import psutil
import pytest
from notebook_runs import digests, ledger_text, printed, replay_command
from strands import Agent

from companion.models import backends
from companion.models.offline_model import OfflineModel
from companion.models.usage_log import USAGE_LABEL_ENV, USAGE_LOG_ENV, log_usage, read_usage
from companion.replay import (
    EXIT_TERMINATED,
    EXIT_USAGE,
    MARKER,
    ReplayError,
    discover,
    estimate,
    is_check_cell,
    load_class_file,
    main,
    plan_replay,
    prepare_output,
)

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
SAMPLE = REPO / "classes" / "sample.yaml"


# --- the usage log (the one change in companion/models/backends.py) ----------------------------------------------------------


def test_make_model_logs_usage_only_when_asked(tmp_path, monkeypatch):
    monkeypatch.delenv(USAGE_LOG_ENV, raising=False)
    assert type(backends.make_model("offline")) is OfflineModel, "without $WORKBOOK_USAGE_LOG nothing changes"

    log = tmp_path / "usage.jsonl"
    monkeypatch.setenv(USAGE_LOG_ENV, str(log))
    monkeypatch.setenv(USAGE_LABEL_ENV, "probe")
    model = backends.make_model("offline")
    assert isinstance(model, OfflineModel) and type(model).__name__ == "OfflineModel", "the model keeps its class"
    assert backends.describe(model).startswith("OfflineModel"), "and its description"
    agent = Agent(model=model, callback_handler=None)
    agent("My name is Ada.")
    agent("What is my name?")
    records = read_usage(log)
    reported = [invocation.usage for invocation in agent.event_loop_metrics.agent_invocations]
    assert [(r["notebook"], r["kind"], r["model"]) for r in records] == [("probe", "turn", "OfflineModel")] * 2
    assert [r["input"] for r in records] == [u["inputTokens"] for u in reported], "the tokens the model reported, per call"
    assert [r["output"] for r in records] == [u["outputTokens"] for u in reported]


def test_usage_log_leaves_anything_but_a_model_alone(tmp_path):
    stand_in = object()
    assert log_usage(stand_in, tmp_path / "u.jsonl") is stand_in
    model = log_usage(log_usage(OfflineModel(), tmp_path / "u.jsonl"), tmp_path / "u.jsonl")
    assert type(model).__mro__[1] is OfflineModel, "logging twice does not stack two loggers"


# --- planning: class file, selection, output folder -------------------------------------------------------------------


def write_class(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "class.yaml"
    path.write_text(text)
    return path


def test_sample_class_file_plans_every_notebook_it_finds():
    class_file = load_class_file(SAMPLE)
    plans, notes = plan_replay([], class_file, "offline")
    assert [p.source for p in plans] == discover(NOTEBOOKS)
    for plan in plans:
        assert plan.parameters["backend"] == "offline"
        assert set(plan.given) <= set(plan.accepted), "only parameters the notebook declares"
        if "interactive" in plan.accepted:
            assert plan.parameters["interactive"] is False, "widgets are skipped in a headless replay"
    by_name = {p.name[:2]: p for p in plans}
    assert by_name["03"].given["window_size"] == 2 and by_name["03"].given["codename"] == "PHOENIX"
    assert "codename" not in by_name["00"].given, "a common value goes only where the notebook has that parameter"
    defaults = [p.name for p in plans if not set(p.given) - {"interactive"}]
    assert not defaults, f"the series replay is each notebook's run with other parameters: none for {defaults}"


def test_class_file_mistakes_are_refused_with_the_reason(tmp_path):
    with pytest.raises(ReplayError, match="03_sliding_window has no parameter 'window'; its parameters are: backend"):
        plan_replay(["03"], load_class_file(write_class(tmp_path, 'notebooks:\n  "03": {window: 8}\n')), "offline")
    with pytest.raises(ReplayError, match="unknown key"):
        load_class_file(write_class(tmp_path, "learner: 3\n"))
    with pytest.raises(ReplayError, match="No notebook matches '42'"):
        plan_replay(["42"], load_class_file(None), "offline")
    plans, notes = plan_replay(["00"], load_class_file(write_class(tmp_path, 'notebooks:\n  "97": {x: 1}\n')), "offline")
    assert [p.name for p in plans] == ["00_orientation"] and "97" in notes[0], "a notebook not (yet) in the series is skipped"


def test_output_folder_is_never_someone_elses(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("keep")
    with pytest.raises(ReplayError, match="not an earlier replay"):
        prepare_output(precious)
    assert (precious / "keep.txt").read_text() == "keep"
    with pytest.raises(ReplayError, match="folder of its own"):
        prepare_output(NOTEBOOKS / "out")
    out = prepare_output(tmp_path / "out")
    (out / "old.ipynb").write_text("{}")
    assert (prepare_output(out) / MARKER).is_file() and not (out / "old.ipynb").exists(), "an earlier replay is replaced"


def test_output_folder_links_are_followed_before_the_guard(tmp_path):
    """A symlink anywhere in --out is resolved first: a link to notebooks/ (or its parent) cannot lead a replay there."""
    (tmp_path / "to-notebooks").symlink_to(NOTEBOOKS)
    (tmp_path / "to-repo").symlink_to(REPO)
    for out in (tmp_path / "to-notebooks" / "replay-here", tmp_path / "to-repo" / "notebooks" / "x", tmp_path / "to-repo"):
        with pytest.raises(ReplayError, match=r"folder of its own|not a plain folder"):
            prepare_output(out)
    with pytest.raises(ReplayError, match=re.escape(f"(really {NOTEBOOKS / 'replay-here'})")):
        prepare_output(tmp_path / "to-notebooks" / "replay-here")
    assert not (NOTEBOOKS / "replay-here").exists() and not (NOTEBOOKS / "x").exists(), "nothing was created in notebooks/"
    (tmp_path / "real").mkdir()
    (tmp_path / "to-real").symlink_to(tmp_path / "real")
    assert prepare_output(tmp_path / "to-real" / "out") == tmp_path / "real" / "out", "a link elsewhere is followed, not refused"


def test_output_folder_is_never_a_workspace(workspace_root, monkeypatch):
    """A replay replaces its output folder on the next run, so a learner's workspace can never be one: the repository's
    workspace/, $WORKBOOK_WORKSPACE_ROOT, anything inside them or around them."""
    from companion.support.workspace import REPOSITORY_WORKSPACE

    learner_file = workspace_root / "01_restart_test" / "notes.txt"
    learner_file.parent.mkdir()
    learner_file.write_text("mine")
    for out in (REPOSITORY_WORKSPACE, REPOSITORY_WORKSPACE / "replay", workspace_root, workspace_root / "replay",
                workspace_root.parent):
        with pytest.raises(ReplayError, match="folder of its own"):
            prepare_output(out)
    assert learner_file.read_text() == "mine" and not (workspace_root / "replay").exists()
    monkeypatch.chdir(REPO)
    counts = workspace_root.parent / "summary.json"  # with --dry-run --counts nothing would run even if it were accepted
    counts.write_text(json.dumps({"backend": "offline", "rows": [
        {"notebook": "00_orientation", "status": "passed", "model calls": 1, "tokens sent": 2, "tokens received": 3}]}))
    for out in ("workspace", "workspace/replay"):
        assert main(["00", "--out", out, "--dry-run", "--counts", str(counts)]) == EXIT_USAGE, f"`--out {out}`"


def write_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_bad_input_gets_a_message_naming_it_and_exit_2(tmp_path, capsys):
    """Each of these ended in a traceback (exit 1) or was accepted silently; now one line naming the file or option,
    exit status 2, and nothing run or written."""
    good = {"notebook": "00_orientation", "status": "passed", "model calls": 1, "tokens sent": 2, "tokens received": 3}
    counts = {
        "missing": (tmp_path / "nonexistent.json", "not found"),
        "folder": (tmp_path, "cannot be read"),
        "not JSON": (write_bytes(tmp_path / "a.json", b"{rows"), "is not JSON"),
        "a list": (write_bytes(tmp_path / "b.json", b"[]"), "is not a replay summary"),
        "rows a mapping": (write_bytes(tmp_path / "c.json", b'{"backend": "offline", "rows": {"a": 1}}'), "is not a replay summary"),
        "a row without counts": (write_bytes(tmp_path / "d.json", json.dumps(
            {"backend": "offline", "rows": [good, {"notebook": "01_restart_test", "status": "passed"}]}).encode()),
            "row 2 has no valid 'model calls', 'tokens sent', 'tokens received'"),
        "a row not a mapping": (write_bytes(tmp_path / "e.json", b'{"backend": "offline", "rows": ["00_orientation"]}'),
                                "row 1 has no valid 'notebook'"),
        "not UTF-8": (write_bytes(tmp_path / "f.json", b'{"backend": "\xff"}'), "is not UTF-8"),
    }
    for case, (path, expected) in counts.items():
        status = main(["00", "--dry-run", "--counts", str(path), "--out", str(tmp_path / "out"), "--no-progress"])
        error = capsys.readouterr().err
        assert status == EXIT_USAGE, (case, error)
        assert f"Counts file {path}" in error and expected in error and "Traceback" not in error, (case, error)
    latin1 = write_bytes(tmp_path / "class.yaml", "class: caf\u00e9\n".encode("latin-1"))
    assert main(["00", "--class", str(latin1), "--out", str(tmp_path / "out")]) == EXIT_USAGE
    assert f"Class file {latin1} is not UTF-8" in capsys.readouterr().err
    for out in ("/proc/x", str(latin1 / "sub")):
        assert main(["00", "--defaults", "--out", out, "--no-progress"]) == EXIT_USAGE, out
        error = capsys.readouterr().err
        assert f"The output folder {out} cannot be created" in error, error
    for timeout in ("0", "-5"):
        with pytest.raises(SystemExit) as refused:
            main(["00", "--timeout", timeout, "--out", str(tmp_path / "out")])
        assert refused.value.code == EXIT_USAGE and "--timeout must be 1 second or more" in capsys.readouterr().err
    assert not (tmp_path / "out").exists(), "nothing was written"


def test_check_cells_and_estimate_arithmetic():
    assert is_check_cell('x = 1\nassert x == 1, "one"\nprint("All checks passed.")')
    assert not is_check_cell("print('no asserts here')  # assert-free")
    e = estimate({"calls": 10, "input": 100_000, "output": 10_000}, learners=30)
    assert e["dollars"] == pytest.approx(100 * 0.0008 + 10 * 0.0032)
    assert e["class dollars"] == pytest.approx(30 * e["dollars"])


# --- replays (subprocesses, real kernels) -----------------------------------------------------------------------------


# The series replay itself is tests/conftest.py's `series_replay` fixture (session scope): the exercise tests read
# some of its notebooks too (notebook_runs.replayed).


def test_series_replay_with_the_sample_class_passes(series_replay):
    out, result, before, connections = series_replay
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the local Converse endpoint on 127.0.0.1" in result.stdout and "voice paraphrase" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["backend"], summary["bedrock endpoint"], summary["voice"]) == ("bedrock", "local", "paraphrase")
    hosts = {line.split()[1] for line in connections.read_text().splitlines()}
    assert hosts and hosts <= {"127.0.0.1", "unix-socket"}, f"only loopback is contacted: {hosts}"
    rows = {r["notebook"]: r for r in summary["rows"]}
    names = [p.stem for p in discover(NOTEBOOKS)]
    assert list(rows) == [*names, "total"] and summary["failures"] == []
    for name in names:
        assert (out / f"{name}.ipynb").is_file(), "the executed notebook is in the output folder"
        assert rows[name]["status"] == "passed" and rows[name]["check cells passed"] >= 1
        assert rows[name]["check cells failed"] == 0 and rows[name]["claims failed"] == 0
        assert rows[name]["claims held"] >= 2 and rows[name]["claims"].startswith(f"{rows[name]['claims held']}/")
    assert rows["total"]["tokens sent"] == sum(rows[n]["tokens sent"] for n in names) > 0
    usage = [json.loads(line) for line in (out / "usage.jsonl").read_text().splitlines()]
    assert len(usage) == rows["total"]["model calls"], "the summary counts every logged call"
    assert rows["01_restart_test"]["model calls"] >= 2, "calls made in the restart test's child processes are counted"
    executed = nbformat.read(out / "03_sliding_window.ipynb", as_version=4)
    injected = next(c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", []))
    assert "window_size = 2" in injected.source and "interactive = False" in injected.source
    assert "03_sliding_window.ipynb" in (out / "summary.html").read_text(), "the HTML summary links the notebooks"
    assert f"No claim failed: {rows['total']['claims']} in {len(names)} notebook(s)." in result.stdout
    assert "tokens sent" in result.stdout
    changed = sorted(name for name, digest in digests(discover(NOTEBOOKS)).items() if before.get(name) != digest)
    assert not changed, f"the committed notebooks were only read (changed during the replay: {changed})"


# What each notebook prints because of the sample class's parameters (the suite's run of every notebook with other
# parameters than its defaults: these were once a papermill run each). Texts the offline model's words do not change.
BECAUSE_OF_THE_PARAMETERS = {
    "00_orientation": "My name is Ada and my favorite number is 1815.",
    "01_restart_test": "restored by each writer: [2, 4, 6, 8]",
    "02_agent_json_anatomy": "'plan': 'team'",
    "03_sliding_window": "not checked: 2 turns, fewer than w/2 + 2 = 3",
    "04_state_manifest": "appended  manifests after 2 invocations: 2",
    "05_summarization": "threshold: 0.01 × 300,000 = 3,000 tokens",
    "06_vector_recall": "message_0.json (user): 'Which day suits them for pushing to production?'",
    "07_cost_of_remembering": "not checked: a window of 58 never fills in 30 turns",
    "08_what_to_remember": "20 turns for lin, 5 for sam",
    "09_forgetting_on_purpose": "lin forgets the phone number '555-0142'; sam's is '555-0199'",
    "10_what_a_delete_leaves_behind": "ada's phone number '555-0142' is in the five stores of stores/",
    "11_memory_you_can_trust": re.compile(r"The user's work email is ada@example\.com\.\s+ada\s+100%\s+-\s+allow"),
    "12_sessions_at_scale": "10 messages for 5 turns",
    "13_episodes": "episodes recalled at cosine >= 0.7, up to 2 a call",
    "14_procedures": "in the store file: False; grace answers 'yes'",
    "15_consolidation": "chosen on the tuning pairs: 0.786 | used: 0.7",
}


def test_each_notebook_shows_the_class_parameters(series_replay):
    out, result, _, _ = series_replay
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(BECAUSE_OF_THE_PARAMETERS) == [p.stem for p in discover(NOTEBOOKS)]
    for name, expected in BECAUSE_OF_THE_PARAMETERS.items():
        executed = nbformat.read(out / f"{name}.ipynb", as_version=4)
        text = printed(executed, plain=True) + ledger_text(executed)
        found = expected.search(text) if isinstance(expected, re.Pattern) else expected in text
        assert found, f"{name}: the replay did not show {expected!r}"
    written = sorted(p.name for p in (out / "workspace").iterdir())
    assert written == sorted(workspaces_of(out)), "each notebook wrote in its own workspace and nowhere else"


def workspaces_of(out: Path) -> list[str]:
    """The workspace each executed notebook of a replay used (its `workspace` parameter, default or given)."""
    names = []
    for path in sorted(out.glob("[0-9][0-9]_*.ipynb")):
        executed = nbformat.read(path, as_version=4)
        source = "\n".join(c.source for c in executed.cells if c.cell_type == "code"
                           and {"parameters", "injected-parameters"} & set(c.metadata.get("tags", [])))
        names.append(re.findall(r"^workspace(?::\s*str)?\s*=\s*\(?\s*[\"']([^\"']+)", source, re.MULTILINE)[-1])
    return names


def test_bedrock_replay_shows_the_estimate_and_asks_first(series_replay, tmp_path, fake_aws):
    out, _, _, _ = series_replay
    total = json.loads((out / "summary.json").read_text())["rows"][-1]
    result = replay_command("--backend", "bedrock", "--counts", str(out / "summary.json"), "--out", str(tmp_path / "b"),
                            "--learners", "30", input="n\n")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"sends {total['model calls']:,} model calls with {total['tokens sent']:,} input tokens" in result.stdout
    expected = estimate({"calls": total["model calls"], "input": total["tokens sent"], "output": total["tokens received"]}, 30)
    assert f"${expected['class dollars']:.2f}" in result.stdout and "2026-09-01" in result.stdout
    assert "Nothing was sent." in result.stdout and not (tmp_path / "b").exists()


def probe_notebook(path: Path) -> None:
    """A notebook of the series' shape whose check fails for a large `threshold`."""
    parameters = nbformat.v4.new_code_cell('threshold = 0.5  # a fraction the check expects to stay below 1 when doubled')
    parameters.metadata["tags"] = ["parameters"]
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# 98 · Probe"),
        parameters,
        nbformat.v4.new_code_cell("doubled = threshold * 2\nprint(doubled)"),
        nbformat.v4.new_markdown_cell("## Check yourself"),
        nbformat.v4.new_code_cell('assert doubled <= 1, "doubled stays a fraction"\nprint("All checks passed.")'),
    ])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, path)


def test_a_failed_claim_is_named_by_its_id_and_words(tmp_path):
    from companion.replay import read_claims, summarize
    from companion.support.ledger import Ledger

    ledger = Ledger(claims={"C1": "the fact is gone from turn 5", "S1": "a window of w holds w/2 turns"})
    ledger.check("C1", "turn 5's call lacks turn 1", evidence="it had it", holds=False)
    ledger.check("S1", "at most w + 1 messages a call", evidence="[1, 3, 5, 7]", holds=True)
    ledger.skip("S1", "the default window", reason="another backend")
    executed = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("ledger.report()")])
    executed.cells[0].outputs = [nbformat.v4.new_output("display_data", data={"text/plain": repr(ledger)})]
    claims = read_claims(executed)
    assert (claims["held"], claims["failed"], claims["not_checked"]) == (1, 1, 0)
    assert claims["failures"] == [{"claim": "C1", "words": "the fact is gone from turn 5",
                                   "checks": ["turn 5's call lacks turn 1"]}]
    nbformat.write(executed, tmp_path / "97_probe.ipynb")
    plan = type("Plan", (), {"name": "97_probe", "source": tmp_path / "97_probe.ipynb", "given": {}})()
    rows, failures = summarize([plan], {"97_probe": {"seconds": 1.0, "error": None}}, tmp_path)
    assert rows[0]["claims"] == "1/2 hold"
    assert failures == ["97_probe: claim C1 fails: the fact is gone from turn 5 (failing: turn 5's call lacks turn 1)"]


def test_a_broken_check_is_named_and_fails_the_run(tmp_path):
    """Three notebooks in one replay: a probe that passes, the same probe with a value that breaks its check, and
    notebook 03 with a value its setup refuses (it stops there: no series notebook runs in full here)."""
    probe, passing = tmp_path / "98_probe.ipynb", tmp_path / "97_probe.ipynb"
    probe_notebook(probe)
    probe_notebook(passing)
    class_file = write_class(tmp_path, 'class: broken\nnotebooks:\n  "98": {threshold: 0.8}\n  "97": {threshold: 0.4}\n'
                                       '  "03": {window_size: 5}\n')
    before = digests([NOTEBOOKS / "03_sliding_window.ipynb", probe, passing])
    result = replay_command(str(passing), "03", str(probe), "--class", str(class_file), "--out", str(tmp_path / "out"))
    assert result.returncode == 1, result.stdout + result.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    rows = {r["notebook"]: r for r in summary["rows"]}
    assert rows["97_probe"]["status"] == "passed"
    assert rows["98_probe"]["status"] == "check failed" and rows["98_probe"]["check cells failed"] == 1
    assert rows["03_sliding_window"]["status"] == "error", "a refused parameter stops the notebook in its setup"
    assert "98_probe: cell 5 (check cell" in result.stderr and "AssertionError: doubled stays a fraction" in result.stderr
    assert "03_sliding_window: cell" in result.stderr and "window_size must be an even number" in result.stderr
    assert "97_probe" not in result.stderr
    assert digests([NOTEBOOKS / "03_sliding_window.ipynb", probe, passing]) == before


def kernels_of(out: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if "ipykernel_launcher" in " ".join(process.info["cmdline"] or []) and \
                    process.environ().get("WORKBOOK_USAGE_LOG", "").startswith(str(out)):
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def interruptible() -> None:
    """In the replay's process, Ctrl-C as a terminal gives it: a test run from a background job (nohup ... &, as a CI
    script may be) inherits SIGINT ignored, and Python then never raises KeyboardInterrupt, so the replay ran on."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def kernels_under(pid: int) -> list[psutil.Process]:
    """The kernels a running replay started (its workers' children): found by descent, not by reading every process's
    environment, which on a loaded CI machine once found them only after the notebooks had finished."""
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if "ipykernel_launcher" in " ".join(p.cmdline())]
    except psutil.NoSuchProcess:
        return []


def test_interrupting_a_replay_leaves_the_committed_notebooks_untouched(tmp_path):
    # 12 runs for most of a minute on any machine: the signal always lands while a kernel is executing cells (with 07,
    # which takes 10 s on an idle machine, a busy CI machine once saw both notebooks finish before the signal)
    chosen = [NOTEBOOKS / "01_restart_test.ipynb", NOTEBOOKS / "12_sessions_at_scale.ipynb"]
    before = digests(chosen)
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "companion.replay", "--no-progress", "01", "12", "--class", str(SAMPLE), "--out", str(out)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None and not kernels_under(process.pid):
        time.sleep(0.3)  # wait until a kernel is executing cells
    assert kernels_under(process.pid), "a kernel started"
    time.sleep(1)
    assert process.poll() is None, "the replay is still running when the signal is sent"
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stdout + stderr
    assert "Interrupted" in stderr and "never written" in stderr
    assert digests(chosen) == before, "the committed notebooks are byte for byte the same"
    assert list(out.glob("*.ipynb")), "the partial outputs are in the output folder"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and kernels_of(out):
        time.sleep(0.5)
    assert not kernels_of(out), "no kernel outlives the replay"


def test_sigterm_to_the_replay_stops_its_workers_and_kernels(tmp_path):
    """SIGTERM (a closed terminal, `kill`, a CI job cancelled) is handled like Ctrl-C: exit status 143 and no worker
    or kernel left behind (before, the leader died at once and left both running)."""
    # 12 runs for most of a minute on any machine: the signal always lands while a kernel is executing cells (with 07,
    # which takes 10 s on an idle machine, a busy CI machine once saw both notebooks finish before the signal)
    chosen = [NOTEBOOKS / "01_restart_test.ipynb", NOTEBOOKS / "12_sessions_at_scale.ipynb"]
    before = digests(chosen)
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "companion.replay", "--no-progress", "01", "12", "--class", str(SAMPLE), "--out", str(out)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None and not kernels_under(process.pid):
        time.sleep(0.3)
    kernels = kernels_under(process.pid)
    assert kernels, "a kernel started"
    time.sleep(2)
    started = psutil.Process(process.pid).children(recursive=True)  # the workers, their kernels (and helpers)
    workers = [p for p in started if "multiprocessing" in " ".join(p.cmdline())]
    assert workers, f"the replay's workers are running: {[p.cmdline() for p in started]}"
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=180)  # generous: a loaded CI machine stops kernels slowly
    assert process.returncode == EXIT_TERMINATED == 143, stdout + stderr
    assert "Terminated (SIGTERM)" in stderr and "never written" in stderr and "Traceback" not in stderr, stderr
    assert digests(chosen) == before
    _, alive = psutil.wait_procs(started, timeout=60)
    assert alive == [], f"left running after SIGTERM: {[p.cmdline()[:4] for p in alive]}"
    assert not kernels_of(out), "no kernel outlives the replay"


# Issue 31: YAML aliases and lone surrogates in class files (items 9, 12), bounded messages, one replay per --out (5).

BOMB = """class: bomb
common:
  l0: &l0 "xxxxxxxxxxxxxxxxxxxx"
  l1: &l1 [*l0, *l0, *l0, *l0, *l0, *l0, *l0, *l0, *l0, *l0]
  l2: &l2 [*l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1]
  l3: &l3 [*l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2]
  l4: &l4 [*l3, *l3, *l3, *l3, *l3, *l3, *l3, *l3, *l3, *l3]
notebooks:
  "03": {codename: *l4}
"""


def test_a_yaml_alias_in_a_class_file_is_refused_with_one_message(tmp_path, capsys):
    """Before the fix the aliases were accepted: a 278-byte class file expanded to 42 MB of output when papermill
    wrote the parameters (and a 3.85 MB error message)."""
    bomb = write_class(tmp_path, BOMB)
    with pytest.raises(ReplayError, match=r"anchor &l0 at line 3: anchors and aliases are not accepted") as raised:
        load_class_file(bomb)
    assert len(str(raised.value)) < 400
    small = write_class(tmp_path, 'common:\n  codename: &c PHOENIX\nnotebooks:\n  "03": {codename: *c}\n')
    with pytest.raises(ReplayError, match=r"anchor &c at line 2"):
        load_class_file(small)
    alias_only = write_class(tmp_path, 'common:\n  codename: *c\n')  # an alias of nothing: still named
    with pytest.raises(ReplayError, match=r"alias \*c at line 2|not valid YAML"):
        load_class_file(alias_only)
    assert main(["03", "--class", str(bomb), "--out", str(tmp_path / "out"), "--no-progress"]) == EXIT_USAGE
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "anchors and aliases are not accepted" in error and len(error) < 400
    assert not (tmp_path / "out").exists()


def test_a_lone_surrogate_in_a_class_file_is_refused_before_any_notebook_runs(tmp_path, capsys):
    """Before the fix papermill failed to write the notebook ("Notebook does not appear to be JSON", a 0-byte file)."""
    class_file = write_class(tmp_path, 'notebooks:\n  "03": {codename: "PHO\\udc80ENIX"}\n')
    with pytest.raises(ReplayError, match=r"notebooks\.03\.codename.*lone surrogate.*U\+DC80"):
        load_class_file(class_file)
    assert main(["03", "--class", str(class_file), "--out", str(tmp_path / "out"), "--no-progress"]) == EXIT_USAGE
    assert "lone surrogate" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_a_class_file_message_quotes_at_most_200_characters_of_a_value(tmp_path):
    for text in (f"class: {'A' * 1_000_000}\n", f"backend: {'b' * 1_000_000}\n", f"learners: {'9x' * 500_000}\n"):
        with pytest.raises(ReplayError) as raised:
            load_class_file(write_class(tmp_path, text))
        assert len(str(raised.value)) < 600 and "more characters" in str(raised.value)


def barrier_notebook(path: Path) -> None:
    """A notebook that says it started, then waits until the test lets it finish."""
    parameters = nbformat.v4.new_code_cell('barrier = ""  # a file: the notebook waits until it exists')
    parameters.metadata["tags"] = ["parameters"]
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# 97 · Barrier"), parameters,
        nbformat.v4.new_code_cell("import pathlib, time\npathlib.Path(barrier + '.started').touch()\n"
                                  "while not pathlib.Path(barrier).exists():\n    time.sleep(0.1)"),
        nbformat.v4.new_code_cell('assert pathlib.Path(barrier).exists()\nprint("All checks passed.")'),
    ])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, path)


def test_a_second_replay_into_the_same_folder_refuses_at_once_naming_the_first(tmp_path):
    """Before the fix the second replay emptied the folder under the first: the first exited 1 with its notebooks
    "failed", the second reported success with doubled calls in summary.json."""
    probe, barrier, out = tmp_path / "97_barrier.ipynb", tmp_path / "go", tmp_path / "out"
    barrier_notebook(probe)
    class_file = write_class(tmp_path, f'class: lock\nnotebooks:\n  "97": {{barrier: "{barrier}"}}\n')
    command = [sys.executable, "-m", "companion.replay", "--no-progress", str(probe), "--class", str(class_file),
               "--out", str(out)]
    first = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not Path(f"{barrier}.started").exists() and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.2)
        assert Path(f"{barrier}.started").exists(), "the first replay's notebook is running"
        started = time.monotonic()
        second = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert second.returncode == EXIT_USAGE, second.stdout + second.stderr
        assert f"in use by another replay (process {first.pid})" in second.stderr, second.stderr
        assert time.monotonic() - started < 60, "refused at once, not after a replay"
    finally:
        barrier.touch()
        output, errors = first.communicate(timeout=300)
    assert first.returncode == 0, output + errors
    summary = json.loads((out / "summary.json").read_text())
    assert [r["notebook"] for r in summary["rows"]] == ["97_barrier", "total"]
    assert summary["rows"][0]["status"] == "passed"
    again = replay_command(str(probe), "--class", str(class_file), "--out", str(out))  # the lock is released
    assert again.returncode == 0, again.stdout + again.stderr
