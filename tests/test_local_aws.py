"""The local AWS endpoint of notebook 12 and the companion code that runs on it: loopback only, stopped without
leftovers, failures bounded; the calls that only real AWS answers (DynamoDB SearchVectors, AgentCore Memory) checked
against botocore's service models with Stubber."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import threading
from datetime import UTC, datetime

import numpy as np
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from companion.memory import agentcore_memory
from companion.memory.dynamodb_memory import (
    INDEX_NAME,
    DynamoDBMemoryStore,
    MemorySetup,
    create_table,
    create_table_request,
    search_vectors_request,
)
from companion.sessions.local_aws import (
    MAX_ATTEMPTS,
    EndpointError,
    LocalEndpoint,
    RequestLog,
    boto_session,
    inject_s3_error,
    make_client,
    name_connections,
    port_of,
    record_connections,
    recorded_addresses,
    serving_port,
    short_error,
)
from companion.sessions.s3_sessions import (
    LockTimeout,
    guarded_turn,
    objects_with_sizes,
    read_session_messages,
    s3_turn_lock,
    session_manager,
)


class FakeEmbedder:
    """Three fixed directions, so rankings are known without loading a model."""

    model_id = "fake"
    dimensions = 3
    table = {"apples": [1, 0, 0], "bananas": [0, 1, 0], "cherries": [0, 0, 1], "fruit like apples": [0.9, 0.1, 0]}

    def embed(self, texts):
        rows = np.array([self.table[t] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def local():
    threads_before = set(threading.enumerate())
    endpoint = LocalEndpoint().start()
    yield endpoint
    assert endpoint.stop() == []
    assert [t for t in threading.enumerate() if t not in threads_before and t.is_alive()] == []


def test_the_endpoint_is_loopback_only_and_leaves_nothing_behind():
    with pytest.raises(EndpointError):
        LocalEndpoint(host="0.0.0.0")
    before = set(threading.enumerate())
    hosts = record_connections()
    endpoint = LocalEndpoint().start()
    s3 = make_client("s3", endpoint)
    s3.create_bucket(Bucket="probe")
    assert s3.list_buckets()["Buckets"][0]["Name"] == "probe"
    port = endpoint.port
    assert endpoint.stop() == []
    assert [t for t in threading.enumerate() if t not in before and t.is_alive()] == []
    assert set(hosts) == {"127.0.0.1"}
    with socket.socket() as probe, pytest.raises(OSError):  # the listening socket is closed
        probe.settimeout(2)
        probe.connect(("127.0.0.1", port))


def test_stop_counts_only_the_endpoints_own_threads_and_names_the_ports_connected():
    """Another server of the process (as the local Bedrock endpoint on the Bedrock path) is not the endpoint's: its
    threads are told apart by the port they serve, and each connection is named by the endpoint it reached."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: its request thread outlives the request

        def log_message(self, *args):
            return

        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    hosts = record_connections()
    endpoint = LocalEndpoint().start()
    other = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    other.daemon_threads = True
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        make_client("s3", endpoint).list_buckets()
        with socket.create_connection(other.server_address) as client:
            client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            client.recv(1024)
            assert endpoint.stop() == [], "the other server's threads are not the endpoint's"
            others = [t for t in threading.enumerate() if serving_port(t) == other.server_address[1]]
            assert len(others) == 2, "its serve_forever and the request thread of the open connection"
        names = {port_of(endpoint.url): "S3", other.server_address[1]: "other"}
        assert name_connections(recorded_addresses(), names) == ["S3", "other"]
        assert set(hosts) == {"127.0.0.1"}
        assert name_connections([("127.0.0.1", 1), ("10.0.0.1", 443)], names) == ["10.0.0.1:443", "127.0.0.1:1"]
    finally:
        other.shutdown()
        other.server_close()


def test_a_restart_empties_the_store():
    with LocalEndpoint() as first:
        make_client("s3", first).create_bucket(Bucket="kept-in-process")
    with LocalEndpoint() as second:
        assert make_client("s3", second).list_buckets()["Buckets"] == []


def test_request_log_times_and_counts_calls(local):
    log = RequestLog()
    s3 = make_client("s3", local, log.attach(boto_session(local)))
    s3.create_bucket(Bucket="logged")
    s3.put_object(Bucket="logged", Key="a", Body=b"x")
    with pytest.raises(ClientError):
        s3.get_object(Bucket="logged", Key="missing")
    assert log.counts() == {"CreateBucket": 1, "GetObject": 1, "PutObject": 1}
    assert [ok for _, op, _, ok in log.calls if op == "GetObject"] == [False]


def test_the_audit_records_every_put_with_its_key_condition_and_status_apart_from_the_log(local):
    from companion.sessions.local_aws import Audit

    session = boto_session(local)
    audit = Audit(session)
    s3 = make_client("s3", local, session)
    s3.create_bucket(Bucket="audited")
    s3.put_object(Bucket="audited", Key="a/b c.json", Body=b"x")
    s3.put_object(Bucket="audited", Key="lock", Body=b"x", IfNoneMatch="*")
    with pytest.raises(ClientError):
        s3.put_object(Bucket="audited", Key="lock", Body=b"y", IfNoneMatch="*")
    assert audit.puts == [("audited", "a/b c.json", False, 200), ("audited", "lock", True, 200),
                          ("audited", "lock", True, 412)]
    assert set(audit.hosts) == {"127.0.0.1"}


def test_throttling_is_retried_a_bounded_number_of_times_and_403_is_not(local):
    s3 = make_client("s3", local)
    s3.create_bucket(Bucket="throttled")
    with inject_s3_error(s3, "SlowDown", operation="PutObject", times=1) as seen:
        s3.put_object(Bucket="throttled", Key="once", Body=b"x")
    assert seen == {"injected": 1, "attempts": 2}
    with inject_s3_error(s3, "SlowDown", operation="PutObject") as seen, pytest.raises(ClientError) as error:
        s3.put_object(Bucket="throttled", Key="never", Body=b"x")
    assert seen["attempts"] == MAX_ATTEMPTS and "SlowDown on PutObject" in short_error(error.value)
    with inject_s3_error(s3, "InvalidAccessKeyId") as seen, pytest.raises(ClientError):
        s3.get_object(Bucket="throttled", Key="once")
    assert seen["attempts"] == 1
    assert sorted(objects_with_sizes(s3, "throttled")) == ["once"]


def test_the_s3_lock_excludes_a_second_holder_and_is_released(local):
    s3 = make_client("s3", local)
    s3.create_bucket(Bucket="locks")
    with s3_turn_lock(s3, "locks", "l.lock", "first"):
        with pytest.raises(LockTimeout, match="l.lock"), s3_turn_lock(s3, "locks", "l.lock", "second", wait=0.2):
            pass
    assert objects_with_sizes(s3, "locks") == {}
    with s3_turn_lock(s3, "locks", "l.lock", "second") as seen:
        assert seen == {"refused": 0}


def test_guarded_turn_removes_a_half_written_turn(local):
    from strands import Agent

    from companion.models.backends import make_model

    session = boto_session(local)
    s3 = make_client("s3", local, session)
    s3.create_bucket(Bucket="guarded")
    manager = session_manager("g", "guarded", session, local.url)
    agent = Agent(model=make_model("offline"), session_manager=manager, callback_handler=None)
    agent("My name is Pin.")
    with inject_s3_error(manager.client, "SlowDown", operation="PutObject", url_contains="message_3.json"):
        outcome = guarded_turn(agent, "My favorite number is 42.", s3, "guarded", "g")
    assert not outcome.ok and outcome.removed == 1 and "SlowDown" in outcome.error
    assert [m["role"] for m in read_session_messages(s3, "guarded", "g")] == ["user", "assistant"]
    assert len(agent.messages) == 2


def test_dynamodb_store_adds_once_and_ranks_by_cosine(local):
    ddb = make_client("dynamodb", local)
    create_table(ddb, "memories", 3, native=False)
    store = DynamoDBMemoryStore(ddb, "memories", FakeEmbedder(), user="u1")
    other = DynamoDBMemoryStore(ddb, "memories", FakeEmbedder(), user="u2")
    for text in ["apples", "bananas", "cherries", "apples"]:
        asyncio.run(store.add(text))
    asyncio.run(other.add("bananas"))
    assert len(store.items()) == 3 and len(other.items()) == 1
    hits = asyncio.run(store.search("fruit like apples", {"max_search_results": 2}))
    assert [h.content for h in hits] == ["apples", "bananas"]
    assert hits[0].metadata["score"] == pytest.approx(0.9939, abs=1e-3)
    stored = np.frombuffer(store.items()[0]["vector_f32"]["B"], dtype=np.float32)
    assert stored.shape == (3,) and np.isclose(np.linalg.norm(stored), 1)
    # notebook 12 prints a partition as MemorySetup.stored reads it: one user's items, keys and text, no vector
    setup = MemorySetup(ddb, "memories", FakeEmbedder(), native=False, model=None)
    assert setup.stored("u2") == [{"pk": "u2", "sk": DynamoDBMemoryStore.key("bananas"), "content": "bananas"}]
    assert sorted(row["content"] for row in setup.stored("u1")) == ["apples", "bananas", "cherries"]
    assert setup.stored("u3") == []


KEYS = {
    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
}


def test_create_table_runs_on_the_local_endpoint_and_twice_is_harmless(local):
    ddb = make_client("dynamodb", local)
    create_table(ddb, "created-here", 3, native=False)
    create_table(ddb, "created-here", 3, native=False)  # already there: used as it is
    table = ddb.describe_table(TableName="created-here")["Table"]
    assert table["TableStatus"] == "ACTIVE" and table["BillingModeSummary"] == {"BillingMode": "PAY_PER_REQUEST"}
    assert table["KeySchema"] == KEYS["KeySchema"] and table["AttributeDefinitions"] == KEYS["AttributeDefinitions"]
    assert [t for t in ddb.list_tables()["TableNames"] if t == "created-here"] == ["created-here"]


def test_native_search_and_vector_index_requests_match_the_dynamodb_api():
    """The requests only AWS answers, written out literally here (not rebuilt with the code's own builders) and
    checked against botocore's model of the DynamoDB API by Stubber."""
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    embedder = FakeEmbedder()
    store = DynamoDBMemoryStore(client, "memories", embedder, user="u1", native=True,
                                clock=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    item = store.item("apples")
    assert item["vector"] == {"L": [{"N": "1.0"}, {"N": "0.0"}, {"N": "0.0"}]}
    expected_create = {
        "TableName": "memories", **KEYS, "BillingMode": "PAY_PER_REQUEST",
        "VectorIndexes": [{"IndexName": "memory-vector-idx", "VectorAttribute": {"AttributeName": "vector"},
                           "SearchSchema": [{"AttributeName": "pk", "SearchSchemaElementType": "HASH"}],
                           "Projection": {"ProjectionType": "ALL"}, "Dimensions": 3, "DistanceFunction": "COSINE"}],
    }
    query = [float(x) for x in embedder.embed(["fruit like apples"])[0]]
    expected_search = {
        "TableName": "memories", "IndexName": "memory-vector-idx", "SearchVector": [{"N": repr(x)} for x in query], "TopK": 1,
        "SearchConditionExpression": "pk = :user", "ExpressionAttributeValues": {":user": {"S": "u1"}},
        "ProjectionExpression": "sk, content, lineage, restated_in",
    }
    with Stubber(client) as stub:
        stub.add_response("create_table", {}, expected_create)
        stub.add_response("describe_table", {"Table": {"TableName": "memories", "TableStatus": "ACTIVE"}}, {"TableName": "memories"})
        stub.add_response("put_item", {}, {"TableName": "memories", "Item": {
            "pk": {"S": "u1"}, "sk": {"S": "mem#" + hashlib.sha256(b"apples").hexdigest()[:16]},
            "content": {"S": "apples"}, "model": {"S": "fake"},
            "vector_f32": {"B": np.array([1, 0, 0], dtype=np.float32).tobytes()},
            "lineage": {"M": {"derived": {"S": "add"}, "session_id": {"NULL": True}, "messages": {"L": []},
                              "user": {"S": "u1"}, "at": {"S": "2026-01-01T00:00:00+00:00"}}},
            "vector": {"L": [{"N": "1.0"}, {"N": "0.0"}, {"N": "0.0"}]}},
            "ConditionExpression": "attribute_not_exists(sk)", "ReturnValuesOnConditionCheckFailure": "ALL_OLD"})
        stub.add_response(
            "search_vectors",
            {"SearchResults": [{"Item": {"content": {"S": "apples"}, "sk": {"S": "mem#1"},
                                         "lineage": {"M": {"derived": {"S": "add"}, "messages": {"L": []}}}},
                                "Score": 0.0061}]},
            expected_search,
        )
        create_table(client, "memories", 3, native=True)  # the companion's own function: request, then the waiter
        asyncio.run(store.add("apples"))
        hits = asyncio.run(store.search("fruit like apples", {"max_search_results": 1}))
        stub.assert_no_pending_responses()
    assert [(h.content, h.metadata["score"]) for h in hits] == [("apples", 0.9939)]
    assert hits[0].metadata["lineage"] == {"derived": "add", "messages": []}
    assert INDEX_NAME == "memory-vector-idx"
    assert create_table_request("memories", 3, native=True) == expected_create
    assert search_vectors_request("memories", "u1", np.array(query, dtype=np.float32), 1) == expected_search


def passed_on(*fields):
    """A strategy's memoryRecordSchema copying these lineage keys from the event into its records, verbatim."""
    return {"metadataSchema": [{"key": f"lineage.{f}", "type": "STRING", "extractionType": "STRICTLY_CONSISTENT"}
                               for f in fields]}


def test_agentcore_memory_calls_match_the_service_models():
    import boto3

    keys = dict(region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    control = boto3.client("bedrock-agentcore-control", **keys)
    data = boto3.client("bedrock-agentcore", **keys)
    when = datetime(2026, 1, 1, tzinfo=UTC)
    expected_memory = {
        "name": "workbook_11",
        "description": "Workbook notebook 12: facts, preferences and session summaries per user.",
        "eventExpiryDuration": 30,
        "memoryStrategies": [
            {"semanticMemoryStrategy": {"name": "facts", "namespaces": ["/users/{actorId}/facts"],
                                        "memoryRecordSchema": passed_on("session_id", "messages", "message_ids", "user")}},
            {"userPreferenceMemoryStrategy": {"name": "preferences", "namespaces": ["/users/{actorId}/preferences"],
                                              "memoryRecordSchema": passed_on("session_id", "messages", "message_ids",
                                                                              "user")}},
            {"summaryMemoryStrategy": {"name": "summaries", "namespaces": ["/users/{actorId}/sessions/{sessionId}"],
                                       "memoryRecordSchema": passed_on("session_id", "user")}},
        ],
    }
    with Stubber(control) as stub:
        stub.add_response("create_memory", {"memory": {"arn": "arn:aws:x", "id": "workbook11-abcdefghij", "name": "workbook_11",
                                                       "eventExpiryDuration": 30, "status": "CREATING",
                                                       "createdAt": when, "updatedAt": when}}, expected_memory)
        request = agentcore_memory.create_memory_request("workbook_11")
        assert control.create_memory(**request)["memory"]["id"] == "workbook11-abcdefghij"
    memory_id = "workbook11-abcdefghij"
    with Stubber(data) as stub:
        stub.add_response("create_event", {"event": {"memoryId": memory_id, "actorId": "u1", "sessionId": "s1",
                                                     "eventId": "ev-1", "eventTimestamp": when, "payload": [], "branch": {"name": "main"}}},
                          {"memoryId": memory_id, "actorId": "u1", "sessionId": "s1", "eventTimestamp": when, "payload": [
                              {"conversational": {"role": "USER", "content": {"text": "hi"}}},
                              {"conversational": {"role": "ASSISTANT", "content": {"text": "hello"}}}]})
        stub.add_response("retrieve_memory_records", {"memoryRecordSummaries": [
            {"memoryRecordId": "r" * 40, "content": {"text": "The user says hi."}, "memoryStrategyId": "facts",
             "namespaces": ["/users/u1/facts"], "createdAt": when, "score": 0.8}]},
            {"memoryId": memory_id, "namespace": "/users/u1/facts", "searchCriteria": {"searchQuery": "greeting?", "topK": 3}})
        assert agentcore_memory.remember_turn(data, memory_id, "u1", "s1", "hi", "hello", when) == "ev-1"
        assert agentcore_memory.recall(data, memory_id, "u1", "greeting?") == [("The user says hi.", 0.8, None)]
