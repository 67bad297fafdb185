"""The proof path: each lesson's claims ledger, decided from a record of its run.

One module per lesson, named after it (`sliding_window` for notebook 03). Each has two functions:

- `record(...) -> dict` reads the run's evidence into plain data: what the model received (a `MeteredModel`'s
  exchanges), the files in the notebook's workspace, a second method. It never reads the tables the lesson prints.
  It writes the record to the workspace as `record.json`, and returns it as read back from that file.
- `claims(record) -> Ledger` decides every check from the record alone.

The notebook's "Check yourself" cell calls both and shows the ledger. Because `claims` reads nothing but the record,
tests feed it the committed run's record (`tests/records/`, copied there by `tools/refresh_notebooks.py`) and broken
copies of it, one per check, and see each check fail (`tests/checks_harness.py`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from companion.support.messages import message_text

RECORD_NAME = "record.json"
# When set (benchmarks/suite_time.py sets it), every record saved appends a line naming the checks module and the
# process: one line per notebook run that reached "Check yourself", which is how the test suite's notebook executions
# are counted (a run stopped earlier, by a refused parameter, never gets here).
EXECUTIONS_ENV = "WORKBOOK_EXECUTIONS_LOG"


def _log_execution(module: str) -> None:
    path = os.environ.get(EXECUTIONS_ENV)
    if not path:
        return
    line = (json.dumps({"checks": module, "pid": os.getpid()}) + "\n").encode()
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line)  # one short append: lines from parallel kernels do not interleave
    finally:
        os.close(descriptor)


def save_record(record: dict[str, Any], workspace_dir: Path) -> dict[str, Any]:
    """Write `record` to the workspace as JSON and return it as read back: what `claims` sees live is what a test
    sees from the file (tuples become lists, keys strings)."""
    _log_execution(sys._getframe(1).f_globals.get("__name__", "?"))
    path = Path(workspace_dir) / RECORD_NAME
    lines = [f" {json.dumps(key)}: {json.dumps(record[key], ensure_ascii=False, sort_keys=True)}"
             for key in sorted(record)]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
    return json.loads(path.read_text(encoding="utf-8"))


def texts(messages: list[dict]) -> list[list[str]]:
    """[role, text] per message: the words of a conversation, without the SDK's bookkeeping."""
    return [[message["role"], message_text(message)] for message in messages]
