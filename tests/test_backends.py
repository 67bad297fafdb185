"""The model factory: offline by default, Bedrock by parameter, clear errors for the rest."""

from __future__ import annotations

import time

import pytest
from strands.models import BedrockModel

from companion.models.backends import BackendError, describe, make_model, resolve_backend
from companion.models.offline_model import OfflineModel


def test_offline_is_the_default(no_aws):
    model = make_model()
    assert isinstance(model, OfflineModel)
    assert model.context_window_limit == 300_000
    assert describe(model) == "OfflineModel offline-fact-reader (context window 300,000 tokens)"


def test_environment_variable_chooses_the_backend(no_aws, monkeypatch):
    monkeypatch.setenv("WORKBOOK_BACKEND", "offline")
    assert resolve_backend() == "offline"
    monkeypatch.setenv("WORKBOOK_BACKEND", "Bedrock")
    assert resolve_backend() == "bedrock"
    assert resolve_backend("offline") == "offline", "the parameter wins over the environment"


def test_unknown_backend_lists_the_choices(no_aws):
    with pytest.raises(ValueError, match=r"Unknown model backend 'gpt-9'\. Choose one of: offline, bedrock\."):
        make_model("gpt-9")


def test_offline_settings_pass_through(no_aws):
    model = make_model("offline", context_window_limit=1_000, overflow_at_tokens=500)
    assert model.get_config()["overflow_at_tokens"] == 500 and model.context_window_limit == 1_000


def test_bedrock_without_credentials_fails_fast_with_what_to_do(no_aws):
    started = time.monotonic()
    with pytest.raises(BackendError) as raised:
        make_model("bedrock")
    assert time.monotonic() - started < 5
    message = str(raised.value)
    assert "AWS credentials" in message and "aws configure" in message
    assert "amazon.nova-pro-v1:0" in message and "us-east-1" in message
    assert "backend='offline'" in message


def test_bedrock_defaults(fake_aws):
    model = make_model("bedrock")
    assert isinstance(model, BedrockModel)
    config = model.get_config()
    assert config["model_id"] == "amazon.nova-pro-v1:0"
    assert model.context_window_limit == 300_000
    assert model.client.meta.region_name == "us-east-1"
    assert model.client.meta.config.retries["total_max_attempts"] == 2  # botocore counts the first try too
    assert model.client.meta.config.connect_timeout == 5 and model.client.meta.config.read_timeout == 12


def test_bedrock_region_and_model_are_overridable(fake_aws, monkeypatch):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert make_model("bedrock").client.meta.region_name == "eu-west-1"
    model = make_model("bedrock", region="ap-southeast-2", model_id="amazon.nova-lite-v1:0", context_window_limit=128_000)
    assert model.client.meta.region_name == "ap-southeast-2"
    assert model.get_config()["model_id"] == "amazon.nova-lite-v1:0"
    assert model.context_window_limit == 128_000
    monkeypatch.setenv("WORKBOOK_MODEL_ID", "amazon.nova-micro-v1:0")
    assert make_model("bedrock").get_config()["model_id"] == "amazon.nova-micro-v1:0"


def test_bedrock_api_key_counts_as_a_credential(no_aws, monkeypatch):
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "example-api-key")
    assert isinstance(make_model("bedrock"), BedrockModel)
