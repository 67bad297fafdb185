"""Lineage in notebook 12's cloud stores (issue 18): every DynamoDB item names where its memory came from, a restated
text keeps every lineage, search returns them; AgentCore Memory's events carry the lineage in their `metadata`, and its
strategies pass it on to their records, each request checked against botocore's service models (Stubber for the shapes,
and `request_problems` for the whole input shape at every depth, with the lengths, patterns and enums that Stubber's
validation leaves out)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from datetime import UTC, datetime
from decimal import Decimal

import botocore.session
import numpy as np
import pytest
from botocore.stub import Stubber
from strands import Agent
from strands.memory import InvocationTrigger, MemoryManager, ModelExtractor
from strands.session import FileSessionManager

from companion.memory import agentcore_memory
from companion.memory.agentcore_memory import request_problems
from companion.memory.dynamodb_memory import (
    DynamoDBMemoryStore,
    create_table,
    item_lineage,
    lineage_attribute,
    plain,
)
from companion.memory.lineage import Lineage, LineageExtractor, LineageRecord
from companion.models.backends import make_model
from companion.sessions.local_aws import LocalEndpoint, make_client

WHEN = datetime(2026, 1, 1, tzinfo=UTC)
MODELS = botocore.session.get_session()


class HashEmbedder:
    """A deterministic unit vector per text (no model to load); equal texts, equal vectors."""

    model_id = "hash"
    dimensions = 8

    def embed(self, texts):
        rows = np.array([[b - 127.5 for b in hashlib.sha256(t.encode()).digest()[:8]] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def local():
    threads_before = set(threading.enumerate())
    endpoint = LocalEndpoint().start()
    yield endpoint
    assert endpoint.stop() == []
    assert [t for t in threading.enumerate() if t not in threads_before and t.is_alive()] == []


def store_on(local, table, user="u1", **options):
    ddb = make_client("dynamodb", local)
    create_table(ddb, table, HashEmbedder.dimensions, native=False)
    return ddb, DynamoDBMemoryStore(ddb, table, HashEmbedder(), user=user, clock=lambda: WHEN, **options)


def extracted(session_id, *messages):
    return {"lineage": LineageRecord("extraction", session_id, messages).to_dict()}


# ---------------------------------------------------------------------- DynamoDB, on the local endpoint


def test_every_item_carries_its_lineage_as_a_map(local):
    ddb, store = store_on(local, "lineage-map")
    asyncio.run(store.add("apples", extracted("s1", 0, 1)))
    asyncio.run(store.add("bananas"))  # the SDK's add with no lineage: "add", from unknown messages
    items = {i["content"]["S"]: i for i in ddb.scan(TableName="lineage-map")["Items"]}
    assert items["apples"]["lineage"]["M"]["session_id"] == {"S": "s1"}
    assert item_lineage(items["apples"]) == ({"derived": "extraction", "session_id": "s1", "messages": [0, 1],
                                              "user": "u1", "at": WHEN.isoformat()}, [])
    assert item_lineage(items["bananas"])[0] == {"derived": "add", "session_id": None, "messages": [], "user": "u1",
                                                 "at": WHEN.isoformat()}
    # a map: DynamoDB's own expressions reach its fields (what forgetting a session's memories needs)
    found = ddb.scan(TableName="lineage-map", FilterExpression="lineage.session_id = :s",
                     ExpressionAttributeValues={":s": {"S": "s1"}})["Items"]
    assert [i["content"]["S"] for i in found] == ["apples"]


def test_the_same_text_again_keeps_every_lineage_and_not_twice_the_same(local):
    ddb, store = store_on(local, "lineage-restated")
    first = asyncio.run(store.add("apples", extracted("s1", 0, 1)))
    again = asyncio.run(store.add("apples", extracted("s1", 4, 5)))
    asyncio.run(store.add("apples", extracted("s1", 4, 5)))  # the same derivation once more: already on record
    later = DynamoDBMemoryStore(ddb, "lineage-restated", HashEmbedder(), user="u1",
                                clock=lambda: datetime(2026, 2, 1, tzinfo=UTC))
    asyncio.run(later.add("apples", extracted("s1", 4, 5)))  # at another time, the same messages: not a new origin
    assert first == again
    (item,) = ddb.scan(TableName="lineage-restated")["Items"]
    lineage, restated = item_lineage(item)
    assert lineage["messages"] == [0, 1], "the first lineage is not overwritten"
    assert [r["messages"] for r in restated] == [[4, 5]]
    hit = asyncio.run(store.search("apples"))[0]
    assert hit.metadata["lineage"] == lineage and hit.metadata["restated_in"] == restated


def test_search_returns_the_lineage_of_each_result(local):
    _, store = store_on(local, "lineage-search")
    asyncio.run(store.add("apples", extracted("s1", 2, 3)))
    asyncio.run(store.add("cherries"))
    hits = {h.content: h.metadata for h in asyncio.run(store.search("apples", {"max_search_results": 2}))}
    assert hits["apples"]["lineage"]["messages"] == [2, 3] and "restated_in" not in hits["apples"]
    assert hits["cherries"]["lineage"]["derived"] == "add"
    assert set(hits["apples"]) == {"score", "lineage"}


def test_an_agents_extracted_memory_names_its_session_and_message_files(local, tmp_path):
    """The notebook's path end to end: Lineage hook, LineageExtractor, MemoryManager, the DynamoDB store; the lineage
    checked against the session's message files (their index and the tracking id each holds)."""
    ddb, store = store_on(local, "lineage-agent", user="pin", extraction={
        "trigger": InvocationTrigger(), "extractor": LineageExtractor(ModelExtractor())})
    sessions = FileSessionManager(session_id="pin-memory", storage_dir=str(tmp_path))
    agent = Agent(model=make_model("offline"), session_manager=sessions, callback_handler=None,
                  memory_manager=MemoryManager(stores=[store], search_tool_config=False, injection=False),
                  hooks=[Lineage(sessions)])
    for line in ["My favorite city is Lisbon.", "What a nice day.", "My favorite city is Lisbon."]:
        agent(line)
    (item,) = [i for i in ddb.scan(TableName="lineage-agent")["Items"] if "Lisbon" in i["content"]["S"]]
    lineage, restated = item_lineage(item)
    files = tmp_path / "session_pin-memory" / "agents" / "agent_default" / "messages"
    for origin in [lineage, *restated]:
        assert origin["session_id"] == "pin-memory" and origin["user"] == "pin" and origin["derived"] == "extraction"
        on_disk = [json.loads((files / f"message_{i}.json").read_text())["message"] for i in origin["messages"]]
        assert [m["tracking_id"] for m in on_disk] == origin["message_ids"]
        assert any("Lisbon" in b.get("text", "") for m in on_disk if m["role"] == "user" for b in m["content"])
    assert [lineage["messages"], *[r["messages"] for r in restated]] == [[0, 1], [4, 5]]


def test_plain_turns_decimals_back_into_json_numbers():
    assert plain({"messages": [Decimal("3")], "score": Decimal("0.5")}) == {"messages": [3], "score": 0.5}
    assert lineage_attribute({"derived": "add", "session_id": None, "messages": [1]}) == {
        "M": {"derived": {"S": "add"}, "session_id": {"NULL": True}, "messages": {"L": [{"N": "1"}]}}}


# ---------------------------------------------------------------------- DynamoDB requests, on botocore's model


def test_a_restatement_on_aws_is_one_refused_put_and_one_update():
    """The requests written out literally and checked by Stubber against botocore's DynamoDB model."""
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    store = DynamoDBMemoryStore(client, "memories", HashEmbedder(), user="u1", clock=lambda: WHEN)
    key = {"pk": {"S": "u1"}, "sk": {"S": "mem#" + hashlib.sha256(b"apples").hexdigest()[:16]}}
    first = {"M": {"derived": {"S": "extraction"}, "session_id": {"S": "s1"}, "messages": {"L": [{"N": "0"}]},
                   "user": {"S": "u1"}, "at": {"S": WHEN.isoformat()}}}
    second = {"M": {"derived": {"S": "extraction"}, "session_id": {"S": "s1"}, "messages": {"L": [{"N": "4"}]},
                    "user": {"S": "u1"}, "at": {"S": WHEN.isoformat()}}}
    item = store.item("apples", extracted("s1", 4))
    assert item["lineage"] == second
    with Stubber(client) as stub:
        stub.add_client_error("put_item", "ConditionalCheckFailedException", http_status_code=400,
                              expected_params={"TableName": "memories", "Item": item,
                                               "ConditionExpression": "attribute_not_exists(sk)",
                                               "ReturnValuesOnConditionCheckFailure": "ALL_OLD"},
                              response_meta={}, modeled_fields={"Item": {**key, "content": {"S": "apples"},
                                                                        "lineage": first}})
        stub.add_response("update_item", {}, {
            "TableName": "memories", "Key": key,
            "UpdateExpression": "SET restated_in = list_append(if_not_exists(restated_in, :none), :new)",
            "ConditionExpression": "attribute_exists(sk)",
            "ExpressionAttributeValues": {":none": {"L": []}, ":new": {"L": [second]}}})
        assert store.put("apples", extracted("s1", 4)) == key["sk"]["S"]
        stub.assert_no_pending_responses()


# ---------------------------------------------------------------------- AgentCore Memory, on botocore's models


def turn_origin():
    return LineageRecord("dump", "pin-memory", (0, 1), ("48eb6822-39e7-4a49-87e7-38b2d9411e0a",
                                                         "027ee12b-9c1c-4dc5-9985-5407b3bb16a9"), "pin")


def test_an_event_carries_its_lineage_in_metadata_within_the_models_limits():
    request = agentcore_memory.create_event_request("workbook11-abcdefghij", "pin", "pin-memory",
                                                    [("USER", "My favorite city is Lisbon."), ("ASSISTANT", "Noted.")],
                                                    WHEN, turn_origin())
    assert request["metadata"] == {
        "lineage.derived": {"stringValue": "dump"},
        "lineage.session_id": {"stringValue": "pin-memory"},
        "lineage.messages": {"stringValue": "0 1"},
        "lineage.message_ids": {"stringValue": "48eb6822-39e7-4a49-87e7-38b2d9411e0a 027ee12b-9c1c-4dc5-9985-5407b3bb16a9"},
        "lineage.user": {"stringValue": "pin"},
        "lineage.at": {"stringValue": "2026-01-01T00:00:00+00:00"},  # the event's time: the record had none
    }
    assert request_problems("bedrock-agentcore", "CreateEvent", request) == []
    retrieve = agentcore_memory.retrieve_request("workbook11-abcdefghij", "pin", "which city?")
    assert request_problems("bedrock-agentcore", "RetrieveMemoryRecords", retrieve) == []
    back = agentcore_memory.lineage_from_metadata(request["metadata"])
    assert LineageRecord.from_dict(back) == turn_origin().at_time(WHEN)
    # the module's constants are the model's
    shapes = MODELS.get_service_model("bedrock-agentcore")
    value = shapes.shape_for("MetadataValueStringValueString").metadata
    assert (value["pattern"], value["max"]) == (agentcore_memory.METADATA_VALUE.pattern, agentcore_memory.METADATA_VALUE_MAX)
    assert shapes.shape_for("MetadataMap").metadata["max"] == agentcore_memory.METADATA_KEYS_MAX


def test_request_problems_finds_what_the_model_refuses_at_any_depth():
    """The checker notebook 12 uses: a misspelled nested member, a lower-case role (not in the enum), a metadata key
    over 128 characters and a value with a comma are each named; the well-formed request has none."""
    request = agentcore_memory.create_event_request("workbook11-abcdefghij", "pin", "pin-memory",
                                                    [("USER", "Lisbon."), ("ASSISTANT", "Noted.")], WHEN, turn_origin())
    assert request_problems("bedrock-agentcore", "CreateEvent", request) == []
    bad = {**request, "payload": [{"conversational": {"role": "user", "content": {"txt": "Lisbon."}}}],
           "metadata": {**request["metadata"], "k" * 129: {"stringValue": "a,b"}}}
    problems = request_problems("bedrock-agentcore", "CreateEvent", bad)
    assert any('Unknown parameter in payload[0].conversational.content: "txt"' in p for p in problems), problems
    assert any("role: 'user' not in" in p for p in problems), problems
    assert any("129 characters, at most 128" in p for p in problems), problems
    assert any("'a,b' outside" in p for p in problems), problems
    memory = agentcore_memory.create_memory_request("workbook_11")
    memory["memoryStrategies"][0]["semanticMemoryStrategy"]["memoryRecordSchema"]["metadataSchema"][0][
        "extractionType"] = "COPIED"
    assert any("'COPIED' not in" in p for p in request_problems("bedrock-agentcore-control", "CreateMemory", memory))


def test_a_value_the_service_would_refuse_is_refused_here_naming_the_key():
    with pytest.raises(ValueError, match=r"'lineage.session_id' = 'a,b'"):
        agentcore_memory.event_metadata(LineageRecord("dump", "a,b", (0,)))
    with pytest.raises(ValueError, match="at most 256"):
        agentcore_memory.event_metadata(LineageRecord("dump", "s", tuple(range(100))))


def test_the_strategies_pass_the_events_lineage_on_to_their_records():
    request = agentcore_memory.create_memory_request("workbook_11")
    assert request_problems("bedrock-agentcore-control", "CreateMemory", request) == []
    schemas = {name: [e["key"] for e in body["memoryRecordSchema"]["metadataSchema"]]
               for strategy in request["memoryStrategies"] for body in strategy.values() for name in [body["name"]]}
    assert schemas["facts"] == ["lineage.session_id", "lineage.messages", "lineage.message_ids", "lineage.user"]
    assert schemas["summaries"] == ["lineage.session_id", "lineage.user"]
    entry = MODELS.get_service_model("bedrock-agentcore-control").shape_for("MetadataSchemaEntry")
    assert "passed through deterministically from the event" in entry.members["extractionType"].documentation


def test_events_and_records_round_trip_their_lineage_through_stubbed_calls():
    import boto3

    data = boto3.client("bedrock-agentcore", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    memory_id = "workbook11-abcdefghij"
    event = agentcore_memory.create_event_request(memory_id, "pin", "pin-memory",
                                                  [("USER", "My favorite city is Lisbon."), ("ASSISTANT", "Noted.")],
                                                  WHEN, turn_origin())
    passed_on = {k: v for k, v in event["metadata"].items()
                 if k.removeprefix("lineage.") in agentcore_memory.RECORD_LINEAGE["facts"]}
    with Stubber(data) as stub:
        stub.add_response("create_event", {"event": {**{k: event[k] for k in ("memoryId", "actorId", "sessionId",
                                                                                  "eventTimestamp", "payload",
                                                                                  "metadata")},
                                                     "eventId": "ev-1"}}, event)
        stub.add_response("retrieve_memory_records", {"memoryRecordSummaries": [
            {"memoryRecordId": "r" * 40, "content": {"text": "The user's favorite city is Lisbon."},
             "memoryStrategyId": "facts", "namespaces": ["/users/pin/facts"], "createdAt": WHEN, "score": 0.8,
             "metadata": passed_on}]},
            {"memoryId": memory_id, "namespace": "/users/pin/facts",
             "searchCriteria": {"searchQuery": "which city?", "topK": 3}})
        assert agentcore_memory.remember_turn(data, memory_id, "pin", "pin-memory", "My favorite city is Lisbon.",
                                              "Noted.", WHEN, turn_origin()) == "ev-1"
        ((text, score, lineage),) = agentcore_memory.recall(data, memory_id, "pin", "which city?")
        stub.assert_no_pending_responses()
    assert (text, score) == ("The user's favorite city is Lisbon.", 0.8)
    assert lineage == {"session_id": "pin-memory", "messages": [0, 1], "user": "pin", "derived": "extraction",
                       "message_ids": list(turn_origin().message_ids)}
