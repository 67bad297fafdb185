"""Notebook 12's ledger: sessions in S3 and memory in DynamoDB, for many users at once, checked at the endpoint.

The evidence never comes from the lesson's tables or from what the writers reported of themselves:
- the bucket's objects are listed and read again here, with plain `list_objects_v2` and `get_object`;
- every `PutObject` this kernel sent (its key, whether it was conditional, and S3's status) is counted at the wire by
  an `Audit` attached to the boto3 session before any client was made, apart from the lesson's `RequestLog`;
- lost turns are counted from those writes and from the objects S3 kept, not from the writers' `WriterResult`;
- what each memory call received is read at the model (a `MeteredModel`'s `exchanges` in each agent), and the table
  is scanned again with a plain `Scan`;
- the endpoint's acceptance of any key is asked again with a new client, over the whole bucket.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from companion.checks import save_record, texts
from companion.support.ledger import Ledger
from companion.support.messages import message_text

CLAIMS = {
    "C1": "the session manager and the store change; a session id per user keeps users apart; "
          "here, a conditional-write lock you add lost no turn",
    "S1": "S3SessionManager writes the same keys and JSON as FileSessionManager, and a new process restores them",
    "S2": "two users on one session id share it; with a session id per user, every session holds only its owner's "
          "tickets",
    "S3": "two writers that restore one session together lose a turn, and every write succeeds",
    "S4": "in this run, a lock created with IfNoneMatch='*' made the writers take turns, and no turn was lost",
    "S5": "DynamoDBMemoryStore in MemoryManager, one partition per user: Pin's memory reached Pin's new session, "
          "not Ada's",
    "S6": "everything ran on the local endpoint, which accepted a made-up key",
}
FACTS = ("Pin", "42")  # what the lesson's first prompt tells the agent
RESTART = "restart-demo"
SHARED = ("no-lock", "with-lock")
FRONT_DESK = ("front-desk", "U900T00")  # the session id two users shared, and the first user's ticket
STEADY_ASIDE = {"created_at", "updated_at", "tracking_id", "timeToFirstByteMs"}  # new on every write, or timing
TICKET = re.compile(r"U(\d+)T(\d+)")


# --- reading the evidence ----------------------------------------------------------------------------------------


def _objects(s3: Any, bucket: str, prefix: str) -> dict[str, Any]:
    """Every object under `prefix`, listed and read again: key (without the prefix) -> its JSON."""
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            out[item["Key"][len(prefix):]] = json.loads(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
    return out


def _keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


def _index(key: str) -> int:
    return int(re.search(r"message_(\d+)\.json$", key).group(1))


def _messages(objects: dict[str, Any]) -> list[dict[str, Any]]:
    """The message objects of one session, in index order: index, role, text, tracking id."""
    found = [(key, data) for key, data in objects.items() if "/messages/" in key]
    return [{"index": _index(key), "role": data["message"]["role"], "text": message_text(data["message"]),
             "tracking_id": data["message"].get("tracking_id")} for key, data in sorted(found, key=lambda f: _index(f[0]))]


def _users(s3: Any, bucket: str) -> dict[str, list[list[Any]]]:
    """Every user session's messages, read object by object: session id -> [index, role, text] per message."""
    from concurrent.futures import ThreadPoolExecutor

    keys = [k for k in _keys(s3, bucket, "session_user-") if "/messages/" in k]

    def read(key: str) -> tuple[str, list[Any]]:
        message = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())["message"]
        return key.split("/")[0].removeprefix("session_"), [_index(key), message["role"], message_text(message)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        found = list(pool.map(read, keys))
    sessions: dict[str, list[list[Any]]] = {}
    for session_id, row in found:
        sessions.setdefault(session_id, []).append(row)
    return {sid: sorted(rows) for sid, rows in sorted(sessions.items())}


def _puts(audit: Any, bucket: str) -> list[list[Any]]:
    return [[key, conditional, status] for name, key, conditional, status in audit.puts if name == bucket]


def _made_up_key(bucket: str, local: Any) -> dict[str, Any] | None:
    """What the local endpoint answers a client whose key it never issued, asked to list the whole bucket, page by
    page (None on AWS)."""
    if local is None:
        return None
    from companion.sessions.local_aws import boto_session, make_client

    stranger = make_client("s3", local, boto_session(local, access_key="made-up", secret_key="made-up"))
    try:
        pages = stranger.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return {"listed": sum(page["KeyCount"] for page in pages), "error": None}
    except Exception as error:  # noqa: BLE001
        return {"listed": None, "error": type(error).__name__}


def _calls(agent: Any) -> list[dict[str, Any]]:
    return [{"messages": texts(e["messages"]), "reply": e["reply"]} for e in agent.model.exchanges]


def _table(ddb: Any, table: str) -> list[dict[str, Any]]:
    """Every item of the memory table, scanned again: its partition and text."""
    items = []
    for page in ddb.get_paginator("scan").paginate(TableName=table):
        items.extend({"pk": item["pk"]["S"], "content": item["content"]["S"]} for item in page["Items"])
    return sorted(items, key=lambda i: (i["pk"], i["content"]))


def _shared(s3: Any, bucket: str, session_id: str, puts: list[list[Any]]) -> dict[str, Any]:
    """A session the writers shared: its messages read from the bucket, the HTTP status of every PutObject on each of
    its message keys (at the wire), and every PutObject on any of its keys as [file name, status], in order."""
    mine = [[key, status] for key, _, status in puts if key.startswith(f"session_{session_id}/")]
    return {
        "messages": [[m["role"], m["text"]] for m in _messages(_objects(s3, bucket, f"session_{session_id}/"))],
        "puts": {key.rsplit("/", 1)[1]: [status for k, status in mine if k == key]
                 for key in dict.fromkeys(key for key, _ in mine if "/messages/" in key)},
        "writes": [[key.rsplit("/", 1)[1], status] for key, status in mine],
    }


def record(storage: Any, *, bucket: str, memory_table: str, files_dir: Path, recall: Any, users: int, turns: int,
           writer_prompts: dict[str, str], memory_agents: dict[str, Any], backend: str | None,
           workspace_dir: Path) -> dict[str, Any]:
    """The evidence of notebook 12's run.

    `storage` is what `local_aws.open_storage` returned in the setup (its clients, and its `Audit`, attached before
    any client was made); `recall` what the restart process returned; `memory_agents` the agents of the memory
    section by session id ("pin-monday", "pin-tuesday", "ada-tuesday"), each on a `MeteredModel`."""
    from companion.models.backends import resolve_backend
    from companion.sessions.s3_sessions import local_bedrock_url

    s3, ddb, audit, local = storage.s3, storage.ddb, storage.audit, storage.local
    folder = Path(files_dir) / f"session_{RESTART}"
    hosts = sorted(set(audit.hosts))
    puts = _puts(audit, bucket)
    return save_record({
        "local": local is not None,
        "live_model": resolve_backend(backend) == "bedrock" and local_bedrock_url(backend) is None,
        "users": users,
        "turns": turns,
        "kernel_pid": os.getpid(),
        "hosts": hosts,
        "restart": {
            "s3": _objects(s3, bucket, f"session_{RESTART}/"),
            "files": {p.relative_to(folder).as_posix(): json.loads(p.read_text(encoding="utf-8"))
                      for p in sorted(folder.rglob("*.json"))},
            "folders": sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_dir()),
            "process": {"pid": recall.pid, "returncode": recall.returncode, "stdout": recall.stdout},
        },
        "front_desk": [[m["index"], m["role"], m["text"]]
                       for m in _messages(_objects(s3, bucket, f"session_{FRONT_DESK[0]}/"))],
        "sessions": _users(s3, bucket),
        "writers": {
            "prompts": writer_prompts,
            "sessions": {sid: _shared(s3, bucket, sid, puts) for sid in SHARED},
            "lock_writes": [[key, status] for key, conditional, status in puts
                            if conditional and key.startswith("locks/")],
            "locks_left": _keys(s3, bucket, "locks/"),
        },
        "memory": {
            "calls": {name: _calls(agent) for name, agent in memory_agents.items()},
            "items": _table(ddb, memory_table),
        },
        "made_up_key": _made_up_key(bucket, local),
    }, workspace_dir)


# --- deciding --------------------------------------------------------------------------------------------------


def _steady(data: Any) -> Any:
    """A session object without what is new on every write (times, random ids) and the SDK's timing field."""
    if isinstance(data, dict):
        return {k: _steady(v) for k, v in data.items() if k not in STEADY_ASIDE}
    return [_steady(v) for v in data] if isinstance(data, list) else data


def _has_facts(text: str) -> bool:
    return all(fact in text for fact in FACTS)


def _restart(ledger: Ledger, record: dict[str, Any]) -> None:
    restart = record["restart"]
    s3, files, process = restart["s3"], restart["files"], restart["process"]
    said = {m["index"]: m for m in _messages(s3)}
    question, answer = said.get(2, {"role": "", "text": ""}), said.get(3, {"role": "", "text": ""})
    restored = re.search(r"messages restored: (\d+)", process["stdout"])
    ledger.check("C1 S1", "a separate process restored this kernel's turn from S3 and answered from it",
                 evidence=f"its pid differs from the kernel's: {process['pid'] != record['kernel_pid']}; exit "
                          f"{process['returncode']}; it restored {restored.group(1) if restored else None}; in S3, "
                          f"its question (message_2): {question['text']!r}; its reply (message_3): {answer['text']!r}",
                 holds=process["pid"] != record["kernel_pid"] and process["returncode"] == 0
                 and restored is not None and restored.group(1) == "2" and question["role"] == "user"
                 and not any(fact in question["text"] for fact in FACTS)
                 and answer["role"] == "assistant" and _has_facts(answer["text"]))
    if record["local"]:
        printed = re.search(r"hosts connected: (.*)", process["stdout"])
        ledger.check("S1", "the process connected to 127.0.0.1 only: the local endpoint",
                     evidence=f"it printed: hosts connected: {printed.group(1) if printed else None}",
                     holds=printed is not None and printed.group(1) == "['127.0.0.1']")
        ledger.equal("S6", "every socket this kernel connected went to 127.0.0.1", observed=record["hosts"],
                     expected=["127.0.0.1"], what="hosts")
    else:
        ledger.skip("S1", "the process connected to 127.0.0.1 only: the local endpoint", reason="endpoint is 'aws'")
        ledger.skip("S6", "every socket this kernel connected went to 127.0.0.1", reason="endpoint is 'aws'")
    on_disk = sorted(files)
    ledger.equal("S1", "the same keys in S3 as the file session's files, for the same two turns",
                 observed=sorted(s3), expected=on_disk, what="keys")
    ledger.check("S1", "S3 has no folders: the file session's folders have no object",
                 evidence=f"folders on disk: {restart['folders']}; keys ending in '/' or naming an empty folder: "
                          f"{[k for k in s3 if k.endswith('/') or k.startswith('multi_agents')]}",
                 holds=bool(restart["folders"]) and not any(k.endswith("/") or k.startswith("multi_agents") for k in s3))
    shared = sorted(set(s3) & set(files))
    replies = [k for k in shared if s3[k].get("message", {}).get("role") == "assistant"]
    others = [k for k in shared if k not in replies]
    same = [k for k in others if _steady(s3[k]) == _steady(files[k])]
    ledger.equal("S1", "session.json, agent.json and the prompts: the same JSON but for created_at, updated_at and "
                       "tracking_id",
                 observed=same, expected=others, what="identical objects")
    if not record["live_model"]:
        same_replies = [k for k in replies if _steady(s3[k]) == _steady(files[k])]
        ledger.equal("S1", "the replies too, timing aside: words, usage, latency",
                     observed=same_replies, expected=replies, what="identical replies")
    else:
        ledger.skip("S1", "the replies too, timing aside: words, usage, latency",
                    reason="two calls of a real model word their replies differently")


def _front_desk(ledger: Ledger, record: dict[str, Any]) -> None:
    """Two users on one session id: the second user's question was stored after the first user's turn, in the same
    session, and its reply names the first user's ticket."""
    desk, ticket = record["front_desk"], FRONT_DESK[1]
    roles = [role for _, role, _ in desk]
    holds = (roles == ["user", "assistant", "user", "assistant"] and [i for i, _, _ in desk] == [0, 1, 2, 3]
             and ticket in desk[0][2] and not TICKET.search(desk[2][2]) and ticket in desk[3][2])
    ledger.check("S2", "two users on one session id: the second user's question went into the first user's session, "
                       "and its reply named the first user's ticket",
                 evidence=f"messages of session_{FRONT_DESK[0]} in S3: "
                          f"{[(i, role, text) for i, role, text in desk]}",
                 holds=holds)


def _decide_users(ledger: Ledger, record: dict[str, Any]) -> None:
    users, turns, sessions = record["users"], record["turns"], record["sessions"]
    foreign, prompts_ok, replies, replies_ok = 0, [], 0, []
    for session_id, messages in sessions.items():
        owner = int(session_id.removeprefix("user-"))
        for index, role, text in messages:
            tickets = [(int(u), int(t)) for u, t in TICKET.findall(text)]
            foreign += sum(u != owner for u, _ in tickets)
            own = bool(tickets) and all(ticket == (owner, index // 2) for ticket in tickets)
            if role == "user":
                prompts_ok.append(len(tickets) == 1 and own)
            else:
                replies += 1
                replies_ok.append(own)
    ledger.check("C1 S2", "every session holds its owner's prompts, each at its own turn, and no other user's ticket",
                 evidence=f"{len(sessions)} sessions; {sum(prompts_ok)} of {len(prompts_ok)} prompts name the owner's "
                          f"ticket for their turn; tickets of another user in any message: {foreign}",
                 holds=len(sessions) == users and len(prompts_ok) == users * turns and all(prompts_ok) and foreign == 0)
    if not record["live_model"]:
        ledger.check("C1 S2", "every reply names its own prompt's ticket: no reply crossed sessions",
                     evidence=f"{sum(replies_ok)} of {replies} replies",
                     holds=replies == users * turns and all(replies_ok))
    else:
        ledger.skip("C1 S2", "every reply names its own prompt's ticket: no reply crossed sessions",
                    reason="a real model's reply need not repeat the ticket")


def _writers(ledger: Ledger, record: dict[str, Any]) -> None:
    writers = record["writers"]
    count, prompts = len(writers["prompts"]), list(writers["prompts"].values())
    bare, locked = (writers["sessions"][sid] for sid in SHARED)
    kept = [text for role, text in bare["messages"] if role == "user" and text in prompts]
    written = sum(len(statuses) for statuses in bare["puts"].values())
    lost = (written - len(bare["messages"])) // 2
    per_key = {key: len(statuses) for key, statuses in bare["puts"].items()}
    ledger.check("C1 S3", "without a lock, every writer wrote its turn as messages 2 and 3; S3 kept one turn of them",
                 evidence=f"PutObject calls per message key, at the wire: {per_key}; {len(bare['messages'])} "
                          f"messages in S3, {len(kept)} of {count} writer prompts; turns lost: {lost}",
                 holds=per_key == {"message_0.json": 1, "message_1.json": 1, "message_2.json": count,
                                   "message_3.json": count}
                 and len(bare["messages"]) == 4 and len(kept) == 1 and lost == count - 1)
    statuses = sorted({status for _, status in bare["writes"]})
    by_file: dict[str, int] = {}
    for name, _ in bare["writes"]:
        by_file[name] = by_file.get(name, 0) + 1
    ledger.check("S3", "no writer got an error: S3 answered 200 to every PutObject on the session, message objects, "
                       "agent.json and session.json",
                 evidence=f"statuses: {statuses}, for {len(bare['writes'])} PutObject calls on the session, the "
                          f"seed's and the writers', by file: {dict(sorted(by_file.items()))}",
                 holds=statuses == [200] and len(bare["writes"]) >= written)
    demo = [status for key, status in writers["lock_writes"] if key == "locks/demo.lock"]
    ledger.equal("S4", "a conditional write of a held lock is refused with 412",
                 observed=demo, expected=[200, 412], what="statuses of the conditional writes on locks/demo.lock")
    taken = [status for key, status in writers["lock_writes"] if key == "locks/session_with-lock.lock"]
    ledger.check("S4", "each writer took the lock object once, with a conditional write; the writers that waited got "
                       "412 first",
                 evidence=f"conditional writes on locks/session_with-lock.lock answered 200: {taken.count(200)}, for "
                          f"{count} writers; 412 answers >= {count - 1}: {taken.count(412) >= count - 1}",
                 holds=taken.count(200) == count and taken.count(412) >= count - 1 and set(taken) <= {200, 412})
    roles = [role for role, _ in locked["messages"]]
    asked = [i for i, (role, text) in enumerate(locked["messages"]) if role == "user" and text in prompts]
    answered = [i + 1 < len(roles) and roles[i + 1] == "assistant"
                and locked["messages"][i][1].rstrip(".").split()[-1] in locked["messages"][i + 1][1] for i in asked]
    ledger.check("C1 S4", "with the lock no turn is lost: every prompt in S3, each followed by its reply",
                 evidence=f"{len(roles)} messages for {1 + count} turns; writer prompts at {asked}, each followed by a "
                          f"reply naming its fact: {answered}; roles alternate: {roles == ['user', 'assistant'] * (1 + count)}",
                 holds=len(roles) == 2 * (1 + count) and roles == ["user", "assistant"] * (1 + count)
                 and len(asked) == count and all(answered))
    ledger.equal("S4", "every lock was released", observed=writers["locks_left"], expected=[],
                 what="objects under locks/")


def _memory(ledger: Ledger, record: dict[str, Any]) -> None:
    memory = record["memory"]
    received = {name: " ".join(text for call in calls for _, text in call["messages"])
                for name, calls in memory["calls"].items()}
    replies = {name: calls[-1]["reply"] if calls else "" for name, calls in memory["calls"].items()}
    pin, ada = received.get("pin-tuesday", ""), received.get("ada-tuesday", "")
    ledger.check("C1 S5", "Pin's Tuesday call received Monday's memory from DynamoDB; Ada's received none",
                 evidence=f"a <memory> block naming Lisbon in Pin's call: {'<memory>' in pin and 'Lisbon' in pin}, "
                          f"in Ada's: {'Lisbon' in ada}; replies: {replies.get('pin-tuesday', '').strip()!r}, "
                          f"{replies.get('ada-tuesday', '').strip()!r}",
                 holds="<memory>" in pin and "Lisbon" in pin and "Lisbon" not in ada
                 and "Lisbon" in replies.get("pin-tuesday", "") and "Lisbon" not in replies.get("ada-tuesday", ""))
    items = memory["items"]
    ledger.check("S5", "one item, in Pin's partition; none in Ada's",
                 evidence=f"items scanned: {[(i['pk'], i['content']) for i in items]}",
                 holds=len(items) == 1 and items[0]["pk"] == "pin" and "Lisbon" in items[0]["content"])


def claims(record: dict[str, Any]) -> Ledger:
    """Every check of notebook 12, decided from `record` alone."""
    ledger = Ledger(claims=CLAIMS)
    _restart(ledger, record)
    _front_desk(ledger, record)
    _decide_users(ledger, record)
    _writers(ledger, record)
    _memory(ledger, record)
    made_up = record["made_up_key"]
    if made_up is not None:
        ledger.check("S6", "the local endpoint accepted a made-up key: IAM is not emulated",
                     evidence=f"objects of the whole bucket listed with it: {made_up['listed']}; "
                              f"error: {made_up['error']}",
                     holds=made_up["error"] is None and (made_up["listed"] or 0) > 0)
    else:
        ledger.skip("S6", "the local endpoint accepted a made-up key: IAM is not emulated",
                    reason="endpoint is 'aws': IAM decides")
    return ledger
