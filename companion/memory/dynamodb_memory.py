"""Long-term memory in DynamoDB: a Strands `MemoryStore` (the protocol of notebook 06) on plain boto3.

One table, one partition per user (`pk` = user id, `sk` = `mem#<hash of the text>`, so the same text is kept once).
Each item holds the text and its embedding twice over:

- `vector_f32`: the float32 vector as 4 x d bytes (Binary). The client-side search reads these back and ranks by
  cosine in numpy: that is what runs on the local endpoint, which does not implement vector search.
- `vector`: the same numbers as a DynamoDB list (written only when `native=True`): the attribute a native vector index
  reads. `search` then sends one `SearchVectors` call and DynamoDB ranks (COSINE scores are distances, 0 = identical).

Why not the `strands-dynamodb-storage` extra: it searches only with `SearchVectors` and embeds only with Titan, so it
can run neither on the local endpoint nor offline.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

INDEX_NAME = "memory-vector-idx"


def create_table_request(table: str, dimensions: int, *, native: bool) -> dict[str, Any]:
    """The CreateTable parameters: on-demand (required for vector indexes), with the index when `native`."""
    request: dict[str, Any] = {
        "TableName": table,
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        "BillingMode": "PAY_PER_REQUEST",
    }
    if native:
        request["VectorIndexes"] = [{
            "IndexName": INDEX_NAME,
            "VectorAttribute": {"AttributeName": "vector"},
            "SearchSchema": [{"AttributeName": "pk", "SearchSchemaElementType": "HASH"}],
            "Projection": {"ProjectionType": "ALL"},
            "Dimensions": dimensions,
            "DistanceFunction": "COSINE",
        }]
    return request


def create_table(client: Any, table: str, dimensions: int, *, native: bool) -> None:
    """Create the table (a table of that name that already exists is used as it is) and wait until it is ACTIVE."""
    try:
        client.create_table(**create_table_request(table, dimensions, native=native))
    except client.exceptions.ResourceInUseException:
        pass
    client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 60})


def number_list(vector: np.ndarray) -> list[dict[str, str]]:
    """A float32 vector in DynamoDB list format; each number written so that it reads back as the same float32."""
    return [{"N": repr(float(x))} for x in np.asarray(vector, dtype=np.float32)]


def search_vectors_request(table: str, user: str, vector: np.ndarray, k: int) -> dict[str, Any]:
    """The SearchVectors parameters: the k nearest memories of one user (the index's HASH key)."""
    return {
        "TableName": table,
        "IndexName": INDEX_NAME,
        "SearchVector": number_list(vector),
        "TopK": k,
        "SearchConditionExpression": "pk = :user",
        "ExpressionAttributeValues": {":user": {"S": user}},
        "ProjectionExpression": "sk, content",
    }


class DynamoDBMemoryStore:
    """A Strands MemoryStore on a DynamoDB table: `add` writes one item, `search` ranks one user's memories."""

    def __init__(self, client: Any, table: str, embedder: Any, user: str, *, native: bool = False,
                 name: str = "dynamodb-memory", max_search_results: int = 5):
        self.name = name  # the five attributes MemoryManager reads
        self.description = "Facts about the user, searched by meaning, kept in DynamoDB."
        self.max_search_results = max_search_results
        self.writable = True
        self.extraction = None
        self.client, self.table, self.embedder, self.user, self.native = client, table, embedder, user, native

    @staticmethod
    def key(content: str) -> str:
        return "mem#" + hashlib.sha256(content.encode()).hexdigest()[:16]

    def item(self, content: str, metadata: dict | None = None) -> dict[str, Any]:
        vector = np.asarray(self.embedder.embed([content])[0], dtype=np.float32)
        item: dict[str, Any] = {
            "pk": {"S": self.user},
            "sk": {"S": self.key(content)},
            "content": {"S": content},
            "model": {"S": self.embedder.model_id},
            "vector_f32": {"B": vector.tobytes()},
        }
        if self.native:
            item["vector"] = {"L": number_list(vector)}
        return item

    async def add(self, content: str, metadata: dict | None = None) -> str:
        """One PutItem: the text and its embedding in one item (the same text again overwrites the same item)."""
        item = self.item(content, metadata)
        self.client.put_item(TableName=self.table, Item=item)
        return item["sk"]["S"]

    def items(self, attributes: str | None = None) -> list[dict[str, Any]]:
        """Every memory item of this user (or only the named attributes), read with Query (paginated)."""
        out: list[dict[str, Any]] = []
        projection = {"ProjectionExpression": attributes} if attributes else {}
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table, KeyConditionExpression="pk = :user", ExpressionAttributeValues={":user": {"S": self.user}},
            **projection)
        for page in pages:
            out.extend(page["Items"])
        return out

    async def search(self, query: str, options: dict | None = None) -> list[Any]:
        from strands.memory import MemoryEntry

        k = (options or {}).get("max_search_results") or self.max_search_results
        vector = np.asarray(self.embedder.embed([query])[0], dtype=np.float32)
        if self.native:
            answer = self.client.search_vectors(**search_vectors_request(self.table, self.user, vector, k))
            return [MemoryEntry(content=hit["Item"]["content"]["S"], metadata={"score": round(1 - float(hit["Score"]), 4)})
                    for hit in answer["SearchResults"]]
        items = self.items("content, vector_f32")
        if not items:
            return []
        matrix = np.vstack([np.frombuffer(item["vector_f32"]["B"], dtype=np.float32) for item in items])
        scores = matrix @ vector  # unit vectors: dot product = cosine
        best = np.argsort(-scores, kind="stable")[:k]
        return [MemoryEntry(content=items[i]["content"]["S"], metadata={"score": round(float(scores[i]), 4)}) for i in best]


class CachedEmbedder:
    """The same embedder, remembering each text's vector: the stores compared on one run embed each text once."""

    def __init__(self, embedder: Any):
        self.embedder, self.model_id, self.dimensions = embedder, embedder.model_id, embedder.dimensions
        self._vectors: dict[str, np.ndarray] = {}

    def embed(self, texts: Any) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            self._vectors.update(zip(missing, self.embedder.embed(missing)))
        return np.vstack([self._vectors[t] for t in texts]) if texts else np.zeros((0, self.dimensions), np.float32)
