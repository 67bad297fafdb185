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
