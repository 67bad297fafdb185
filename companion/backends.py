"""Choosing the model behind a notebook: the offline model by default, Amazon Bedrock by one parameter."""

from __future__ import annotations

import os
from typing import Any

from strands.models import Model

from .offline_model import NOVA_PRO_CONTEXT_WINDOW, OfflineModel

BACKENDS = ("offline", "bedrock")
BACKEND_ENV = "WORKBOOK_BACKEND"
DEFAULT_BEDROCK_MODEL_ID = "amazon.nova-pro-v1:0"
DEFAULT_REGION = "us-east-1"


class BackendError(RuntimeError):
    """A backend that cannot be built here; the message says what to configure instead."""


def resolve_backend(backend: str | None = None) -> str:
    """The backend name to use: the argument, else $WORKBOOK_BACKEND, else "offline"."""
    name = (backend or os.environ.get(BACKEND_ENV) or "offline").strip().lower()
    if name not in BACKENDS:
        raise ValueError(f"Unknown model backend {name!r}. Choose one of: {', '.join(BACKENDS)}.")
    return name


def make_model(
    backend: str | None = None,
    *,
    model_id: str | None = None,
    region: str | None = None,
    context_window_limit: int = NOVA_PRO_CONTEXT_WINDOW,
    **settings: Any,
) -> Model:
    """Build the model a notebook runs on.

    Args:
        backend: "offline" or "bedrock"; None reads $WORKBOOK_BACKEND and falls back to "offline".
        model_id: Bedrock model id (default amazon.nova-pro-v1:0, or $WORKBOOK_MODEL_ID).
        region: AWS region for Bedrock (default $AWS_REGION, else us-east-1).
        context_window_limit: The window that proactive-compression ratios are measured against.
        **settings: Further settings for the chosen model (e.g. overflow_at_tokens for the offline model).
    """
    name = resolve_backend(backend)
    if name == "offline":
        return OfflineModel(context_window_limit=context_window_limit, **settings)
    return _bedrock_model(model_id, region, context_window_limit, settings)


def _bedrock_model(model_id: str | None, region: str | None, context_window_limit: int, settings: dict) -> Model:
    """Strands' BedrockModel, refusing at once when no AWS credentials are configured."""
    import boto3
    from botocore.config import Config
    from strands.models import BedrockModel

    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
    model_id = model_id or os.environ.get("WORKBOOK_MODEL_ID") or DEFAULT_BEDROCK_MODEL_ID
    session = boto3.Session(region_name=region)
    has_api_key = bool(os.environ.get("AWS_BEARER_TOKEN_BEDROCK"))
    if not has_api_key and session.get_credentials() is None:
        raise BackendError(
            "The bedrock backend needs AWS credentials, and none were found. Configure them with "
            "`aws configure` (or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or an AWS_BEARER_TOKEN_BEDROCK "
            f"Bedrock API key), make sure {model_id} is enabled for your account in {region}, "
            "or run the notebook with backend='offline'."
        )
    client_config = Config(connect_timeout=5, read_timeout=120, retries={"max_attempts": 2, "mode": "standard"})
    return BedrockModel(
        boto_session=session,
        boto_client_config=client_config,
        model_id=model_id,
        context_window_limit=context_window_limit,
        **settings,
    )


def describe(model: Model) -> str:
    """One line naming the model and its context window, for a notebook's setup cell."""
    config = model.get_config()
    return f"{type(model).__name__} {config.get('model_id')} (context window {model.context_window_limit:,} tokens)"
