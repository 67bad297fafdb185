"""Companion package of the agent-memory workbook: the offline model and the plumbing the notebooks share."""

from .backends import BACKENDS, BackendError, describe, make_model
from .offline_model import OfflineModel
from .workspace import check_session_id, reset_workspace, workspace_root

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
