"""Amazon Bedrock AgentCore Memory, the managed alternative, on plain boto3 (`bedrock-agentcore-control` to create a
memory resource, `bedrock-agentcore` to write events and retrieve records).

What it stores: *events* (the turns of a conversation, per actor and session: short-term memory, kept for
`eventExpiryDuration` days) and *memory records* that its strategies extract from those events in the background
(long-term memory): `semanticMemoryStrategy` keeps facts, `userPreferenceMemoryStrategy` preferences,
`summaryMemoryStrategy` a summary per session. Records are found by meaning with `RetrieveMemoryRecords` in a
namespace such as `/users/<actorId>/facts`.

Lineage (`companion.memory.lineage.LineageRecord`, as every store of the workbook) goes where the service model
(botocore's `bedrock-agentcore` and `bedrock-agentcore-control` service-2.json) has a place for it:
- an event: CreateEvent's `metadata`, a map of at most 15 keys whose values are strings of at most 256 characters
  from `[a-zA-Z0-9\\s._:/=+@-]` (no JSON fits: no quotes, braces or commas), so the record is flattened into one key
  per field, `lineage.<field>`, lists joined by spaces (`event_metadata`; `lineage_from_metadata` reads it back);
- a record a strategy extracts: the strategy's `memoryRecordSchema`, whose `metadataSchema` entries with
  `extractionType` STRICTLY_CONSISTENT are "passed through deterministically from the event" (the model's
  documentation of `MetadataSchemaEntry`): each strategy here passes the event's session, message and user keys on to
  its records, which `RetrieveMemoryRecords` returns in each record's `metadata`. The model does not say which event's
  values a record drawn from several events keeps; that is for the service to show.

The Strands integration (`AgentCoreMemorySessionManager`) ships in the separate `bedrock-agentcore` package, which
this workbook does not install; these builders make the same service calls, and tests check them against botocore's
service model with `Stubber`. They run only with `endpoint = "aws"`: the local endpoint has no AgentCore.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from companion.memory.lineage import LineageRecord

LINEAGE_PREFIX = "lineage."
"""Each lineage field is one metadata key: `lineage.session_id`, `lineage.messages`, ..."""

METADATA_VALUE = re.compile(r"[a-zA-Z0-9\s._:/=+@-]*")
"""The pattern of a metadata value (and key) in the service model (`MetadataValueStringValueString`, `MetadataKey`)."""
METADATA_VALUE_MAX = 256  # characters in one event metadata value (`MetadataValueStringValueString`)
METADATA_KEYS_MAX = 15  # keys in one event's metadata (`MetadataMap`)
LISTS = ("messages", "message_ids", "parents")  # the record's list fields, written as space-separated values

RECORD_LINEAGE = {  # the event's lineage keys each strategy passes on to the records it extracts
    "facts": ("session_id", "messages", "message_ids", "user"),
    "preferences": ("session_id", "messages", "message_ids", "user"),
    "summaries": ("session_id", "user"),  # a summary folds a whole session: one event's messages would not name it
}


def record_schema(fields: tuple[str, ...]) -> dict[str, Any]:
    """A strategy's `memoryRecordSchema`: these lineage keys copied from the event into each record it extracts."""
    return {"metadataSchema": [{"key": LINEAGE_PREFIX + field, "type": "STRING", "extractionType": "STRICTLY_CONSISTENT"}
                               for field in fields]}


def create_memory_request(name: str, *, expiry_days: int = 30) -> dict[str, Any]:
    """A memory resource with the three built-in strategies, each writing to a per-user namespace and passing the
    events' lineage on to its records (`RECORD_LINEAGE`)."""
    return {
        "name": name,
        "description": "Workbook notebook 12: facts, preferences and session summaries per user.",
        "eventExpiryDuration": expiry_days,
        "memoryStrategies": [
            {"semanticMemoryStrategy": {"name": "facts", "namespaces": ["/users/{actorId}/facts"],
                                        "memoryRecordSchema": record_schema(RECORD_LINEAGE["facts"])}},
            {"userPreferenceMemoryStrategy": {"name": "preferences", "namespaces": ["/users/{actorId}/preferences"],
                                              "memoryRecordSchema": record_schema(RECORD_LINEAGE["preferences"])}},
            {"summaryMemoryStrategy": {"name": "summaries", "namespaces": ["/users/{actorId}/sessions/{sessionId}"],
                                       "memoryRecordSchema": record_schema(RECORD_LINEAGE["summaries"])}},
        ],
    }


def event_metadata(origin: LineageRecord | Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """A lineage record as CreateEvent `metadata`: one `lineage.<field>` key per field that is set, lists joined by
    spaces. Raises ValueError for a value the service would refuse (over 256 characters, or a character outside its
    pattern), naming the key."""
    data = origin.to_dict() if isinstance(origin, LineageRecord) else LineageRecord.from_dict(origin).to_dict()
    metadata: dict[str, dict[str, str]] = {}
    for field, value in data.items():
        if value is None or value == []:
            continue
        text = " ".join(map(str, value)) if isinstance(value, list) else str(value)
        key = LINEAGE_PREFIX + field
        if len(text) > METADATA_VALUE_MAX or not METADATA_VALUE.fullmatch(text):
            raise ValueError(f"event metadata {key!r} = {text!r}: AgentCore takes at most {METADATA_VALUE_MAX} "
                             f"characters from {METADATA_VALUE.pattern}")
        metadata[key] = {"stringValue": text}
    if len(metadata) > METADATA_KEYS_MAX:
        raise ValueError(f"{len(metadata)} metadata keys: AgentCore takes at most {METADATA_KEYS_MAX} per event")
    return metadata


def lineage_from_metadata(metadata: Mapping[str, Any] | None, derived: str | None = None) -> dict[str, Any] | None:
    """The lineage in an event's or a record's `metadata` (the `lineage.` keys), as a record's JSON form; `derived`
    fills in how it was derived when the metadata does not say (a record a strategy extracted). None: no lineage."""
    fields: dict[str, Any] = {}
    for key, value in (metadata or {}).items():
        if not key.startswith(LINEAGE_PREFIX):
            continue
        field = key.removeprefix(LINEAGE_PREFIX)
        text = value.get("stringValue")
        if text is None and value.get("stringListValue") is not None:
            text = " ".join(value["stringListValue"])
        if text is None:
            continue
        words = text.split()
        fields[field] = [int(w) for w in words] if field == "messages" else words if field in LISTS else text
    if not fields:
        return None
    if "derived" not in fields and derived is not None:
        fields["derived"] = derived
    return fields


def create_event_request(memory_id: str, actor_id: str, session_id: str, turns: list[tuple[str, str]],
                         when: datetime, origin: LineageRecord | Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One event holding a turn's messages: [(role, text)], role USER / ASSISTANT; with `origin`, the messages' lineage
    in the event's `metadata` (its time, when it has none, the event's)."""
    request: dict[str, Any] = {
        "memoryId": memory_id,
        "actorId": actor_id,
        "sessionId": session_id,
        "eventTimestamp": when,
        "payload": [{"conversational": {"role": role.upper(), "content": {"text": text}}} for role, text in turns],
    }
    if origin is not None:
        record = origin if isinstance(origin, LineageRecord) else LineageRecord.from_dict(origin)
        request["metadata"] = event_metadata(record if record.at else record.at_time(when))
    return request


def retrieve_request(memory_id: str, actor_id: str, query: str, k: int = 3) -> dict[str, Any]:
    """The k records nearest to `query` among one user's extracted facts."""
    return {"memoryId": memory_id, "namespace": f"/users/{actor_id}/facts",
            "searchCriteria": {"searchQuery": query, "topK": k}}


def remember_turn(client: Any, memory_id: str, actor_id: str, session_id: str, user_text: str, reply: str,
                  when: datetime, origin: LineageRecord | Mapping[str, Any] | None = None) -> str:
    """Write one turn as an event (with `origin`, the lineage of its two messages, usually derived "dump");
    returns its event id. Extraction into records happens later, in the service."""
    answer = client.create_event(**create_event_request(memory_id, actor_id, session_id,
                                                        [("USER", user_text), ("ASSISTANT", reply)], when, origin))
    return answer["event"]["eventId"]


def recall(client: Any, memory_id: str, actor_id: str, query: str,
           k: int = 3) -> list[tuple[str, float | None, dict[str, Any] | None]]:
    """The texts, scores and lineages (from each record's `metadata`, None without one) of the records the service
    returns for `query`."""
    answer = client.retrieve_memory_records(**retrieve_request(memory_id, actor_id, query, k))
    return [(record["content"]["text"], record.get("score"), lineage_from_metadata(record.get("metadata"), "extraction"))
            for record in answer["memoryRecordSummaries"]]


def request_problems(service: str, operation: str, request: Mapping[str, Any]) -> list[str]:
    """Where `request` breaks the input shape of `operation` in botocore's model of `service` (for example
    "bedrock-agentcore", "dynamodb"), at every depth: names the model does not know, required members missing and
    wrong types (botocore's own `ParamValidator`, which Stubber uses too), then what that validator leaves out:
    lengths, counts and ranges above their maximum, patterns and enums. An empty list: the model takes it as is."""
    import botocore.session
    from botocore.validate import ParamValidator

    shape = botocore.session.get_session().get_service_model(service).operation_model(operation).input_shape
    report = ParamValidator().validate(request, shape)
    problems = [line.strip() for line in report.generate_report().splitlines()] if report.has_errors() else []

    def size(meta: Mapping[str, Any], length: int, where: str, what: str) -> None:
        if length > meta.get("max", length):  # the minimum is ParamValidator's
            problems.append(f"{where}: {length} {what}, at most {meta['max']}")

    def walk(shape: Any, value: Any, where: str) -> None:
        meta, kind = shape.metadata, shape.type_name
        if kind == "structure" and isinstance(value, Mapping):
            for name, member in shape.members.items():
                if name in value:
                    walk(member, value[name], f"{where}.{name}")
        elif kind == "list" and isinstance(value, list | tuple):
            size(meta, len(value), where, "items")
            for i, item in enumerate(value):
                walk(shape.member, item, f"{where}[{i}]")
        elif kind == "map" and isinstance(value, Mapping):
            size(meta, len(value), where, "keys")
            for key, item in value.items():
                walk(shape.key, key, f"{where} key {key!r}")
                walk(shape.value, item, f"{where}[{key!r}]")
        elif kind == "string" and isinstance(value, str):
            size(meta, len(value), where, "characters")
            if "pattern" in meta and not re.fullmatch(meta["pattern"], value):
                problems.append(f"{where}: {value!r} outside {meta['pattern']}")
            if shape.enum and value not in shape.enum:
                problems.append(f"{where}: {value!r} not in {shape.enum}")
        elif kind in ("integer", "long") and isinstance(value, int) and not isinstance(value, bool):
            if value > meta.get("max", value):
                problems.append(f"{where}: {value}, at most {meta['max']}")

    walk(shape, request, operation)
    return problems
