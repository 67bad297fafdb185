"""Counting what a whole run sends to the model, across kernels and subprocesses: the meter behind `companion.replay`.

`make_model` calls `log_usage` when $WORKBOOK_USAGE_LOG names a file (the replay command sets it for every notebook it
runs; nothing else does). Every call the model answers then appends one JSON line to that file: the notebook
($WORKBOOK_USAGE_LABEL), the process, the model class, the kind of call ("turn" or "summary") and the input and output
tokens the model reported. Appending from several processes at once is safe: each record is one short `write` to a
file opened for appending.

Unlike `companion.models.metering.MeteredModel`, which wraps a model in another object, `log_usage` keeps the model's own
class (it swaps in a subclass of the same name whose `stream` also records), so `isinstance(model, OfflineModel)`,
`describe(model)` and every attribute a notebook reads behave exactly as without the log: a replayed notebook runs the
code a learner runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterable
from functools import cache
from pathlib import Path
from typing import Any

from strands.models import Model

from companion.support.messages import is_summary_request

USAGE_LOG_ENV = "WORKBOOK_USAGE_LOG"
USAGE_LABEL_ENV = "WORKBOOK_USAGE_LABEL"


def log_usage(model: Model, path: str | os.PathLike[str], label: str | None = None) -> Model:
    """Make `model` append each call's reported usage to the JSON-lines file `path`; returns the same object.

    Anything that is not a Strands model (a stand-in a notebook patched in, e.g. notebook 00's recorder) is returned
    untouched: the log never changes what a notebook does."""
    if not isinstance(model, Model):
        return model
    model.__class__ = _logging_class(type(model))
    model._usage_log = (Path(path), label if label is not None else os.environ.get(USAGE_LABEL_ENV, ""))  # type: ignore[attr-defined]
    return model


def read_usage(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a usage file (an absent file holds none)."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def totals(records: list[dict[str, Any]]) -> dict[str, int]:
    """Calls, input tokens and output tokens of some usage records."""
    return {
        "calls": len(records),
        "input": sum(r["input"] for r in records),
        "output": sum(r["output"] for r in records),
    }


@cache
def _logging_class(cls: type) -> type:
    if getattr(cls, "_logs_usage", False):
        return cls

    class UsageLogged(cls):  # type: ignore[misc, valid-type]
        _logs_usage = True

        async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncIterable[Any]:  # type: ignore[override]
            kind = "summary" if is_summary_request(messages) else "turn"
            async for event in super().stream(messages, *args, **kwargs):
                usage = event.get("metadata", {}).get("usage") if isinstance(event, dict) else None
                if usage:
                    _append(self, kind, usage)
                yield event

    UsageLogged.__name__, UsageLogged.__qualname__, UsageLogged.__module__ = cls.__name__, cls.__qualname__, cls.__module__
    return UsageLogged


def _append(model: Any, kind: str, usage: dict[str, Any]) -> None:
    path, label = model._usage_log
    record = {
        "notebook": label,
        "pid": os.getpid(),
        "model": type(model).__name__,
        "kind": kind,
        "input": int(usage.get("inputTokens", 0)),
        "output": int(usage.get("outputTokens", 0)),
    }
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(record) + "\n")
