"""Notebook 08's ledger: what each write policy stored, what a fresh session received, superseding and the user scope.

The evidence never comes from the lesson's tables or from the store's own reports (its search log, its `records()`):
- the store files and the session's message files are read from disk here, with `json`;
- what each call received and answered is read at the model (a `MeteredModel`'s `exchanges` in each agent);
- a record's owner is the `user` field of its row in the file, so "a scoped recall received only that user's
  memories" is counted from the entries each call received, against the file, not from the store's search.
The truth about what the user said comes from the script's own labels (`data/conversations/selective_chat.json`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from strands import Agent

from companion.checks import save_record
from companion.memory.lineage import message_lineage
from companion.models.backends import resolve_backend, resolve_bedrock_endpoint
from companion.models.facts import statements
from companion.sessions.session_files import message_files
from companion.support.conversations import load_script
from companion.support.ledger import Ledger
from companion.support.messages import is_extraction_request, message_text

CLAIMS = {
    "C1": "extraction stores several times fewer memories than dumping at equal recall; updates supersede; "
          "a scope keeps users apart",
    "S1": "dumping stores every message, chatter and echoes included; extraction, sentences stating the facts",
    "S2": "extraction costs a model call per turn, and what it does not return is not stored",
    "S3": "with two values stored, the model receives both; the offline model answers the last",
    "S4": "superseding ends the old record, keeps it as history, and injects only the current value",
    "S5": "the scope lives in the store; without it another user's facts reach the call, unmarked",
    "S6": "each record names how it was derived, the user, the session, its messages and when",
}

_ENTRY = re.compile(r"<entry(?:\s[^>]*)?>(?P<content>.*?)</entry>", re.DOTALL)
_MARKS = ('"custom"', '"message_index"')  # the keys of a Lineage hook's stamp


def says(text: str, value: str) -> bool:
    """Whether `text` holds `value` as a word of its own, in any case ("Go" is not in "Good")."""
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text, re.IGNORECASE) is not None


def _entries(message: dict[str, Any]) -> list[str]:
    """The `<entry>` texts of the memory block injected into a user message (parsed here, not by the lesson's code)."""
    import html

    return [html.unescape(m.group("content")).strip() for b in message["content"] if "text" in b
            for m in _ENTRY.finditer(b["text"])]


def _said(message: dict[str, Any]) -> str:
    """A user message's own words, without an injected `<memory>` block."""
    return " ".join(b["text"] for b in message["content"] if "text" in b
                    and not b["text"].lstrip().startswith("<memory>")).strip()


def _session(sessions: Path, session_id: str) -> dict[str, Any]:
    """A session as its message files hold it: per index, the role and the text; each tracking id's file."""
    messages, files = {}, {}
    for path in message_files(sessions, session_id):
        message = json.loads(path.read_text(encoding="utf-8"))["message"]
        messages[path.stem.split("_")[1]] = [message["role"], message_text(message).strip()]
        files[message["tracking_id"]] = path.name
    return {"messages": messages, "files": files}


def _store(path: Path, tracking: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """Every row of a store file, read from disk; a lineage's tracking ids replaced by the files that hold them."""
    rows = []
    for r in json.loads(path.read_text(encoding="utf-8")):
        origin = dict((r.get("metadata") or {}).get("lineage") or {})
        session = tracking.get(origin.get("session_id") or "", {})
        origin["message_files"] = [session.get(i, "not found") for i in origin.pop("message_ids", [])]
        if "replaced_by" in origin:
            origin["replaced_by"] = {k: origin["replaced_by"].get(k) for k in ("id", "session_id", "messages")}
        origin.pop("restated_in", None)
        rows.append({k: r.get(k) for k in ("id", "user", "content", "key", "value", "written_at", "valid_until",
                                           "superseded_by", "replaces")} | {"lineage": origin})
    return rows


def _stamped(exchange: dict[str, Any], ids: set[str]) -> bool:
    """Whether a call carried a Lineage stamp: one of its keys, or a message's tracking id."""
    sent = json.dumps(exchange["messages"], default=str) + str(exchange.get("system_prompt"))
    return any(mark in sent for mark in _MARKS) or any(i in sent for i in ids)


def record(writers: dict[str, Agent], readers: dict[str, Agent], stores: dict[str, Any], *, script: Any,
           users: tuple[str, str], sessions: Path, backend: str | None, workspace_dir: Path) -> dict[str, Any]:
    """The evidence of notebook 08's run.

    `writers` maps "dump", "extraction", "selective" (the superseding store) and "other" (the second user's turns) to
    the agents that wrote; `readers` maps each fresh session's name to its agent; `stores` maps "dump", "extraction" and
    "selective" to their stores (only their files are read). Every agent's model is a `MeteredModel`.
    """
    sessions = Path(sessions)
    writer_sessions = {name: message_lineage(agent.messages[0])["session_id"] for name, agent in writers.items()}
    session_data = {sid: _session(sessions, sid) for sid in writer_sessions.values()}
    tracking = {sid: data["files"] for sid, data in session_data.items()}
    ids = {i for files in tracking.values() for i in files}
    files = {name: Path(store.path) for name, store in stores.items()}
    write_calls = {}
    for name, agent in writers.items():
        calls = []
        for x in agent.model.exchanges:
            last = x["messages"][-1]
            extraction = is_extraction_request(last)
            calls.append({"kind": "extraction" if extraction else "turn",
                          "read": message_text(last) if extraction else _said(last), "reply": x["reply"]})
        write_calls[name] = calls
    reads = {}
    for name, agent in readers.items():
        store = agent.memory_manager._stores[0]  # what this fresh session was given to read: its file and scope
        reads[name] = {"file": Path(store.path).name, "scope": store.user, "calls": [
            {"question": _said(x["messages"][-1]), "entries": _entries(x["messages"][-1]), "reply": x["reply"]}
            for x in agent.model.exchanges]}
    every_call = [x for agent in [*writers.values(), *readers.values()] for x in agent.model.exchanges]
    labels = load_script("selective_chat")["facts"]
    return save_record({
        "users": list(users),
        "offline_rules": resolve_backend(backend) == "offline" or resolve_bedrock_endpoint() == "local",
        "script": {"turns": script.turns, "fact_turns": script.fact_turns, "questions": script.questions,
                   "expected": script.expected, "history": script.history, "other_turns": script.other_turns,
                   "labels": {f["say"]: [f["key"], f["value"]] for f in labels},
                   "other_facts": {s.key: s.value for line in script.other_turns for s in statements(line)}},
        "sessions": {name: {"session_id": sid, "messages": session_data[sid]["messages"]}
                     for name, sid in writer_sessions.items()},
        "stores": {name: {"file": path.name, "rows": _store(path, tracking)} for name, path in files.items()},
        "writes": write_calls,
        "reads": reads,
        "stamps": {"calls": len(every_call), "stamped": sum(_stamped(x, ids) for x in every_call),
                   "tracking_ids": len(ids)},
    }, workspace_dir)


# ---------------------------------------------------------------------------------------------------------- claims


def _current(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["valid_until"] is None]


def _texts(record: dict[str, Any], session: str, indexes: list[int]) -> list[str]:
    messages = record["sessions"][session]["messages"]
    return [messages[str(i)][1] for i in indexes if str(i) in messages]


def _owners(record: dict[str, Any], file: str) -> dict[str, set[str]]:
    """Each text in a store file, with the users whose rows hold it."""
    owners: dict[str, set[str]] = {}
    for store in record["stores"].values():
        if store["file"] == file:
            for r in store["rows"]:
                owners.setdefault(" ".join(r["content"].split()), set()).add(r["user"])
    return owners


def _reply(record: dict[str, Any], reader: str, question: str) -> str:
    return next(c["reply"] for c in record["reads"][reader]["calls"] if c["question"].startswith(question))


def _sent(record: dict[str, Any], reader: str, question: str) -> list[str]:
    return next(c["entries"] for c in record["reads"][reader]["calls"] if c["question"].startswith(question))


def claims(record: dict[str, Any]) -> Ledger:
    """Every check of notebook 08, decided from `record` alone."""
    ledger = Ledger(claims=CLAIMS)
    s = record["script"]
    user_a, user_b = record["users"]
    stores, sessions, reads = record["stores"], record["sessions"], record["reads"]
    offline = record["offline_rules"]
    real = "a real model decides this for itself"
    key = next(k for k, values in s["history"].items() if len(values) > 1)  # the fact that changes
    old_value, new_value = s["history"][key][0], s["history"][key][-1]
    question = s["questions"][key]

    # --- store less (C1, S1)
    dump_rows, extracted = _current(stores["dump"]["rows"]), _current(stores["extraction"]["rows"])
    dump_said = sessions["dump"]["messages"]
    copies = sorted(r["lineage"]["messages"][0] for r in dump_rows
                    if r["lineage"].get("session_id") == sessions["dump"]["session_id"]
                    and len(r["lineage"]["messages"]) == 1
                    and dump_said.get(str(r["lineage"]["messages"][0]), [None, None])[1] == r["content"])
    ledger.check("C1 S1", "dumping stores every message of its session",
                 evidence=f"{len(dump_rows)} records in {stores['dump']['file']}, {len(dump_said)} message files; "
                          f"records whose text is the message their lineage names: {len(copies)}, naming "
                          f"{len(set(copies))} different files",
                 holds=len(dump_rows) == len(dump_said) == len(set(copies)) == len(copies))
    ledger.check("C1", "extraction stores several (3+) times fewer memories than dumping",
                 evidence=f"records on disk: dump {len(dump_rows)}, extraction {len(extracted)}",
                 holds=0 < 3 * len(extracted) <= len(dump_rows))
    def other_value(entries: list[str], k: str) -> bool:
        """Whether the entries state a value the user gave for `k` other than the last one."""
        return any(says(e, v) for e in entries for v in s["history"][k] if v != s["expected"][k])

    recalled, two_values = {}, {}
    for name in ("dump", "extraction"):
        reader = f"{name}-recall"
        recalled[name] = sum(says(_reply(record, reader, q), s["expected"][k])
                             and not other_value(_sent(record, reader, q), k) for k, q in s["questions"].items())
        two_values[name] = [k for k, q in s["questions"].items() if other_value(_sent(record, reader, q), k)]
    ledger.check("C1", "extraction answers as many questions as dumping in a fresh session, none counted from two values",
                 evidence=f"of {len(s['questions'])}, answered with the value and no other value received: "
                          f"{recalled}; questions that received two values: {two_values}",
                 holds=recalled["extraction"] == recalled["dump"] > 0)
    user_lines = [text for _, (role, text) in sorted(dump_said.items(), key=lambda p: int(p[0])) if role == "user"]
    chatter = [t for t in range(1, len(s["turns"]) + 1) if t not in s["fact_turns"]]
    user_at = [int(i) for i, (role, _) in sorted(dump_said.items(), key=lambda p: int(p[0])) if role == "user"]
    kept = [t for t in chatter if t <= len(user_at) and user_lines[t - 1] == s["turns"][t - 1]
            and any(r["content"] == s["turns"][t - 1] and r["lineage"]["messages"] == [user_at[t - 1]]
                    for r in dump_rows)]
    ledger.check("S1", "dumping stores the chatter too",
                 evidence=f"{len(kept)} of {len(chatter)} chatter turns: a record holding the line, its lineage "
                          f"naming that turn's message file",
                 holds=len(user_at) == len(s["turns"]) and kept == chatter)
    wrong = []  # extraction records that do not state the value their user line gave
    for r in extracted:
        lines = [t for t in _texts(record, "extraction", r["lineage"]["messages"]) if t in s["labels"]]
        attribute, value = s["labels"][lines[0]] if len(lines) == 1 else (None, None)
        if attribute is None or attribute not in r["content"].lower() or not says(r["content"], value) \
                or any(says(r["content"], v) for v in s["history"][attribute] if v != value):
            wrong.append(r["content"])
    ledger.check("S1", "every extraction memory states the value the user gave for its attribute",
                 evidence=f"{len(extracted)} records, each against the user line its lineage names (the script's "
                          f"labels); not matching: {wrong}",
                 holds=bool(extracted) and not wrong)
    by_text = {}
    for r in dump_rows:
        by_text.setdefault(r["content"], set()).update(r["lineage"]["messages"])
    echo = {}  # per question: (user message, reply) pairs injected, both stating the value
    for k, q in s["questions"].items():
        named = {i for e in _sent(record, "dump-recall", q) for i in by_text.get(e, ())}
        echo[k] = [f"{i}-{i + 1}" for i in sorted(named) if i + 1 in named
                   and dump_said[str(i)][0] == "user" and dump_said[str(i + 1)][0] == "assistant"
                   and all(says(dump_said[str(j)][1], s["expected"][k]) for j in (i, i + 1))]
    echo_claim = "for every question, dumping injects the user's fact and the reply repeating it"
    if offline:
        ledger.check("S1", echo_claim,
                     evidence=f"{sum(map(bool, echo.values()))} of {len(echo)} questions; (user, reply) message "
                              f"pairs injected, by lineage: {', '.join(p for v in echo.values() for p in v)}",
                     holds=all(echo.values()))
    else:
        ledger.skip("S1", echo_claim, reason=f"whether a reply repeats the fact: {real}")
    longer = [sum(map(len, _sent(record, "dump-recall", q))) > sum(map(len, _sent(record, "extraction-recall", q)))
              for q in s["questions"].values()]
    ledger.check("S1", "dumping injects more text than extraction for every question",
                 evidence=f"{sum(longer)} of {len(longer)} questions", holds=bool(longer) and all(longer))

    # --- the cost (S2)
    def groups(calls: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        found: list[list[dict[str, Any]]] = []
        for call in calls:
            if call["kind"] == "turn" and (not found or call["read"] != found[-1][0]["read"]):
                found.append([])
            if found:
                found[-1].append(call)
        return found

    dump_turns, extraction_turns = groups(record["writes"]["dump"]), groups(record["writes"]["extraction"])
    one_more = [len(d) + 1 == len(e) and e[0]["read"] == line
                and [c["kind"] for c in e].count("extraction") == 1
                and any(c["kind"] == "extraction" and f"user: {line}" in c["read"] for c in e)
                for line, d, e in zip(s["turns"], dump_turns, extraction_turns)]
    ledger.check("S2", "extraction costs one more model call per turn",
                 evidence=f"{sum(one_more)} of {len(s['turns'])} turns: the dump run's calls plus one extraction "
                          f"call reading that turn's line",
                 holds=len(one_more) == len(s["turns"]) == len(dump_turns) and all(one_more))
    quiet = next(line for line, (k, _) in s["labels"].items() if k is None)
    at = [int(i) for i, (role, text) in sessions["extraction"]["messages"].items() if text == quiet]
    named_it = [r["content"] for r in stores["extraction"]["rows"]
                if {i for a in at for i in (a, a + 1)} & set(r["lineage"]["messages"])]
    in_dump = [r["content"] for r in dump_rows if r["content"] == quiet]
    quiet_claim = "the fact turn that states no attribute leaves no memory, while the dump keeps it"
    if offline:
        ledger.check("S2", quiet_claim,
                     evidence=f"{quiet!r}: extraction records whose lineage names it or its reply: {named_it}; "
                              f"dump records holding it: {len(in_dump)}",
                     holds=len(at) == 1 and not named_it and len(in_dump) == 1)
    else:
        ledger.skip("S2", quiet_claim, reason=f"what to extract from that sentence: {real}")

    # --- two values (S3)
    def both(entries: list[str]) -> bool:
        return all(any(says(e, v) for e in entries) for v in s["history"][key])

    plain_sent = {name: _sent(record, f"{name}-recall", question) for name in ("dump", "extraction")}
    ledger.check("S3", "the dump and the plain extraction store each inject both values",
                 evidence="; ".join(f"{name}: {sent}" for name, sent in plain_sent.items()),
                 holds=all(both(sent) for sent in plain_sent.values()))
    order_claim = "with both stored, the offline model answers the value the store returned last"
    if offline:
        asked = {"dump": "dump-recall", "extraction": "extraction-recall", "reversed": "reversed-recall"}
        last, replies = {}, {}
        for name, reader in asked.items():
            sent = [e for e in _sent(record, reader, question) if any(says(e, v) for v in s["history"][key])]
            last[name] = next((v for v in s["history"][key] if sent and says(sent[-1], v)), None)
            replies[name] = _reply(record, reader, question)
        ledger.check("S3", order_claim,
                     evidence="; ".join(f"{w}: last value sent {last[w]}, reply {replies[w].strip()!r}" for w in last),
                     holds=None not in last.values() and last["extraction"] != last["reversed"]
                     and all(says(replies[w], last[w]) and not any(says(replies[w], v) for v in s["history"][key]
                                                                     if v != last[w]) for w in last))
    else:
        ledger.skip("S3", order_claim, reason=f"which of two values to believe: {real}")

    # --- supersede (C1, S4)
    rows = stores["selective"]["rows"]
    mine = [r for r in rows if r["user"] == user_a]
    new = [r for r in mine if r["valid_until"] is None and key in r["content"].lower() and says(r["content"], new_value)]
    old = [r for r in mine if key in r["content"].lower() and says(r["content"], old_value)]
    ledger.check("C1 S4", "the old value is kept in the file, ended, pointing to the new one",
                 evidence=f"{[(r['id'], r['valid_until'], r['superseded_by']) for r in old]}; current records "
                          f"stating {new_value}: {[(r['id'], r['written_at']) for r in new]}",
                 holds=len(new) == 1 and bool(old) and all(r["superseded_by"] == new[0]["id"]
                                                           and r["valid_until"] == new[0]["written_at"] for r in old))
    reply = _reply(record, "selective-recall", question)
    ledger.check("C1 S4", "the fresh session answers the new value, not the old one",
                 evidence=reply.strip(), holds=says(reply, new_value) and not says(reply, old_value))
    scoped = [name for name, r in reads.items() if r["file"] == stores["selective"]["file"] and r["scope"]]
    paired = {name: sum(both(c["entries"]) for c in reads[name]["calls"]) for name in scoped}
    held = {v: "current" if r["valid_until"] is None else "history" for v in s["history"][key] for r in mine
            if key in r["content"].lower() and says(r["content"], v)}
    ledger.check("C1 S4", "read in one user's scope, the superseding store injects one value; its file keeps both, "
                          "the old as history",
                 evidence=f"{stores['selective']['file']} holds for {user_a}: "
                          f"{', '.join(f'{v} as {status}' for v, status in held.items())}; calls that received both "
                          f"values, per scoped session: {paired}",
                 holds=held == {old_value: "history", new_value: "current"} and bool(paired)
                 and not any(paired.values()))

    # --- the scope (C1, S5)
    owners = _owners(record, stores["selective"]["file"])
    foreign, entries = [], 0
    for name in scoped:
        scope = reads[name]["scope"]
        for c in reads[name]["calls"]:
            for e in c["entries"]:
                entries += 1
                if scope not in owners.get(" ".join(e.split()), set()):
                    foreign.append((name, e))
    ledger.check("C1 S5", "each entry a scoped session received is a record of that user in the file",
                 evidence=f"{entries} entries received by the {sum(len(reads[n]['calls']) for n in scoped)} calls "
                          f"of {scoped}, each looked up in {stores['selective']['file']} (read from disk); not a "
                          f"record of that session's user: {foreign}",
                 holds=entries > 0 and not foreign and {user_a, user_b} <= {reads[n]["scope"] for n in scoped})
    unscoped = [name for name, r in reads.items() if r["file"] == stores["selective"]["file"] and not r["scope"]]
    theirs = [(c["question"], e) for n in unscoped for c in reads[n]["calls"] for e in c["entries"]
              if owners.get(" ".join(e.split())) == {user_b}]
    ledger.check("C1 S5", "without the scope, the second user's memories reach the first user's calls",
                 evidence=f"{len(theirs)} entries of {user_b}'s records in {len(unscoped)} unscoped session(s): "
                          f"{[e for _, e in theirs]}",
                 holds=bool(unscoped) and bool(theirs))
    side = [c["question"] for n in unscoped for c in reads[n]["calls"]
            if any(owners.get(" ".join(e.split())) == {user_a} for e in c["entries"])
            and any(owners.get(" ".join(e.split())) == {user_b} for e in c["entries"])]
    named = [e for n in unscoped for c in reads[n]["calls"] for e in c["entries"]
             if says(e, user_a) or says(e, user_b)]
    ledger.check("S5", "the unscoped calls received both users' memories side by side, none naming its user",
                 evidence=f"questions with an entry of each user: {side}; entries naming a user: {named}",
                 holds=bool(side) and not named)
    wrong_user = {k: _reply(record, n, q).strip() for n in unscoped for k, q in s["questions"].items()
                  if k in s["other_facts"] and says(_reply(record, n, q), s["other_facts"][k])
                  and s["other_facts"][k] != s["expected"][k]}
    own = {n: all(says(_reply(record, n, s["questions"][k]), v)
                  for k, v in (s["expected"] if reads[n]["scope"] == user_a else s["other_facts"]).items())
           for n in scoped if len(reads[n]["calls"]) == len(s["questions"])}
    ledger.check("S5", "each user's scoped session answers with that user's values; unscoped, the other's",
                 evidence=f"scoped sessions answering every fact of their user: {own}; unscoped answers giving "
                          f"{user_b}'s value: {wrong_user}",
                 holds=len(own) == 2 and all(own.values()) and bool(wrong_user))

    # --- lineage (S6)
    kinds, unstated, checked, mismatched, who = {}, [], 0, [], []
    said_values = {v for values in s["history"].values() for v in values} | set(s["other_facts"].values())
    by_session = {v["session_id"]: k for k, v in sessions.items()}
    for store in stores.values():
        for r in store["rows"]:
            origin = r["lineage"]
            if origin.get("session_id") not in by_session:
                continue
            name = by_session[origin["session_id"]]
            said = " ".join(_texts(record, name, origin["messages"]))
            values = [r["value"]] if r["value"] else [v for v in said_values if says(r["content"], v)] or [r["content"]]
            kinds[origin["derived"]] = kinds.get(origin["derived"], 0) + 1
            if not origin["messages"] or not all(says(said, v) for v in values):
                unstated.append((store["file"], r["id"], r["content"]))
            checked += 1
            if origin["message_files"] != [f"message_{i}.json" for i in origin["messages"]]:
                mismatched.append((store["file"], r["id"]))
            if origin.get("user") != r["user"] or origin.get("at") != r["written_at"]:
                who.append((store["file"], r["id"]))
    ledger.check("S6", "every memory an agent wrote in a session names messages that state it",
                 evidence=f"records by derivation: {kinds}; not stated there: {unstated}",
                 holds=set(kinds) == {"dump", "extraction"} and not unstated)
    ledger.check("S6", "each record's lineage names its user and when it was written",
                 evidence=f"{checked} records; user or time not the record's: {who}",
                 holds=checked > 0 and not who)
    ledger.check("S6", "each record's message ids are the tracking ids in the named message files",
                 evidence=f"{checked} records checked; not matching: {mismatched}",
                 holds=checked > 0 and not mismatched)
    on_file = {r["id"]: r for r in rows}
    supersessions = []
    for r in rows:
        if r["superseded_by"]:
            by, now = r["lineage"].get("replaced_by") or {}, on_file.get(r["superseded_by"], {})
            name = by_session.get(by.get("session_id"))
            states = name is not None and says(" ".join(_texts(record, name, by.get("messages") or [])),
                                               now.get("value") or "")
            supersessions.append((r["id"], by.get("id"), by.get("messages"), by.get("id") == now.get("id")
                                  and by.get("messages") == now.get("lineage", {}).get("messages") and states))
    ledger.check("S6", "a superseded memory names the record and the messages that replaced it",
                 evidence=[p[:3] for p in supersessions],
                 holds=bool(supersessions) and all(p[3] for p in supersessions))
    stamps = record["stamps"]
    ledger.check("S6", "the stamps on the messages reach no model call",
                 evidence=f"{stamps['stamped']} of {stamps['calls']} calls carry a stamp's key or one of "
                          f"{stamps['tracking_ids']} tracking ids",
                 holds=stamps["calls"] > 0 and stamps["tracking_ids"] > 0 and stamps["stamped"] == 0)
    return ledger
