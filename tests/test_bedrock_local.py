"""The local Bedrock endpoint (companion/models/bedrock_local.py): Strands' real BedrockModel over HTTP on 127.0.0.1, in
both stream and non-stream modes, with tool calls, Bedrock's validation errors, Titan embeddings, and a clean stop."""

from __future__ import annotations

import json
import socket
import threading

import boto3
import numpy as np
import pytest
from botocore.exceptions import ClientError
from strands import Agent

from companion.models.backends import make_model
from companion.models.bedrock_local import LocalBedrock, encode_event
from companion.models.offline_model import OfflineModel
from conftest import user


@pytest.fixture
def endpoint():
    with LocalBedrock() as local:
        yield local


def client(local: LocalBedrock):
    session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1")
    return session.client("bedrock-runtime", endpoint_url=local.url)


@pytest.mark.parametrize("streaming", [True, False], ids=["ConverseStream", "Converse"])
def test_bedrock_model_answers_like_the_offline_model(endpoint, streaming, monkeypatch):
    monkeypatch.setattr("companion.models.bedrock_local._RUNNING", endpoint)
    agent = Agent(model=make_model("bedrock", bedrock_endpoint="local", streaming=streaming), callback_handler=None)
    direct = Agent(model=OfflineModel(), callback_handler=None)
    for prompt in ["My codename is ORION.", "What is my codename?", "What is my favourite colour?"]:
        assert str(agent(prompt)).strip() == str(direct(prompt)).strip()
    assert agent.event_loop_metrics.accumulated_usage == direct.event_loop_metrics.accumulated_usage
    operations = {r["operation"] for r in endpoint.requests}
    assert operations == {"converse-stream" if streaming else "converse"}
    assert type(agent.model).__name__ == "BedrockModel"


def test_tool_use_crosses_the_wire(endpoint, monkeypatch):
    monkeypatch.setattr("companion.models.bedrock_local._RUNNING", endpoint)
    calls = []

    from strands import tool

    @tool
    def search_memory(query: str) -> str:
        """Search the user's memories."""
        calls.append(query)
        return json.dumps([{"content": "The user's codename is VEGA."}])

    agent = Agent(model=make_model("bedrock", bedrock_endpoint="local"), tools=[search_memory], callback_handler=None)
    assert "VEGA" in str(agent("What is my codename?"))
    assert calls == ["What is my codename?"]
    sent = endpoint.requests[-1]["body"]
    assert sent["toolConfig"]["tools"][0]["toolSpec"]["name"] == "search_memory"
    kinds = [next(iter(block)) for m in sent["messages"] for block in m["content"]]
    assert kinds == ["text", "toolUse", "toolResult"]


def test_a_request_bedrock_refuses_fails_with_bedrocks_text(endpoint):
    broken = [user("What is my codename?"),
              {"role": "assistant", "content": [{"toolUse": {"toolUseId": "tooluse_1", "name": "search_memory",
                                                             "input": {}}}]},
              user("Hello?")]
    with pytest.raises(ClientError) as raised:
        client(endpoint).converse(modelId="amazon.nova-pro-v1:0", messages=broken)
    assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert raised.value.response["Error"]["Message"] == (
        "Expected toolResult blocks at messages.2.content for the following Ids: tooluse_1")
    with pytest.raises(ClientError, match="The provided model identifier is invalid."):
        client(endpoint).converse(modelId="amazon.nova-ultra-v9:0", messages=[user("Hi.")])
    assert [r["rule"] for r in endpoint.refused] == ["tool-use-answered", "model-id"]


def test_titan_embeddings_have_titans_size_and_minilms_ranking(endpoint):
    bedrock = client(endpoint)

    def embed(text: str, **options) -> np.ndarray:
        answer = bedrock.invoke_model(modelId="amazon.titan-embed-text-v2:0",
                                      body=json.dumps({"inputText": text, **options}))
        return np.array(json.loads(answer["body"].read())["embedding"])

    a, b = embed("Where does Ada live?"), embed("Ada's home address is 12 Harbour Lane.")
    assert a.shape == (1024,) and embed("x", dimensions=256).shape == (256,)
    assert abs(np.linalg.norm(a) - 1) < 1e-6
    from companion.models.embeddings import MiniLMEmbedder

    m = MiniLMEmbedder().embed(["Where does Ada live?", "Ada's home address is 12 Harbour Lane."])
    assert abs(float(a @ b) - float(m[0] @ m[1] / np.linalg.norm(m[0]) / np.linalg.norm(m[1]))) < 1e-5


def test_event_stream_frames_parse_with_botocore():
    from botocore.eventstream import EventStreamBuffer

    buffer = EventStreamBuffer()
    buffer.add_data(encode_event("messageStart", {"role": "assistant"}))
    (message,) = list(buffer)
    assert message.headers[":event-type"] == "messageStart"
    assert json.loads(message.payload) == {"role": "assistant"}


def test_only_loopback_and_a_clean_stop():
    before = {t.name for t in threading.enumerate()}
    local = LocalBedrock().start()
    host, port = local.url.removeprefix("http://").split(":")
    assert host == "127.0.0.1"
    local.stop()
    with pytest.raises(OSError):
        socket.create_connection((host, int(port)), timeout=1)
    assert {t.name for t in threading.enumerate()} - before == set()
    with pytest.raises(ValueError, match="port must be"):
        LocalBedrock(port=70000)


def test_the_workbooks_titan_embedder_over_the_wire(endpoint, fake_aws):
    """Notebook 06's `embedder="titan"` path: the companion's TitanEmbedder (boto3's InvokeModel) against the local
    endpoint gets Titan-sized vectors, and ranks the recall pairs' answer first as MiniLM does."""
    from companion.models.embeddings import make_embedder

    titan = make_embedder("titan", endpoint_url=endpoint.url, dimensions=512)
    vectors = titan.embed(["Where does Ada live?", "Ada's home address is 12 Harbour Lane.", "Grace edits in Vim."])
    assert vectors.shape == (3, 512)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])
    assert [r["operation"] for r in endpoint.requests] == ["invoke"] * 3


# Issue 31, item 10: every malformed request gets Bedrock's 400, a client that hangs up gets one log line, and the
# endpoint keeps a bounded log of requests.


def raw_post(local: LocalBedrock, body: bytes, *, length: str | None = None, path: str = "/model/amazon.nova-pro-v1:0"
             "/converse", timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    """One POST over a plain socket (so a bad Content-Length can be sent): the status, headers and body, or
    (0, {}, b"") when the server closed the connection without an answer."""
    host, port = local.url.removeprefix("http://").split(":")
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body) if length is None else length}\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection((host, int(port)), timeout=timeout) as connection:
        connection.sendall(head + body)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    if not received:
        return 0, {}, b""
    header, _, payload = received.partition(b"\r\n\r\n")
    lines = header.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, payload


MALFORMED = {
    "a list": b"[]",
    "a string": b'"x"',
    "a number": b"42",
    "messages a string": b'{"messages": "x"}',
    "a message a string": b'{"messages": ["x"]}',
    "content a string": b'{"messages": [{"role": "user", "content": "Hi."}]}',
    "a block a string": b'{"messages": [{"role": "user", "content": ["Hi."]}]}',
    "no role": b'{"messages": [{"content": [{"text": "Hi."}]}]}',
    "system a string": b'{"messages": [{"role": "user", "content": [{"text": "Hi."}]}], "system": "be nice"}',
    "toolConfig a list": b'{"messages": [{"role": "user", "content": [{"text": "Hi."}]}], "toolConfig": []}',
    "a tool without a spec name": b'{"messages": [{"role": "user", "content": [{"text": "Hi."}]}], '
                                  b'"toolConfig": {"tools": [{"toolSpec": {}}]}}',
    "deep nesting": b"[" * 100_000 + b"]" * 100_000,
    "deep nesting in a message": b'{"messages": [{"role": "user", "content": [{"text": "Hi.", "x": '
                                 + b"[" * 100_000 + b"]" * 100_000 + b"}]}]}",
    "not UTF-8": b'{"messages": "\xff"}',
}


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_request_gets_bedrocks_validation_exception(endpoint, body, capfd):
    """Before the fix these closed the connection with no answer and printed a traceback to stderr."""
    status, headers, payload = raw_post(endpoint, body)
    assert status == 400, (status, payload)
    assert headers["x-amzn-ErrorType"].startswith("ValidationException:")
    assert set(json.loads(payload)) == {"message"}
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize("length", ["abc", "-5", "1e3", "99999999999999999999"])
def test_a_bad_content_length_gets_bedrocks_validation_exception(endpoint, length, capfd):
    status, headers, payload = raw_post(endpoint, b'{"messages": []}', length=length)
    assert status == 400 and headers["x-amzn-ErrorType"].startswith("ValidationException:"), (status, payload)
    assert "Content-Length" in json.loads(payload)["message"]
    assert "Traceback" not in capfd.readouterr().err


def test_an_invoke_with_a_malformed_body_gets_bedrocks_validation_exception(endpoint):
    status, headers, _ = raw_post(endpoint, b"[]", path="/model/amazon.titan-embed-text-v2:0/invoke")
    assert status == 400 and headers["x-amzn-ErrorType"].startswith("ValidationException:")


def test_a_client_that_hangs_up_gets_one_log_line_not_a_traceback(endpoint, capfd, caplog):
    """Before the fix each such client printed a full traceback (BrokenPipeError / ConnectionResetError); now one
    warning of the module's logger (which Python prints to stderr as one line when no handler is set)."""
    import struct
    import time

    host, port = endpoint.url.removeprefix("http://").split(":")
    body = json.dumps({"messages": [user("What is my codename?")]}).encode()
    for _ in range(3):
        connection = socket.create_connection((host, int(port)))
        connection.sendall((f"POST /model/amazon.nova-pro-v1:0/converse-stream HTTP/1.1\r\nHost: x\r\n"
                            f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()  # a reset, before the answer is read
    half = socket.create_connection((host, int(port)))  # a client that hangs up in the middle of its body
    half.sendall(b"POST /model/amazon.nova-pro-v1:0/converse HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
    half.close()
    deadline = time.monotonic() + 10
    while endpoint.dropped < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    err = capfd.readouterr().err
    assert "Traceback" not in err, err
    lines = [r.getMessage() for r in caplog.records if "hung up" in r.getMessage()]
    assert len(lines) == endpoint.dropped == 4 and all("\n" not in line for line in lines), lines
    status, _, _ = raw_post(endpoint, json.dumps({"messages": [user("Hi.")]}).encode())
    assert status == 200, "the endpoint still answers"


def test_a_client_that_resets_before_its_request_line_is_read_is_counted_too(endpoint, caplog):
    """The server's own error path (a reset before the request line is read) logs one line and counts the client:
    it used to log without counting, so under load `dropped` fell one short of the lines (a CI failure)."""
    import struct
    import time

    host, port = endpoint.url.removeprefix("http://").split(":")
    before = endpoint.dropped
    connection = socket.create_connection((host, int(port)))
    connection.sendall(b"POST /model/amazon.nova-pro-v1:0/conv")
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.close()
    deadline = time.monotonic() + 10
    while endpoint.dropped == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert endpoint.dropped == before + 1
    assert [r.getMessage() for r in caplog.records if "hung up (" in r.getMessage()], "the server's path logged it"


def test_the_request_log_is_bounded(endpoint):
    """Before the fix every request body was kept for the life of the process (100 x 1 MB requests: +101 MB)."""
    big = json.dumps({"messages": [user("Hi. " + "x" * 1_000_000)]}).encode()
    for _ in range(5):
        assert raw_post(endpoint, big)[0] == 200
    kept = sum(len(json.dumps(r["body"])) for r in endpoint.requests)
    assert kept < 5 * LocalBedrock.MAX_LOGGED_BODY + 10_000, kept
    assert endpoint.requests[-1]["body"] == {"omitted": f"{len(big):,} bytes (over the log's limit)"}
    small = json.dumps({"messages": [user("Hi.")]}).encode()
    for _ in range(LocalBedrock.MAX_LOGGED_REQUESTS + 5):
        raw_post(endpoint, small)
    assert len(endpoint.requests) == LocalBedrock.MAX_LOGGED_REQUESTS
    assert endpoint.requests[-1]["body"]["messages"][0]["content"] == [{"text": "Hi."}]
