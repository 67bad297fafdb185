"""Companion package of the agent-memory workbook: the offline model and the plumbing the notebooks share."""

import os

# No onnxruntime telemetry from any entry point that imports the companion (kernel, papermill, the evaluation command,
# benchmarks, the restart-test subprocesses): it must be set before onnxruntime loads. See companion/embeddings.py.
os.environ["ORT_DISABLE_TELEMETRY"] = "1"

from .backends import BACKENDS, BackendError, describe, make_model  # noqa: E402
from .offline_model import OfflineModel  # noqa: E402
from .workspace import check_session_id, reset_workspace, workspace_root  # noqa: E402

__all__ = [
    "BACKENDS",
    "BackendError",
    "OfflineModel",
    "check_session_id",
    "describe",
    "make_model",
    "reset_workspace",
    "workspace_root",
]
