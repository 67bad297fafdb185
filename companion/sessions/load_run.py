"""Many users at once: N users x M turns through a thread pool, each user on an S3 session of their own; every
session read back from the bucket afterwards and checked for other users' messages. And what that costs on AWS.

Each user's prompts carry a tag `U<user>T<turn>` (U007T03), so a message that reached the wrong session is found by
reading the session, whatever the model replied.
"""

from __future__ import annotations

import math
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from companion.sessions.local_aws import RequestLog, percentile
from companion.sessions.s3_sessions import objects_with_sizes, read_session_messages, session_manager, texts

TAG = re.compile(r"U(\d{3,})T(\d{2,})")
READS = {"GetObject", "ListObjectsV2", "HeadObject"}
WRITES = {"PutObject"}


def user_id(user: int) -> str:
    return f"user-{user:03d}"


def prompt(user: int, turn: int) -> str:
    return f"My ticket for today is U{user:03d}T{turn:02d}."


@dataclass
class LoadRun:
    users: int
    turns: int
    workers: int
    seconds: float
    calls: list[tuple[str, str, float, bool]]

    @property
    def turns_per_second(self) -> float:
        return self.users * self.turns / self.seconds

    def latency_ms(self, operations: set[str], q: float) -> float:
        return 1000 * percentile([s for _, op, s, _ in self.calls if op in operations], q)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for _, operation, _, _ in self.calls:
            out[operation] = out.get(operation, 0) + 1
        return dict(sorted(out.items()))


def run_load(users: int, turns: int, *, workers: int, model_factory: Any, bucket: str, boto_session: Any,
             endpoint_url: str | None, log: RequestLog) -> LoadRun:
    """Every user in its own thread-pool task: one agent on `user-NNN`'s S3 session, `turns` prompts in a row.
    `log` must be attached to `boto_session`; it is cleared first and holds this run's calls afterwards."""
    from strands import Agent

    def one_user(user: int) -> None:
        agent = Agent(model=model_factory(), session_manager=session_manager(user_id(user), bucket, boto_session, endpoint_url),
                      callback_handler=None)
        for turn in range(turns):
            agent(prompt(user, turn))

    log.clear()
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="load-user") as pool:
        list(pool.map(one_user, range(users)))  # re-raises the first failure
    seconds = time.perf_counter() - started
    return LoadRun(users, turns, workers, seconds, list(log.calls))


@dataclass
class ReadBack:
    """What every session holds, read object by object from the bucket (not through the SDK)."""

    sessions: int
    messages: int
    per_session: dict[str, int]
    foreign_tags: int  # tags of another user found in a session: must be 0
    missing_turns: int  # this user's prompts not found in its session: must be 0
    bytes_total: int


def read_back(s3: Any, bucket: str, users: int, turns: int, workers: int) -> ReadBack:
    def one(user: int) -> tuple[str, int, int, int]:
        messages = read_session_messages(s3, bucket, user_id(user))
        foreign, seen = 0, set()
        for message in messages:
            for owner, turn in TAG.findall(texts(message)):
                if int(owner) != user:
                    foreign += 1
                elif message["role"] == "user":
                    seen.add(int(turn))
        return user_id(user), len(messages), foreign, len(set(range(turns)) - seen)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="read-back") as pool:
        rows = list(pool.map(one, range(users)))
    sizes = objects_with_sizes(s3, bucket)
    return ReadBack(
        sessions=len({key.split("/")[0] for key in sizes if key.startswith("session_user-")}),
        messages=sum(row[1] for row in rows),
        per_session={row[0]: row[1] for row in rows},
        foreign_tags=sum(row[2] for row in rows),
        missing_turns=sum(row[3] for row in rows),
        bytes_total=sum(size for key, size in sizes.items() if key.startswith("session_user-")),
    )


# --- cost at scale, at named and dated prices ---------------------------------------------------------------------

# Amazon S3 Standard and DynamoDB on-demand, us-east-1, as listed on aws.amazon.com/s3/pricing and
# aws.amazon.com/dynamodb/pricing in 2025 (DynamoDB on-demand after its 1 November 2024 price reduction). Prices
# change: check the pages before budgeting.
PRICES = {
    "source": "AWS price pages, us-east-1, Standard / on-demand, as listed in 2025",
    "s3_put_list_per_1000": 0.005,  # PUT, COPY, POST, LIST
    "s3_get_other_per_1000": 0.0004,  # GET, SELECT, HEAD and all other requests (DELETE is free)
    "s3_gb_month": 0.023,  # first 50 TB
    "ddb_wru_per_million": 0.625,
    "ddb_rru_per_million": 0.125,
    "ddb_gb_month": 0.25,
}
S3_CLASS = {"PutObject": "put_list", "ListObjectsV2": "put_list", "GetObject": "get_other", "HeadObject": "get_other",
            "DeleteObject": "free"}


def s3_cost_rows(counts: dict[str, int], users: int, stored_bytes: int, scale_users: int = 1000) -> list[dict[str, Any]]:
    """Requests and storage of the run scaled to `scale_users` users doing the same day, priced at PRICES."""
    rows = []
    factor = scale_users / users
    for operation, n in counts.items():
        kind = S3_CLASS.get(operation, "get_other")
        price = 0.0 if kind == "free" else PRICES[f"s3_{kind}_per_1000"]
        scaled = n * factor
        rows.append({"item": f"S3 {operation}", "in this run": n, f"per {scale_users:,} users per day": round(scaled),
                     "unit price (USD)": f"{price} per 1,000", "USD per day": round(scaled / 1000 * price, 4)})
    gb = stored_bytes * factor / 1e9
    rows.append({"item": "S3 storage of the sessions (KB)", "in this run": round(stored_bytes / 1e3),
                 f"per {scale_users:,} users per day": round(gb * 1e6),
                 "unit price (USD)": f"{PRICES['s3_gb_month']} per GB-month",
                 "USD per day": round(gb * PRICES["s3_gb_month"] / 30, 6)})
    return rows


def request_cost_rows(counts: dict[str, int], users: int, scale_users: int = 1000) -> list[dict[str, Any]]:
    """The run's S3 requests per operation, scaled to `scale_users` users doing the same day, priced at PRICES
    (storage aside: :func:`s3_cost_rows` adds it)."""
    rows = s3_cost_rows(counts, users, 0, scale_users)
    return [row for row in rows if not row["item"].startswith("S3 storage")]


def dynamodb_units(item_bytes: int) -> int:
    """Write request units for one item of that size (1 KB each, rounded up)."""
    return max(1, math.ceil(item_bytes / 1024))


def dynamodb_item_bytes(item: dict[str, dict[str, Any]]) -> int:
    """An item's size as DynamoDB counts it, roughly: attribute names plus values (strings, numbers, binaries, lists)."""

    def value_size(value: dict[str, Any]) -> int:
        (kind, raw), = value.items()
        if kind == "S":
            return len(raw.encode())
        if kind == "N":
            return len(raw.lstrip("-").replace(".", "")) // 2 + 1
        if kind == "B":
            return len(raw)
        if kind == "L":
            return 3 + sum(1 + value_size(v) for v in raw)
        if kind == "M":
            return 3 + sum(len(k) + 1 + value_size(v) for k, v in raw.items())
        return 1

    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


class InFlight:
    """Counts the blocks running at the same moment, from any thread: `with busy:` around one user's day; `most` is
    the largest number that were inside at once (how many users were served together)."""

    def __init__(self) -> None:
        import threading

        self.now = 0
        self.most = 0
        self._lock = threading.Lock()

    def __enter__(self) -> InFlight:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self.now -= 1
