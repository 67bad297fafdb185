"""Sessions in S3 with the SDK's `S3SessionManager`: one process's phase, the objects of a session, a lock that S3
itself provides (a conditional write), and a turn that is either stored whole or not at all.

Notebook 12 builds its `S3SessionManager`s itself, because those lines are the lesson; it runs :func:`phase` in a new
process with :func:`run_phase`, the writers with :func:`run_writers` (:func:`s3_turn_lock` around each turn, or none),
and shows its tables with :func:`layout_rows` and :func:`race_row`.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from companion.sessions.local_aws import short_error
from companion.sessions.restart_runner import PhaseFailed, PhaseResult, _package_parent


def session_manager(session_id: str, bucket: str, boto_session: Any, endpoint_url: str | None, prefix: str = "") -> Any:
    """The SDK's S3SessionManager with the workbook's client limits (timeouts, bounded retries, path-style URLs).
    The session id is checked first, as for :func:`run_phase` (no separators, no "..", no line breaks)."""
    from strands.session import S3SessionManager

    from companion.sessions.local_aws import client_config
    from companion.support.workspace import check_session_id

    check_session_id(session_id)

    return S3SessionManager(session_id=session_id, bucket=bucket, prefix=prefix, boto_session=boto_session,
                            boto_client_config=client_config(local=endpoint_url is not None), endpoint_url=endpoint_url)


def phase(prompt: str, backend: str, session_id: str, bucket: str, endpoint_url: str | None) -> None:
    """One process's whole life: an agent on an S3 session, one prompt, print, exit (notebook 01's phase, on S3)."""
    import boto3
    from strands import Agent

    from companion.models.backends import make_model

    agent = Agent(
        model=make_model(backend),
        session_manager=session_manager(session_id, bucket, boto3.Session(), endpoint_url),
        callback_handler=None,
    )
    print(f"messages restored: {len(agent.messages)}")
    result = agent(prompt)
    print(f"reply: {str(result).strip()}")
    print(f"messages now: {len(agent.messages)}")


def run_phase(prompt: str, *, backend: str, session_id: str, bucket: str, local: Any, timeout: float = 120) -> PhaseResult:
    """Run :func:`phase` in a new Python process that reaches the same endpoint (fake credentials when local)."""
    from companion.sessions.local_aws import child_environment
    from companion.support.workspace import check_session_id

    args = [sys.executable, "-m", "companion.sessions.s3_sessions", "--backend", backend, "--session-id", check_session_id(session_id),
            "--bucket", bucket]
    if local is not None:
        args += ["--endpoint-url", local.url]
    env = dict(child_environment(local), PYTHONPATH=_package_parent(), PYTHONIOENCODING="utf-8")
    process = subprocess.Popen(args + ["--", prompt], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        raise PhaseFailed(f"The phase process did not finish within {timeout} s.\n{stderr}") from None
    if process.returncode != 0:
        raise PhaseFailed(f"The phase process exited with status {process.returncode}:\n{stderr}")
    return PhaseResult(process.pid, process.returncode, stdout, stderr)


# --- what a bucket holds ------------------------------------------------------------------------------------------


def objects_with_sizes(s3: Any, bucket: str, prefix: str = "") -> dict[str, int]:
    """Every object under `prefix`: key (without the prefix) -> size in bytes, in the order S3 lists them."""
    out: dict[str, int] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            out[item["Key"][len(prefix):]] = item["Size"]
    return out


def _message_index(key: str) -> int:
    return int(re.search(r"message_(\d+)\.json$", key).group(1))


def read_session_messages(s3: Any, bucket: str, session_id: str, prefix: str = "", agent_id: str = "default") -> list[dict]:
    """The messages of one session, read object by object from the bucket (not through the SDK), in index order.
    The session and agent ids are checked first: a ".." or a line break would read another key."""
    import json

    from companion.support.workspace import check_session_id

    check_session_id(session_id)
    check_session_id(agent_id)
    base = f"{prefix}session_{session_id}/agents/agent_{agent_id}/messages/"
    keys = sorted(objects_with_sizes(s3, bucket, base), key=_message_index)
    return [json.loads(s3.get_object(Bucket=bucket, Key=base + key)["Body"].read())["message"] for key in keys]


def texts(message: dict) -> str:
    return " ".join(block["text"] for block in message["content"] if "text" in block)


# --- two writers: the race, and a lock S3 provides --------------------------------------------------------------


class LockTimeout(TimeoutError):
    """Another writer held the session's lock for longer than the wait allowed."""


@contextmanager
def s3_turn_lock(s3: Any, bucket: str, key: str, owner: str, wait: float = 30.0) -> Iterator[dict[str, int]]:
    """Hold a lock object in S3 for the block: created only if absent (`IfNoneMatch="*"`, HTTP 412 otherwise),
    deleted at the end. Yields {"refused": n}, the conditional writes that found the lock taken."""
    from botocore.exceptions import ClientError

    seen = {"refused": 0}
    deadline = time.monotonic() + wait
    while True:
        try:
            s3.put_object(Bucket=bucket, Key=key, Body=owner.encode(), IfNoneMatch="*")
            break
        except ClientError as error:
            if error.response["Error"]["Code"] not in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise
            seen["refused"] += 1
            if time.monotonic() > deadline:
                raise LockTimeout(f"{owner}: the lock {key} was still held after {wait:.0f} s") from None
            time.sleep(0.05)
    try:
        yield seen
    finally:
        s3.delete_object(Bucket=bucket, Key=key)


@dataclass
class WriterResult:
    name: str
    restored: int
    now: int
    refused: int
    order: int  # 1 for the writer that started its turn first (with the lock: got the lock first)


def run_writers(prompts: dict[str, str], *, model_factory: Any, session_id: str, bucket: str, boto_session: Any,
                endpoint_url: str | None, lock: bool, s3: Any) -> dict[str, WriterResult]:
    """One thread per prompt, all at once, on one S3 session. Without the lock they meet at a barrier after
    restoring (so both restore before either writes, on every run); with it, each holds the S3 lock for
    restore + turn."""
    from contextlib import nullcontext

    from strands import Agent

    barrier = threading.Barrier(len(prompts), timeout=60)
    results: dict[str, WriterResult] = {}
    errors: list[BaseException] = []
    started = itertools.count(1)  # next() on a count is atomic in CPython: one number per writer

    def writer(name: str, prompt: str) -> None:
        try:
            barrier.wait()  # every writer is ready before any touches the session
            guard = s3_turn_lock(s3, bucket, f"locks/session_{session_id}.lock", name) if lock else nullcontext({"refused": 0})
            with guard as seen:
                order = next(started)
                agent = Agent(model=model_factory(), session_manager=session_manager(session_id, bucket, boto_session, endpoint_url),
                              callback_handler=None)
                restored = len(agent.messages)
                if not lock:
                    barrier.wait()  # the race: every writer has restored, none has written
                agent(prompt)
            results[name] = WriterResult(name, restored, len(agent.messages), seen["refused"], order)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)
            barrier.abort()

    threads = [threading.Thread(target=writer, args=item, name=f"writer-{item[0]}") for item in prompts.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return dict(sorted(results.items()))


# --- a turn that is stored whole or not at all -------------------------------------------------------------------


@dataclass
class TurnOutcome:
    ok: bool
    error: str
    seconds: float
    removed: int  # message objects of the failed turn deleted again


def guarded_turn(agent: Any, prompt: str, s3: Any, bucket: str, session_id: str, prefix: str = "") -> TurnOutcome:
    """Run one turn; if it fails, delete the message objects it wrote, so the session keeps whole turns only.

    The SDK writes the user's message before the model call and the reply after it: a failure in between would
    otherwise leave a question without its answer in the session. The cleanup is itself a set of S3 calls: it
    holds only while they succeed (they share the PUT's throttling), and a killed process never runs it; agent.json,
    rewritten during the turn, is not reverted."""
    from companion.support.workspace import check_session_id

    check_session_id(session_id)
    base = f"{prefix}session_{session_id}/agents/agent_default/messages/"
    before = set(objects_with_sizes(s3, bucket, base))
    kept = len(agent.messages)
    started = time.perf_counter()
    try:
        agent(prompt)
        return TurnOutcome(True, "", time.perf_counter() - started, 0)
    except Exception as error:  # noqa: BLE001 - the outcome says which
        seconds = time.perf_counter() - started
        written = [key for key in objects_with_sizes(s3, bucket, base) if key not in before]
        for key in written:
            s3.delete_object(Bucket=bucket, Key=base + key)
        del agent.messages[kept:]  # the agent in memory forgets the failed turn too
        return TurnOutcome(False, short_error(error), seconds, len(written))


# --- notebook 12's tables ---------------------------------------------------------------------------------------

TIMING_FIELDS = ("timeToFirstByteMs",)  # the SDK writes it into a reply only when it measured 1 ms or more


def differing(a: Any, b: Any, path: str = "") -> list[str]:
    """The names of the fields whose values differ between two JSON documents (the innermost key of each)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [p for k in sorted(set(a) | set(b)) for p in differing(a.get(k), b.get(k), k)]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for x, y in zip(a, b) for p in differing(x, y, path)]
    return [] if a == b else [path]


def layout_rows(s3: Any, bucket: str, session_id: str, files_dir: Any) -> list[dict[str, Any]]:
    """One row per key of a session in S3 or file of the same session on disk: where it is, and which fields differ
    (by name, the timing field aside)."""
    import json
    from pathlib import Path

    from companion.support.workspace import check_session_id

    prefix = f"session_{check_session_id(session_id)}/"
    folder = Path(files_dir) / prefix
    in_s3 = objects_with_sizes(s3, bucket, prefix)
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    rows = []
    for key in sorted(set(in_s3) | on_disk):
        row: dict[str, Any] = {"key": key, "in S3": key in in_s3, "on disk": key in on_disk}
        if key in in_s3 and key in on_disk:
            a = json.loads(s3.get_object(Bucket=bucket, Key=prefix + key)["Body"].read())
            b = json.loads((folder / key).read_text(encoding="utf-8"))
            fields = sorted({p for p in differing(a, b) if p not in TIMING_FIELDS})
            row["fields that differ"] = ", ".join(fields) or "none"
        rows.append(row)
    return rows


def race_row(s3: Any, bucket: str, session_id: str, results: dict[str, WriterResult],
             prompts: dict[str, str]) -> dict[str, Any]:
    """One row for a session that writers shared: what each writer restored (as it reported), the messages written
    (the seeded ones and each writer's), the messages and writer prompts in S3 now (read from the bucket), and the
    turns lost."""
    stored = read_session_messages(s3, bucket, session_id)
    said = [texts(m) for m in stored if m["role"] == "user"]
    seeded = min(result.restored for result in results.values())
    written = seeded + sum(result.now - result.restored for result in results.values())
    return {"session": session_id, "each writer restored": sorted(r.restored for r in results.values()),
            "messages written": written, "messages in S3": len(stored),
            "writer prompts in S3": f"{sum(p in said for p in prompts.values())} of {len(prompts)}",
            "turns lost": (written - len(stored)) // 2}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="One phase of the restart test, on S3.")
    parser.add_argument("--backend", default="offline")
    parser.add_argument("--session-id", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--endpoint-url", default=None)
    parser.add_argument("prompt")
    args = parser.parse_args(argv)
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    from companion.sessions.local_aws import name_connections, port_of, record_connections, recorded_addresses

    hosts = record_connections()
    phase(args.prompt, args.backend, args.session_id, args.bucket, args.endpoint_url)
    print(f"hosts connected: {sorted(set(hosts))}")
    names = {port_of(args.endpoint_url): "S3"} if args.endpoint_url else {}
    bedrock = local_bedrock_url(args.backend)
    if bedrock:  # this process's own local Bedrock endpoint, started by make_model
        names[port_of(bedrock)] = "its own Bedrock"
    print(f"connected to: {name_connections(recorded_addresses(), names)}")


def local_bedrock_url(backend: str | None) -> str | None:
    """The URL of this process's local Bedrock endpoint when the model goes through it, else None."""
    from companion.models.backends import resolve_backend, resolve_bedrock_endpoint

    if resolve_backend(backend) != "bedrock" or resolve_bedrock_endpoint() != "local":
        return None
    from companion.models.bedrock_local import local_bedrock

    return local_bedrock().url


if __name__ == "__main__":
    main()


def writers_row(s3: Any, bucket: str, session_id: str, results: dict[str, WriterResult],
                prompts: dict[str, str]) -> dict[str, Any]:
    """One row for a session that writers shared, each count saying what it counts: the messages seeded before the
    writers came (the fewest any writer restored), what each writer restored (as it reported), the messages the
    writers wrote (seeded ones excluded), the messages in S3 now (read from the bucket, seeded ones included), the
    writer prompts among them, and the turns lost."""
    stored = read_session_messages(s3, bucket, session_id)
    said = [texts(m) for m in stored if m["role"] == "user"]
    restored = sorted(result.restored for result in results.values())
    seeded = restored[0] if restored else 0
    wrote = sum(result.now - result.restored for result in results.values())
    return {"session": session_id, "seeded": seeded, "each writer restored": restored, "writers wrote": wrote,
            "in S3": len(stored), "writer prompts in S3": f"{sum(p in said for p in prompts.values())} of {len(prompts)}",
            "turns lost": (seeded + wrote - len(stored)) // 2}


def compare_rows(s3: Any, bucket: str, session_id: str, files_dir: Any) -> list[dict[str, Any]]:
    """:func:`layout_rows` in two columns: each key, and the fields that differ between its object in S3 and its file
    on disk (or where it is missing)."""
    rows = []
    for row in layout_rows(s3, bucket, session_id, files_dir):
        if row["in S3"] and row["on disk"]:
            differ = row["fields that differ"]
        else:
            differ = "only in S3" if row["in S3"] else "only on disk"
        rows.append({"key": row["key"], "fields that differ, S3 vs disk": differ})
    return rows


def shared_session_row(s3: Any, bucket: str, session_id: str, results: dict[str, WriterResult],
             prompts: dict[str, str]) -> dict[str, Any]:
    """:func:`writers_row` with each count named for what it counts, and the writers that were refused with 412 at
    least once before they got the lock (as they reported; 0 without the lock)."""
    row = writers_row(s3, bucket, session_id, results, prompts)
    return {"session": row["session"], "messages seeded": row["seeded"],
            "each writer restored": row["each writer restored"], "messages the writers wrote": row["writers wrote"],
            "messages in S3": row["in S3"], "writer prompts in S3": row["writer prompts in S3"],
            "turns lost": row["turns lost"], "writers that got 412": sum(r.refused > 0 for r in results.values())}


def layout_by_prefix(s3: Any, bucket: str, session_id: str, files_dir: Any) -> list[dict[str, Any]]:
    """:func:`compare_rows` one row per key prefix (the folder on disk): the prefix, its files by name, and the
    fields that differ between each file's object in S3 and its file on disk (a prefix whose files differ in
    different fields, or are missing on one side, gets a row for each)."""
    prefix = f"session_{session_id}/"
    rows: dict[tuple[str, str], list[str]] = {}
    for row in compare_rows(s3, bucket, session_id, files_dir):
        folder, _, name = (prefix + row["key"]).rpartition("/")
        rows.setdefault((folder + "/", row["fields that differ, S3 vs disk"]), []).append(name)
    return [{"prefix": folder, "files": ", ".join(names), "fields that differ, S3 vs disk": differ}
            for (folder, differ), names in sorted(rows.items())]
