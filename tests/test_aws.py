"""One AWS session for the chat model and the Titan embedder: same credentials, same limits, clear errors."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from strands import Agent

from companion.models import aws
from companion.models.backends import BackendError, make_model
from companion.models.embeddings import EmbeddingModelError, TitanEmbedder, make_embedder


@pytest.fixture
def stalled_endpoint():
    """A server on 127.0.0.1 that accepts every connection and never answers: a stalled network."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held, stop = [], threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    server.close()


def within(seconds: float, call):
    """Run `call` in a thread; return (exception raised, seconds taken), or fail if it is still running."""
    outcome: dict = {}

    def run():
        started = time.monotonic()
        try:
            call()
        except BaseException as error:  # noqa: BLE001
            outcome["error"] = error
        outcome["took"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert "took" in outcome, f"still waiting after {seconds} s: a stalled network hangs the cell"
    return outcome.get("error"), outcome["took"]


def chain(error: BaseException | None) -> list[BaseException]:
    found = []
    while error is not None and error not in found:
        found.append(error)
        error = error.__cause__ or error.__context__ or (error.args[0] if error.args and isinstance(error.args[0], BaseException) else None)
    return found


def test_the_limits_are_explicit_and_bounded():
    config = aws.client_config()
    assert config.connect_timeout == aws.CONNECT_TIMEOUT == 5
    assert config.read_timeout == aws.READ_TIMEOUT == 12
    assert config.retries == {"total_max_attempts": aws.MAX_ATTEMPTS, "mode": "standard"} and aws.MAX_ATTEMPTS == 2
    assert aws.MAX_ATTEMPTS * aws.READ_TIMEOUT + aws.CONNECT_TIMEOUT <= 30


@pytest.fixture
def short_limits(monkeypatch):
    """The production limits (5 s connect, 12 s read, 2 attempts: about 25 s on a stalled network) scaled down to
    1 s each, so the stalled-network tests wait seconds, not half a minute; the behaviour tested is the same."""
    monkeypatch.setattr(aws, "CONNECT_TIMEOUT", 1)
    monkeypatch.setattr(aws, "READ_TIMEOUT", 1)
    return aws.MAX_ATTEMPTS * 1 + 1


def test_a_stalled_bedrock_fails_the_cell_within_its_limits_saying_where(fake_aws, stalled_endpoint, short_limits):
    model = make_model("bedrock", endpoint_url=stalled_endpoint)
    assert model.client.meta.config.read_timeout == aws.READ_TIMEOUT == 1
    agent = Agent(model=model, callback_handler=None)
    error, took = within(40, lambda: agent("hello"))
    assert took < short_limits + 5, f"{took:.1f} s: the limits were not applied"
    (clear,) = [e for e in chain(error) if isinstance(e, BackendError)] or [None]
    assert clear is not None, f"expected a BackendError in {chain(error)!r}"
    message = str(clear)
    for expected in ("us-east-1", stalled_endpoint, "ReadTimeoutError", "make_model('bedrock')", "backend='offline'", "proxy"):
        assert expected in message, (expected, message)


def test_a_stalled_titan_fails_within_its_limits_saying_where(fake_aws, stalled_endpoint, short_limits):
    titan = make_embedder("titan", endpoint_url=stalled_endpoint, dimensions=256)
    error, took = within(40, lambda: titan.embed(["The user prefers Tuesday deployments."]))
    assert took < short_limits + 5, f"{took:.1f} s: the limits were not applied"
    assert isinstance(error, EmbeddingModelError), repr(error)
    for expected in ("us-east-1", stalled_endpoint, "make_embedder('titan')", "embedder='minilm'"):
        assert expected in str(error), (expected, str(error))


def test_an_unknown_profile_is_a_clear_error_for_both(no_aws, monkeypatch, tmp_path):
    (tmp_path / "no-config").write_text("[profile work]\nregion = eu-west-1\n")
    monkeypatch.setenv("AWS_PROFILE", "nosuch")
    with pytest.raises(BackendError, match=r"profile 'nosuch'.*Profiles found: work.*backend='offline'"):
        make_model("bedrock")
    with pytest.raises(EmbeddingModelError, match=r"profile 'nosuch'.*Profiles found: work.*embedder='minilm'"):
        make_embedder("titan")


class Captured(Exception):
    """Raised by the capture hook instead of sending: the request never leaves the machine."""


def capture_requests(client) -> list:
    """Every request `client` is about to send, as signed (botocore's before-send event), none of them sent."""
    sent = []

    def hook(request, **_):
        sent.append(request)
        raise Captured(request.url)

    client.meta.events.register("before-send", hook)
    return sent


def test_a_bedrock_api_key_works_for_both(no_aws, monkeypatch):
    """With only AWS_BEARER_TOKEN_BEDROCK set (no access key anywhere), both clients send that key as the bearer
    token of their requests: the chat model's Converse call through an agent, and Titan's InvokeModel."""
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "example-api-key")
    model = make_model("bedrock")
    titan = make_embedder("titan")
    assert isinstance(titan, TitanEmbedder)
    assert titan._client.meta.region_name == model.client.meta.region_name == "us-east-1"
    assert titan._client.meta.config.read_timeout == model.client.meta.config.read_timeout == aws.READ_TIMEOUT

    to_model, to_titan = capture_requests(model.client), capture_requests(titan._client)
    with pytest.raises(Exception) as agent_error:  # noqa: B017 (the capture stops the call; how it is wrapped varies)
        Agent(model=model, callback_handler=None)("hello")
    assert any(isinstance(e, Captured) for e in chain(agent_error.value)), chain(agent_error.value)
    with pytest.raises(Exception):  # noqa: B017
        titan.embed(["The user prefers Tuesday deployments."])
    for sent, operation in ((to_model, "/converse"), (to_titan, "/invoke")):
        assert sent, f"no {operation} request was made"
        request = sent[0]
        assert request.url.startswith("https://bedrock-runtime.us-east-1.amazonaws.com/") and operation in request.url
        assert request.headers["Authorization"] == b"Bearer example-api-key", dict(request.headers)
        assert "X-Amz-Security-Token" not in request.headers


def test_both_take_the_region_the_same_way(fake_aws, monkeypatch, tmp_path):
    (tmp_path / "no-config").write_text("[default]\nregion = ap-southeast-2\n")
    assert make_model("bedrock").client.meta.region_name == "ap-southeast-2"
    assert make_embedder("titan")._client.meta.region_name == "ap-southeast-2"
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert make_model("bedrock").client.meta.region_name == "eu-west-1"
    assert make_embedder("titan")._client.meta.region_name == "eu-west-1"


def test_no_credentials_gives_one_message_for_both(no_aws):
    with pytest.raises(BackendError) as model_error:
        make_model("bedrock")
    with pytest.raises(EmbeddingModelError) as titan_error:
        make_embedder("titan")
    for message in (str(model_error.value), str(titan_error.value)):
        assert "AWS_BEARER_TOKEN_BEDROCK" in message and "aws configure" in message and "us-east-1" in message
