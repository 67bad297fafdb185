"""Long-term memory in DynamoDB: a Strands `MemoryStore` (the protocol of notebook 06) on plain boto3.

One table, one partition per user (`pk` = user id, `sk` = `mem#<hash of the text>`, so the same text is kept once).
Each item holds the text and its embedding twice over:

- `vector_f32`: the float32 vector as 4 x d bytes (Binary). The client-side search reads these back and ranks by
  cosine in numpy: that is what runs on the local endpoint, which does not implement vector search.
- `vector`: the same numbers as a DynamoDB list (written only when `native=True`): the attribute a native vector index
  reads. `search` then sends one `SearchVectors` call and DynamoDB ranks (COSINE scores are distances, 0 = identical).

Each item also records where the memory came from: its lineage (`companion.memory.lineage.LineageRecord`, as every
store of the workbook) in the item attribute `lineage`, a DynamoDB map (`M`) so that expressions can address its fields
(`lineage.session_id`). The same text stated again (the same `sk`) keeps the first lineage and adds the new one to the
list `restated_in`: nothing it descends from is overwritten. `search` returns both in each result's metadata.

Why not the `strands-dynamodb-storage` extra: it searches only with `SearchVectors` and embeds only with Titan, so it
can run neither on the local endpoint nor offline.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import numpy as np
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from companion.memory.lineage import LINEAGE_KEY, LineageRecord, announced_tool_lineage

INDEX_NAME = "memory-vector-idx"
RESTATED_KEY = "restated_in"
"""The item attribute (and search metadata key) that lists the lineage of each later statement of the same text."""


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
        "ProjectionExpression": f"sk, content, {LINEAGE_KEY}, {RESTATED_KEY}",
    }


def lineage_attribute(origin: Mapping[str, Any]) -> dict[str, Any]:
    """A lineage record's JSON form as a DynamoDB map attribute ({"M": ...}; numbers as N, None as NULL)."""
    return TypeSerializer().serialize(dict(origin))


def plain(value: Any) -> Any:
    """A deserialized DynamoDB value as JSON types: whole Decimals as int, others as float (lists and maps through)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | set | tuple):
        return [plain(v) for v in value]
    return value


def item_lineage(item: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """An item's lineage and the lineages of its restatements, as plain dicts (read from the DynamoDB attributes)."""
    read = TypeDeserializer().deserialize
    first = plain(read(item[LINEAGE_KEY])) if LINEAGE_KEY in item else None
    again = plain(read(item[RESTATED_KEY])) if RESTATED_KEY in item else []
    return first, again


def _same_origin(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Two lineages that name the same derivation from the same messages (when each was stamped aside)."""
    return a is not None and b is not None and {k: v for k, v in a.items() if k != "at"} == {
        k: v for k, v in b.items() if k != "at"}


class DynamoDBMemoryStore:
    """A Strands MemoryStore on a DynamoDB table: `add` writes one item, `search` ranks one user's memories."""

    def __init__(self, client: Any, table: str, embedder: Any, user: str, *, native: bool = False,
                 name: str = "dynamodb-memory", max_search_results: int = 5, extraction: Any = None,
                 clock: Callable[[], datetime] | None = None):
        self.name = name  # the five attributes MemoryManager reads
        self.description = "Facts about the user, searched by meaning, kept in DynamoDB."
        self.max_search_results = max_search_results
        self.writable = True
        self.extraction = extraction
        self.client, self.table, self.embedder, self.user, self.native = client, table, embedder, user, native
        self.clock = clock or (lambda: datetime.now(UTC))

    @staticmethod
    def key(content: str) -> str:
        return "mem#" + hashlib.sha256(content.encode()).hexdigest()[:16]

    def origin(self, content: str, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The lineage `add` records for `content`: the one in `metadata["lineage"]` (an extracted fact's, see
        `LineageExtractor`), else the one a `Lineage` hook announced for an add_memory entry, else "add" (the SDK's
        add with no messages known); with this store's user and the time, unless the record names them."""
        given = (metadata or {}).get(LINEAGE_KEY) or announced_tool_lineage(content) or LineageRecord("add").to_dict()
        record = LineageRecord.from_dict({"user": self.user, **given})
        origin = (record if record.at else record.at_time(self.clock())).to_dict()
        origin.update({k: v for k, v in given.items() if k not in origin})  # a caller's own keys, kept
        return origin

    def item(self, content: str, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The item `add` writes for `content`: keys, text, embedding and lineage."""
        vector = np.asarray(self.embedder.embed([content])[0], dtype=np.float32)
        item: dict[str, Any] = {
            "pk": {"S": self.user},
            "sk": {"S": self.key(content)},
            "content": {"S": content},
            "model": {"S": self.embedder.model_id},
            "vector_f32": {"B": vector.tobytes()},
            LINEAGE_KEY: lineage_attribute(self.origin(content, metadata)),
        }
        if self.native:
            item["vector"] = {"L": number_list(vector)}
        return item

    async def add(self, content: str, metadata: dict | None = None) -> str:
        """The SDK's add (the add_memory tool, extraction): see `put`."""
        return self.put(content, metadata)

    def put(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        """One conditional PutItem: the text, its embedding and its lineage in one item, written only if no item has
        this key. The same text again (the PutItem refused; the refusal returns the stored item) keeps the item and
        its first lineage, and appends the new lineage to `restated_in` with one UpdateItem, unless that derivation
        from those messages is already on record. (The UpdateItem requires the item to exist: a memory deleted in
        between raises ConditionalCheckFailedException rather than leave an item without its text.)"""
        item = self.item(content, metadata)
        try:
            self.client.put_item(TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(sk)",
                                 ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except self.client.exceptions.ConditionalCheckFailedException as refused:
            first, again = item_lineage(refused.response.get("Item") or {})
            if not any(_same_origin(item_lineage(item)[0], known) for known in [first, *again]):
                self.client.update_item(
                    TableName=self.table, Key={"pk": item["pk"], "sk": item["sk"]},
                    UpdateExpression=f"SET {RESTATED_KEY} = list_append(if_not_exists({RESTATED_KEY}, :none), :new)",
                    ConditionExpression="attribute_exists(sk)",
                    ExpressionAttributeValues={":none": {"L": []}, ":new": {"L": [item[LINEAGE_KEY]]}})
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
        k = (options or {}).get("max_search_results") or self.max_search_results
        vector = np.asarray(self.embedder.embed([query])[0], dtype=np.float32)
        if self.native:
            answer = self.client.search_vectors(**search_vectors_request(self.table, self.user, vector, k))
            return [entry(hit["Item"], round(1 - float(hit["Score"]), 4)) for hit in answer["SearchResults"]]
        items = self.items(f"content, vector_f32, {LINEAGE_KEY}, {RESTATED_KEY}")
        if not items:
            return []
        matrix = np.vstack([np.frombuffer(item["vector_f32"]["B"], dtype=np.float32) for item in items])
        scores = matrix @ vector  # unit vectors: dot product = cosine
        best = np.argsort(-scores, kind="stable")[:k]
        return [entry(items[i], round(float(scores[i]), 4)) for i in best]


def entry(item: Mapping[str, Any], score: float) -> Any:
    """A search result: the item's text, with its score and its lineage (and any restatements') in the metadata."""
    from strands.memory import MemoryEntry

    first, again = item_lineage(item)
    metadata: dict[str, Any] = {"score": score}
    if first is not None:
        metadata[LINEAGE_KEY] = first
    if again:
        metadata[RESTATED_KEY] = again
    return MemoryEntry(content=item["content"]["S"], metadata=metadata)


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


class MemorySetup:
    """What notebook 12's memory agents need besides `MemoryManager(stores=[DynamoDBMemoryStore(...)])` and the agent:
    the table (created by :func:`open_memory`), the embedder (notebook 06's, offline), the extraction that writes a
    fact after each call (for an agent that learns), the native-search flag (AWS only), and a metered copy of the
    model per agent (each keeps its own calls, for the checks)."""

    def __init__(self, client: Any, table: str, embedder: Any, native: bool, model: Any) -> None:
        from strands.memory import InvocationTrigger, ModelExtractor

        self.client, self.table, self.embedder, self.native, self._model = client, table, embedder, native, model
        self.extraction = {"trigger": InvocationTrigger(), "extractor": ModelExtractor()}

    def options(self, learn: bool = False) -> dict[str, Any]:
        """The store's other arguments: the embedder and the native flag, and the extraction when `learn`."""
        return {"embedder": self.embedder, "native": self.native, "extraction": self.extraction if learn else None}

    def model(self) -> Any:
        """The model, metered: a new `MeteredModel` per call, so each agent keeps its own calls."""
        from companion.models.metering import MeteredModel

        return MeteredModel(self._model)

    def stored(self, user: str) -> list[dict[str, str]]:
        """Each memory item in `user`'s partition as the table holds it, read with Query: its partition key, its sort
        key and its text (the vector left out), so a reader sees where a memory lives and what was extracted."""
        store = DynamoDBMemoryStore(self.client, self.table, self.embedder, user=user)
        return [{"pk": item["pk"]["S"], "sk": item["sk"]["S"], "content": item["content"]["S"]}
                for item in store.items()]

    def counts(self, *users: str) -> dict[str, int]:
        """The memories in each user's partition, read with Query."""
        return {user: len(self.stored(user)) for user in users}


def open_memory(client: Any, table: str, endpoint: str, model: Any) -> MemorySetup:
    """Notebook 12's memory table, created (native vector index on AWS only), and the :class:`MemorySetup` its
    stores and agents share."""
    from companion.models.embeddings import make_embedder

    embedder = make_embedder("minilm")
    native = endpoint == "aws"
    create_table(client, table, embedder.dimensions, native=native)
    return MemorySetup(client, table, embedder, native, model)
