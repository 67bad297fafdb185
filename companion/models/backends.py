"""Choosing the model behind a notebook: the offline model by default, Amazon Bedrock by one parameter."""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

from strands.models import Model

from companion.models.converse_rules import NOVA_PRO_CONTEXT_WINDOW

BACKENDS = ("offline", "bedrock")
BACKEND_ENV = "WORKBOOK_BACKEND"
DEFAULT_BEDROCK_MODEL_ID = "amazon.nova-pro-v1:0"
DEFAULT_REGION = "us-east-1"  # the same default as companion/models/aws.py
BEDROCK_ENDPOINT_ENV = "WORKBOOK_BEDROCK_ENDPOINT"
BEDROCK_ENDPOINTS = ("aws", "local")


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
    endpoint_url: str | None = None,
    bedrock_endpoint: str | None = None,
    **settings: Any,
) -> Model:
    """Build the model a notebook runs on.

    Args:
        backend: "offline" or "bedrock"; None reads $WORKBOOK_BACKEND and falls back to "offline".
        model_id: Bedrock model id (default amazon.nova-pro-v1:0, or $WORKBOOK_MODEL_ID).
        region: AWS region for Bedrock (default $AWS_REGION, else us-east-1).
        context_window_limit: The window that proactive-compression ratios are measured against.
        endpoint_url: A Bedrock endpoint to use instead of the region's (a VPC endpoint); else
            $AWS_ENDPOINT_URL_BEDROCK_RUNTIME, else the region's.
        bedrock_endpoint: "local" (or $WORKBOOK_BEDROCK_ENDPOINT=local) runs the Bedrock backend against this
            process's local Converse endpoint (companion/models/bedrock_local.py: 127.0.0.1, the offline model behind it,
            fake credentials, nothing paid); "aws" or None: the real one.
        **settings: Further settings for the chosen model (e.g. overflow_at_tokens for the offline model).
    """
    name = resolve_backend(backend)
    if name == "offline":
        from companion.models.offline_model import OfflineModel  # imported here: the offline model reads its limit from this module

        model: Model = OfflineModel(context_window_limit=context_window_limit, **settings)
    elif resolve_bedrock_endpoint(bedrock_endpoint) == "local":
        model = _local_bedrock_model(model_id, context_window_limit, settings)
    else:
        model = _bedrock_model(model_id, region, context_window_limit, settings, endpoint_url)
    if os.environ.get("WORKBOOK_USAGE_LOG"):  # opt-in, set by `python -m companion.replay`: see companion/models/usage_log.py
        from companion.models.usage_log import log_usage

        model = log_usage(model, os.environ["WORKBOOK_USAGE_LOG"])
    return model


def resolve_bedrock_endpoint(bedrock_endpoint: str | None = None) -> str:
    """"local" or "aws": the argument, else $WORKBOOK_BEDROCK_ENDPOINT, else "aws"."""
    name = (bedrock_endpoint or os.environ.get(BEDROCK_ENDPOINT_ENV) or "aws").strip().lower()
    if name not in BEDROCK_ENDPOINTS:
        raise ValueError(f"Unknown bedrock_endpoint {name!r}. Choose one of: {', '.join(BEDROCK_ENDPOINTS)}.")
    return name


def _local_bedrock_model(model_id: str | None, context_window_limit: int, settings: dict) -> Model:
    """BedrockModel against this process's local endpoint, with fake credentials that only that endpoint accepts:
    your own AWS credentials are never sent to it, and nothing leaves 127.0.0.1."""
    import boto3

    from companion.models import aws
    from companion.models.bedrock_local import local_bedrock

    endpoint = local_bedrock()
    session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing",  # noqa: S106
                            region_name=DEFAULT_REGION)
    return _guarded_bedrock_class()(
        boto_session=session,
        boto_client_config=aws.client_config(),
        endpoint_url=endpoint.url,
        model_id=model_id or os.environ.get("WORKBOOK_MODEL_ID") or DEFAULT_BEDROCK_MODEL_ID,
        context_window_limit=context_window_limit,
        **settings,
    )


def _bedrock_model(
    model_id: str | None, region: str | None, context_window_limit: int, settings: dict, endpoint_url: str | None = None
) -> Model:
    """Strands' BedrockModel on the workbook's AWS session (companion/models/aws.py), refusing at once without credentials.

    The client has explicit limits: connect within 5 s, each read within 12 s, 2 attempts; a stalled network fails
    the cell in about 25 s with a BackendError naming the region and endpoint, instead of hanging for minutes.
    """
    from companion.models import aws

    try:
        session = aws.session(region)
    except aws.AwsSetupError as error:
        raise BackendError(f"{error} Or run the notebook with backend='offline'.") from None
    region = aws.resolve_region(region, session)
    model_id = model_id or os.environ.get("WORKBOOK_MODEL_ID") or DEFAULT_BEDROCK_MODEL_ID
    if not aws.has_credentials(session):
        raise BackendError(
            aws.credential_help("bedrock backend", model_id, region, "run the notebook with backend='offline'")
        )
    return _guarded_bedrock_class()(
        boto_session=session,
        boto_client_config=aws.client_config(),
        endpoint_url=endpoint_url,
        model_id=model_id,
        context_window_limit=context_window_limit,
        **settings,
    )


@lru_cache(maxsize=1)
def _guarded_bedrock_class() -> type:
    """Built on first use, so the offline path never imports boto3."""
    from strands.models import BedrockModel

    from companion.models import aws

    class BedrockModelWithLimits(BedrockModel):
        """Strands' BedrockModel whose network failures say where the model is built and what to check."""

        async def stream(self, *args: Any, **kwargs: Any):  # type: ignore[override]
            try:
                async for event in super().stream(*args, **kwargs):
                    yield event
            except aws.network_errors() as error:
                raise BackendError(
                    aws.network_help(
                        error,
                        what=f"bedrock backend ({self.config.get('model_id')})",
                        region=self.client.meta.region_name,
                        endpoint=self.client.meta.endpoint_url,
                        built_in="companion/models/backends.py, make_model('bedrock') (the notebook's setup cell)",
                        offline_hint="run the notebook with backend='offline'",
                    )
                ) from error

    BedrockModelWithLimits.__name__ = BedrockModelWithLimits.__qualname__ = "BedrockModel"
    return BedrockModelWithLimits


def describe(model: Model) -> str:
    """One line naming the model and its context window, for a notebook's setup cell."""
    config = model.get_config()
    return f"{type(model).__name__} {config.get('model_id')} (context window {model.context_window_limit:,} tokens)"
