"""Companion package of the agent-memory workbook: the offline model and the plumbing the notebooks share."""

import os
import sys

# No onnxruntime telemetry from any entry point that imports the companion (kernel, papermill, the evaluation command,
# benchmarks, the restart-test subprocesses): it must be set before onnxruntime loads. See companion/models/embeddings.py.
os.environ["ORT_DISABLE_TELEMETRY"] = "1"

# Importing strands loads jsonschema, which builds a Lark grammar for its optional "iri" format checker at import time
# (about 1.1 s of a 1.6 s import on 2 cores). Nothing here validates "iri" formats, and jsonschema skips that checker
# when the module is missing, so every process that imports the companion first (the restart-test and two-writer
# subprocesses of notebook 01, the replay workers) starts a second faster. Kernels that import strands first are unchanged.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

from companion.models.backends import BACKENDS, BackendError, describe, make_model  # noqa: E402
from companion.models.offline_model import OfflineModel  # noqa: E402
from companion.support.workspace import check_session_id, reset_workspace, workspace_root  # noqa: E402

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
