"""Notebook 12's checks (companion/checks/sessions_at_scale.py), each shown failing on a broken copy of the recorded
run."""

from __future__ import annotations

from checks_harness import check_suite

from companion.checks import sessions_at_scale

MESSAGE = "agents/agent_default/messages/message_{}.json"


def restart(record, side="s3"):
    return record["restart"][side]


def reply_metadata(record):
    return restart(record)[MESSAGE.format(1)]["message"]["metadata"]


def stdout(record, old, new):
    process = record["restart"]["process"]
    process["stdout"] = process["stdout"].replace(old, new)


def writers(record, session_id):
    return record["writers"]["sessions"][session_id]


def calls(record, name):
    return record["memory"]["calls"][name]


BREAKAGES = {
    # the second process restored nothing: it answered from an empty session
    "a separate process restored this kernel's turn from S3 and answered from it":
        lambda r: stdout(r, "messages restored: 2", "messages restored: 0"),
    # a process that reached a real AWS address
    "the process connected to 127.0.0.1 only: the local endpoint":
        lambda r: stdout(r, "hosts connected: ['127.0.0.1']", "hosts connected: ['127.0.0.1', '52.216.8.27']"),
    "every socket this kernel connected went to 127.0.0.1":
        lambda r: r["hosts"].append("52.216.8.27"),
    # a message object that never reached the bucket
    "the same keys in S3 as the file session's files, for the same two turns":
        lambda r: restart(r).pop(MESSAGE.format(3)),
    # a store that writes folder marker objects
    "S3 has no folders: the file session's folders have no object":
        lambda r: restart(r).update({"multi_agents/": {}}),
    "session.json, agent.json and the prompts: the same JSON but for created_at, updated_at and tracking_id":
        lambda r: restart(r)["session.json"].update(session_type="MULTI_AGENT"),
    # a reply stored with another usage count
    "the replies too, timing aside: words, usage, latency":
        lambda r: reply_metadata(r)["usage"].update(outputTokens=15),
    # a session manager that gave the second user a fresh session: it never saw the first user's ticket
    "two users on one session id: the second user's question went into the first user's session, and its reply named "
    "the first user's ticket":
        lambda r: r.update(front_desk=[[0, "user", "What is my ticket for today?"],
                                       [1, "assistant", "I cannot see your ticket in this conversation."]]),
    # a prompt that landed in another user's session
    "every session holds its owner's prompts, each at its own turn, and no other user's ticket":
        lambda r: r["sessions"]["user-003"][0].__setitem__(2, "My ticket for today is U004T00."),
    # a reply that answered another prompt
    "every reply names its own prompt's ticket: no reply crossed sessions":
        lambda r: r["sessions"]["user-001"][1].__setitem__(2, "Noted."),
    # a store that appended (no overwrite): nothing lost without the lock
    "without a lock, every writer wrote its turn as messages 2 and 3; S3 kept one turn of them":
        lambda r: r["writers"]["sessions"].update({"no-lock": writers(r, "with-lock")}),
    # a write S3 throttled, then retried: the writer saw no error, but S3 did refuse one
    "no writer got an error: S3 answered 200 to every PutObject on the session, message objects, agent.json and "
    "session.json":
        lambda r: writers(r, "no-lock")["writes"][-1].__setitem__(1, 503),
    # an endpoint that ignores If-None-Match
    "a conditional write of a held lock is refused with 412":
        lambda r: r["writers"].update(lock_writes=[[k, 200] for k, _ in r["writers"]["lock_writes"]]),
    # a writer that went without the lock: one success fewer, and no 412 for it
    "each writer took the lock object once, with a conditional write; the writers that waited got 412 first":
        lambda r: r["writers"].update(lock_writes=[w for w in r["writers"]["lock_writes"]
                                                   if w[0] != "locks/session_with-lock.lock" or w[1] == 200][:-1]),
    "with the lock no turn is lost: every prompt in S3, each followed by its reply":
        lambda r: writers(r, "with-lock").update(messages=writers(r, "with-lock")["messages"][:-2]),
    "every lock was released":
        lambda r: r["writers"].update(locks_left=["locks/session_with-lock.lock"]),
    # a store without partitions: Ada's search found Pin's memory
    "Pin's Tuesday call received Monday's memory from DynamoDB; Ada's received none":
        lambda r: calls(r, "ada-tuesday").__setitem__(0, calls(r, "pin-tuesday")[0]),
    "one item, in Pin's partition; none in Ada's":
        lambda r: r["memory"]["items"].append(dict(r["memory"]["items"][0], pk="ada")),
    # an endpoint that checks keys: the sentence about IAM would be false
    "the local endpoint accepted a made-up key: IAM is not emulated":
        lambda r: r.update(made_up_key={"listed": None, "error": "ClientError"}),
}

# The S3-vs-disk comparison (issue 23) once ran notebook 12 twice with a reply tampered in S3; the same two cases on
# the recorded run: a reply that gained timeToFirstByteMs still holds (a variant), one whose usage changed fails (above).
VARIANTS = {
    # the SDK writes timeToFirstByteMs into a reply only when it measured 1 ms or more: one side may have it
    "a reply that gained timeToFirstByteMs": lambda r: reply_metadata(r)["metrics"].update(timeToFirstByteMs=7),
    # with endpoint="aws" the loopback and IAM checks are not decided
    "endpoint aws": lambda r: r.update(local=False, made_up_key=None),
    # on a real model, the replies are not compared
    "a live model": lambda r: r.update(live_model=True),
}

globals().update(check_suite(sessions_at_scale, "12_sessions_at_scale", BREAKAGES, VARIANTS))
