"""One AWS session for everything the workbook sends to Bedrock: the chat model and the Titan embedder.

Both get the same answers to the same questions, from here:

- Region: the argument, else $AWS_REGION, else $AWS_DEFAULT_REGION, else the profile's region, else us-east-1.
- Credentials: anything boto3 finds (`aws configure`, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, SSO, a
  role), or a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK (botocore sends it to bedrock-runtime as a bearer token).
- Time limits: connect within CONNECT_TIMEOUT s, each read within READ_TIMEOUT s, at most MAX_ATTEMPTS attempts. A
  network that accepts a connection and never answers fails in about MAX_ATTEMPTS x READ_TIMEOUT s (about 25 s), not
  in botocore's default of minutes.
"""

from __future__ import annotations

import os
from typing import Any

DEFAULT_REGION = "us-east-1"
API_KEY_ENV = "AWS_BEARER_TOKEN_BEDROCK"
CONNECT_TIMEOUT = 5  # seconds to open the connection
READ_TIMEOUT = 12  # seconds to wait for the next bytes of an answer (Bedrock streams, so bytes come early)
MAX_ATTEMPTS = 2  # the first try and one retry (botocore's "total_max_attempts")


class AwsSetupError(RuntimeError):
    """An AWS configuration that cannot work here (unknown profile, no credentials, network stalled)."""


def resolve_region(region: str | None = None, session: Any = None) -> str:
    """The region every Bedrock client of the workbook uses (see the module's rules)."""
    return (
        region
        or os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
        or (session.region_name if session is not None else None)
        or DEFAULT_REGION
    )


def session(region: str | None = None) -> Any:
    """A boto3 session for `region`; an unknown AWS_PROFILE is an AwsSetupError saying which profiles exist."""
    import boto3
    from botocore.exceptions import ProfileNotFound

    try:
        probe = boto3.Session()
        return boto3.Session(region_name=resolve_region(region, probe))
    except ProfileNotFound as error:
        profile = os.environ.get("AWS_PROFILE") or os.environ.get("AWS_DEFAULT_PROFILE") or "?"
        try:
            import botocore.session

            known = botocore.session.Session(profile=None).available_profiles
        except Exception:  # noqa: BLE001 - only to enrich the message
            known = []
        listed = ", ".join(sorted(known)) if known else "none are configured"
        raise AwsSetupError(
            f"The AWS profile {profile!r} (from AWS_PROFILE) does not exist ({error}). Profiles found: {listed}. "
            "Set AWS_PROFILE to one of them (or unset it), or run `aws configure --profile NAME`."
        ) from None


def has_credentials(boto_session: Any) -> bool:
    """True if `boto_session` has credentials, or a Bedrock API key is set (AWS_BEARER_TOKEN_BEDROCK)."""
    return bool(os.environ.get(API_KEY_ENV)) or boto_session.get_credentials() is not None


def credential_help(what: str, model_id: str, region: str, offline_hint: str) -> str:
    """The one message both backends give when no credentials were found."""
    return (
        f"The {what} needs AWS credentials, and none were found. Configure them with `aws configure` (or "
        f"AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or a Bedrock API key in {API_KEY_ENV}), make sure "
        f"{model_id} is enabled for your account in {region}, or {offline_hint}."
    )


def client_config() -> Any:
    """Botocore settings with the workbook's time limits and bounded retries."""
    from botocore.config import Config

    return Config(
        connect_timeout=CONNECT_TIMEOUT,
        read_timeout=READ_TIMEOUT,
        retries={"total_max_attempts": MAX_ATTEMPTS, "mode": "standard"},
    )


def bedrock_runtime(boto_session: Any, endpoint_url: str | None = None) -> Any:
    """A bedrock-runtime client from `boto_session` with the workbook's limits (endpoint: the argument, else
    $AWS_ENDPOINT_URL_BEDROCK_RUNTIME / $AWS_ENDPOINT_URL, else the region's)."""
    return boto_session.client("bedrock-runtime", config=client_config(), endpoint_url=endpoint_url)


def network_errors() -> tuple[type[BaseException], ...]:
    """The botocore errors of a network that does not answer (timeouts, refused or dropped connections)."""
    from botocore.exceptions import ConnectionClosedError, ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

    return (ReadTimeoutError, ConnectTimeoutError, EndpointConnectionError, ConnectionClosedError)


def network_help(error: BaseException, *, what: str, region: str, endpoint: str, built_in: str, offline_hint: str) -> str:
    """Say what stalled, where, after how long, what to check, and where the client is built."""
    return (
        f"The {what} got no answer from {endpoint} (region {region}): {type(error).__name__} after "
        f"{MAX_ATTEMPTS} attempts (connect timeout {CONNECT_TIMEOUT} s, read timeout {READ_TIMEOUT} s). Check the "
        "network (VPN, proxy or firewall: HTTPS_PROXY, a corporate network that blocks AWS), that the region is the "
        "one you meant (AWS_REGION), and any endpoint override (AWS_ENDPOINT_URL_BEDROCK_RUNTIME). The client is "
        f"built in {built_in}, with the limits of companion/models/aws.py. Or {offline_hint}."
    )
