"""Amazon Bedrock AgentCore Memory, the managed alternative, on plain boto3 (`bedrock-agentcore-control` to create a
memory resource, `bedrock-agentcore` to write events and retrieve records).

What it stores: *events* (the turns of a conversation, per actor and session: short-term memory, kept for
`eventExpiryDuration` days) and *memory records* that its strategies extract from those events in the background
(long-term memory): `semanticMemoryStrategy` keeps facts, `userPreferenceMemoryStrategy` preferences,
`summaryMemoryStrategy` a summary per session. Records are found by meaning with `RetrieveMemoryRecords` in a
namespace such as `/users/<actorId>/facts`.

The Strands integration (`AgentCoreMemorySessionManager`) ships in the separate `bedrock-agentcore` package, which
this workbook does not install; these builders make the same service calls, and tests check them against botocore's
service model with `Stubber`. They run only with `endpoint = "aws"`: the local endpoint has no AgentCore.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any


def create_memory_request(name: str, *, expiry_days: int = 30) -> dict[str, Any]:
    """A memory resource with the three built-in strategies, each writing to a per-user namespace."""
    return {
        "name": name,
        "description": "Workbook notebook 11: facts, preferences and session summaries per user.",
        "eventExpiryDuration": expiry_days,
        "memoryStrategies": [
            {"semanticMemoryStrategy": {"name": "facts", "namespaces": ["/users/{actorId}/facts"]}},
            {"userPreferenceMemoryStrategy": {"name": "preferences", "namespaces": ["/users/{actorId}/preferences"]}},
            {"summaryMemoryStrategy": {"name": "summaries", "namespaces": ["/users/{actorId}/sessions/{sessionId}"]}},
        ],
    }


def create_event_request(memory_id: str, actor_id: str, session_id: str, turns: list[tuple[str, str]],
                         when: datetime) -> dict[str, Any]:
    """One event holding a turn's messages: [(role, text)], role USER / ASSISTANT."""
    return {
        "memoryId": memory_id,
        "actorId": actor_id,
        "sessionId": session_id,
        "eventTimestamp": when,
        "payload": [{"conversational": {"role": role.upper(), "content": {"text": text}}} for role, text in turns],
    }


def retrieve_request(memory_id: str, actor_id: str, query: str, k: int = 3) -> dict[str, Any]:
    """The k records nearest to `query` among one user's extracted facts."""
    return {"memoryId": memory_id, "namespace": f"/users/{actor_id}/facts",
            "searchCriteria": {"searchQuery": query, "topK": k}}


def remember_turn(client: Any, memory_id: str, actor_id: str, session_id: str, user_text: str, reply: str,
                  when: datetime) -> str:
    """Write one turn as an event; returns its event id. Extraction into records happens later, in the service."""
    answer = client.create_event(**create_event_request(memory_id, actor_id, session_id,
                                                        [("USER", user_text), ("ASSISTANT", reply)], when))
    return answer["event"]["eventId"]


def recall(client: Any, memory_id: str, actor_id: str, query: str, k: int = 3) -> list[tuple[str, float | None]]:
    """The texts (and scores) of the records the service returns for `query`."""
    answer = client.retrieve_memory_records(**retrieve_request(memory_id, actor_id, query, k))
    return [(record["content"]["text"], record.get("score")) for record in answer["memoryRecordSummaries"]]
