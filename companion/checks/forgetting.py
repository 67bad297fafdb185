"""Notebook 09's ledger: a fact forgotten by lineage, checked by means that share nothing with forget()'s matching.

The evidence never comes from the lesson's tables or from forget()'s report alone:
- each store's copies are counted raw, from the bytes of its files and its rows (SQL), as whole words in lower
  case: no statement is read and no key is matched, so a check cannot share forget()'s reading of the text;
- "before" is the copy of the stores the notebook took just before the forget; "after" is the stores' folder now;
  the files the later sessions added are left out of the store-by-store counts;
- the byte scan and the paraphrase check run again here (on the copy and on the folder), beside a plain count of the
  value's bytes, the embedding's first bytes and the file names;
- what the summarizer, the restored session and the fresh sessions received and answered is read at the model (each
  agent's `MeteredModel`).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from companion.checks import save_record, texts
from companion.measure.byte_scan import normalise
from companion.measure.forgetting import STORE_NAMES, Stores, mentions
from companion.measure.forgetting_setup import (
    ForgettingScript,
    Planted,
    agent_json,
    message_files,
    reworded,
    scan_for,
    store_of,
)
from companion.measure.paraphrase_check import paraphrases
from companion.memory.lineage import message_lineage, read_markdown_lineage
from companion.memory.vector_store import connect
from companion.sessions.session_files import check_session, read_json
from companion.support.ledger import Ledger
from companion.support.messages import message_text

CLAIMS = {
    "C1": "every stored copy of the fact is gone, the reworded one included, and no other fact; "
          "checks with their own matching agree",
    "S1": "one fact said once lands in all five stores",
    "S2": "forget() takes the messages that state the fact as sources and removes what descends from them",
    "S3": "the summary is written again, and its model never receives the value",
    "S4": "the reworded note escapes the byte scan; the paraphrase check finds it; lineage removes it",
    "S5": "what does not descend from the sources stays",
    "S6": "the session restores; neither it nor a fresh session gives the value, both give the rest",
}


def whole(value: str) -> re.Pattern[bytes]:
    """The value's bytes, lower case, as a whole: not inside a longer run of letters or digits (so "0142" inside a
    timestamp's "12.014231" never counts)."""
    return re.compile(rb"(?<![0-9a-z])" + re.escape(value.lower().encode("utf-8")) + rb"(?![0-9a-z])")


def _count(raw: bytes, value: str) -> int:
    """Whole occurrences of the value in lowered bytes, as written and as JSON escapes it."""
    forms = {value.lower(), json.dumps(value.lower())[1:-1]}
    return sum(len(whole(form).findall(raw.lower())) for form in forms)


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _user_rows(stores: Stores, name: str) -> list[tuple[str, dict[str, Any]]]:
    """(content, metadata) of the vector rows whose metadata names the user first, read with SQL."""
    db, _ = connect(stores.vectors)
    try:
        rows = db.execute("SELECT content, metadata FROM memories").fetchall()
    finally:
        db.close()
    return [(c, m) for c, m in ((c, json.loads(m or "{}")) for c, m in rows) if m.get("user") == name]


def _by_store(stores: Stores, name: str, values: list[str], names: set[str]) -> dict[str, int]:
    """Each store's copies of each value, counted raw: message files (those named in `names`) holding it, its
    occurrences in the summary, profile entries equal to it, the user's vector rows and markdown lines holding it."""
    data = read_json(agent_json(stores, f"{name}-chat"))
    summary = message_text(data["conversation_manager_state"]["summary_message"]).encode("utf-8")
    profile = [str(v).lower() for v in data["state"].get("profile", {}).values()]
    messages = [p.read_bytes() for p in message_files(stores, f"{name}-chat") if p.name in names]
    rows = [c.encode("utf-8") for c, _ in _user_rows(stores, name)]
    lines = [line.encode("utf-8") for p in sorted((stores.markdown / "memory" / name).glob("*.md"))
             for line in p.read_text(encoding="utf-8").split("\n")]
    counts = dict.fromkeys(STORE_NAMES, 0)
    for value in values:
        counts["session messages"] += sum(_count(m, value) > 0 for m in messages)
        counts["summary"] += _count(summary, value)
        counts["agent.state"] += sum(v == value.lower() for v in profile)
        counts["vector store"] += sum(_count(r, value) > 0 for r in rows)
        counts["markdown"] += sum(_count(line, value) > 0 for line in lines)
    return counts


def _plain(root: Path, script: ForgettingScript, embedder: Any) -> dict[str, int]:
    """A second count, kind by kind, with no parsing and no normalising: the value's bytes in every file, the first
    64 bytes of the fact's embedding, the file names that hold the value's letters and digits in order."""
    value = script.value
    prefix = embedder.embed([f"The user's {script.fact_key} is {value}."])[0].astype("float32").tobytes()[:64]
    letters = re.sub(r"[^a-z0-9]", "", value.lower())
    files = _files(root)
    names = [re.sub(r"[^a-z0-9]", "", p.relative_to(root).as_posix().lower()) for p in files]
    return {"value bytes": sum(_count(p.read_bytes(), value) for p in files),
            "embedding": sum(p.read_bytes().count(prefix) for p in files),
            "file names": sum(letters in n for n in names)}


def _kind(found: str) -> str:
    if found.startswith("text in a file"):
        return "file names"
    if found.startswith("text"):
        return "value bytes"
    return "embedding" if "embedding" in found else "other"


def _digests(stores: Stores, name: str) -> dict[str, str]:
    """sha256 of every file of the user's chat session and markdown folder, by path under the stores' folder."""
    folders = [stores.sessions / f"session_{name}-chat", stores.markdown / "memory" / name]
    return {p.relative_to(stores.root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for folder in folders for p in _files(folder)}


def _calls(agent: Any) -> list[dict[str, Any]]:
    """What each call of a MeteredModel (or an agent's) received and answered."""
    metered = agent if hasattr(agent, "exchanges") else agent.model
    return [{"messages": texts(e["messages"]), "reply": e["reply"].strip()} for e in metered.exchanges]


def record(planted: Planted, as_before: Stores, script: ForgettingScript, *, sources: list[tuple[str, int]],
           summarizer: Any, restored: Any, fresh: dict[str, Any], embedder: Any,
           workspace_dir: Path) -> dict[str, Any]:
    """The evidence of notebook 09's run. `as_before` is the copy of the stores taken just before the forget;
    `sources` the messages forget() reported; `summarizer`, `restored` and each of `fresh` carry a `MeteredModel`."""
    stores, user, other, value = planted.stores, script.user, script.other_user, script.value
    before_names = {name: {p.name for p in message_files(as_before, f"{name}-chat")} for name in script.users}
    groups = {"value": (user, [value]), "near": (user, [script.near_value]),
              "mine": (user, [v for k, v in script.pairs(user) if k != script.near_key]),
              "theirs": (other, [v for _, v in script.kept_pairs()])}
    raw = {when: {label: _by_store(where, name, values, before_names[name])
                  for label, (name, values) in groups.items()}
           for when, where in [("before", as_before), ("after", stores)]}
    scan_before = scan_for(as_before.root, script, embedder)
    scan_after = scan_for(stores.root, script, embedder)
    para_before = paraphrases(as_before.root, value, embedder=embedder, user=user)
    para_after = paraphrases(stores.root, value, embedder=embedder, user=user)

    note, _ = planted.notes[user]
    note_lines = {when: [line for p in sorted((where.markdown / "memory" / user).glob("*.md"))
                         for line in p.read_text(encoding="utf-8").split("\n") if reworded(value) in line]
                  for when, where in [("before", as_before), ("after", stores)]}
    note_files = [p.relative_to(as_before.root).as_posix() for p in sorted((as_before.markdown / "memory" / user)
                                                                         .glob("*.md"))
                  if reworded(value) in p.read_text(encoding="utf-8")]
    note_lineage = [record.to_dict() if record else None
                    for p in sorted((as_before.markdown / "memory" / user).glob("*.md"))
                    for line, record in read_markdown_lineage(p.read_text(encoding="utf-8"))
                    if reworded(value) in line]
    disguised = "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalnum() else c for c in value)
    disguised = disguised.replace(" ", "\u00a0\n")  # full-width letters and digits, a no-break space, a newline
    probe = Path(workspace_dir) / "scan-probe" / "note.md"
    probe.parent.mkdir(exist_ok=True)
    probe.write_text(f"* lives at {disguised}\n", encoding="utf-8")

    held_before = sorted(int(p.stem.split("_")[1]) for p in message_files(as_before, f"{user}-chat")
                         if _count(p.read_bytes(), value))
    old = {p.name: p.read_bytes() for p in message_files(as_before, f"{user}-chat")}
    now = {p.name: p.read_bytes() for p in message_files(stores, f"{user}-chat")}
    saved_before, saved = read_json(agent_json(as_before, f"{user}-chat")), read_json(agent_json(stores, f"{user}-chat"))
    summary = saved["conversation_manager_state"]["summary_message"]
    existed = {p.relative_to(as_before.root).as_posix() for p in _files(as_before.root)}
    theirs = [p for p in scan_for(stores.root, script, embedder, name=other).places if p.file in existed]
    questions = {key: script.question(key) for key in [script.fact_key, *dict(script.pairs(user))]}
    return save_record({
        "script": script.to_dict(),
        "raw": raw,
        "scan": {"before": {"places": len(scan_before.places),
                            "kinds": {k: sum(_kind(p.found) == k for p in scan_before.places)
                                      for k in ("value bytes", "embedding", "file names")},
                            "files": sorted({p.file for p in scan_before.places})},
                 "after": {"places": len(scan_after.places), "files": scan_after.files}},
        "plain": {"before": _plain(as_before.root, script, embedder), "after": _plain(stores.root, script, embedder)},
        "paraphrase": {"before": [p.text for p in para_before.places], "after": [p.text for p in para_after.places]},
        "note": {"text": note, "files": note_files, "lines": note_lines, "lineage": note_lineage,
                 "forget_matches": mentions(note, script.fact_key, [value])},
        "probe": {"text": disguised, "scan_finds": len(scan_for(probe, script, embedder).places),
                  "forget_matches": mentions(disguised, script.fact_key, [value])},
        "sources": [list(s) for s in sources],
        "held_before": held_before,
        "messages": {"before": sorted(old), "now": sorted(now),
                     "changed": sorted(int(n.split("_")[1].split(".")[0]) for n in old if now.get(n) != old[n]),
                     "still_hold": sorted(int(n.split("_")[1].split(".")[0]) for n in old
                                          if n in now and _count(now[n], value))},
        "session_files_checked": check_session(stores.sessions, f"{user}-chat"),
        "removed": saved["conversation_manager_state"]["removed_message_count"],
        "summary": {"before": message_text(saved_before["conversation_manager_state"]["summary_message"]),
                    "after": message_text(summary), "lineage": (message_lineage(summary) or {}).get("messages") or [],
                    "calls": _calls(summarizer)},
        "message_texts": {n.split("_")[1].split(".")[0]: message_text(json.loads(b)["message"]) for n, b in now.items()},
        "rows_left": [(m.get("lineage") or {}).get("messages") for _, m in _user_rows(stores, user)],
        "state_left": {"profile": sorted(saved["state"].get("profile", {})),
                       "lineage": {k: v.get("messages") for k, v in saved["state"].get("lineage", {}).items()}},
        "theirs": {"digests": {"before": _digests(as_before, other), "after": _digests(stores, other)},
                   "scan_stores": sorted({store_of(stores, p) for p in theirs})},
        "questions": questions,
        "restored": _calls(restored),
        "fresh": {name: _calls(agent) for name, agent in fresh.items()},
    }, workspace_dir)


def _holds(text: str, value: str) -> bool:
    return normalise(value) in normalise(text)


def _reply_to(calls: list[dict[str, Any]], question: str) -> str | None:
    """The reply of the call whose last message (the user's) starts with the question."""
    for call in calls:
        role, text = call["messages"][-1]
        if role == "user" and text.strip().startswith(question):
            return call["reply"]
    return None


def claims(record: dict[str, Any]) -> Ledger:
    """Every check of notebook 09, decided from `record` alone."""
    ledger = Ledger(claims=CLAIMS)
    s = record["script"]
    user, other, value, other_value = s["user"], s["other_user"], s["value"], s["other_value"]
    raw_before, raw_after = record["raw"]["before"], record["raw"]["after"]

    # S1: where it landed, counted raw
    landed = sorted(store for store, n in raw_before["value"].items() if n)
    ledger.equal("S1", "before: the fact was in all five stores, counted raw", observed=len(landed),
                 expected=len(STORE_NAMES), what="stores whose files or rows held its bytes: " + ", ".join(landed))
    ledger.equal("S1", "a plain count finds as many places as the byte scan, kind by kind",
                 observed=record["plain"]["before"], expected=record["scan"]["before"]["kinds"],
                 what="value bytes, embedding prefix, file names, counted raw in the copy")

    # C1: gone, by two means that do not share forget()'s matching, and a plain count
    after = record["scan"]["after"]
    ledger.equal("C1", "after: the byte scan finds the fact in no file of the stores", observed=after["places"],
                 expected=0, what=f"places in {after['files']} files")
    ledger.equal("C1", "a plain count agrees, kind by kind", observed=record["plain"]["after"],
                 expected={"value bytes": 0, "embedding": 0, "file names": 0})
    ledger.equal("C1", "after: the paraphrase check finds the fact in no store of the user",
                 observed=record["paraphrase"]["after"], expected=[])
    ledger.equal("C1", "after: no store holds the value, counted raw", observed=raw_after["value"],
                 expected=dict.fromkeys(STORE_NAMES, 0))
    probe = record["probe"]
    ledger.check("C1", "the byte scan matches what forget()'s own matching misses",
                 evidence=f"{probe['text']!r}: the scan finds {probe['scan_finds']}, forget() matches "
                          f"{probe['forget_matches']}",
                 holds=probe["scan_finds"] == 1 and not probe["forget_matches"])

    # S2: sources and lineage
    sources = sorted(i for session, i in record["sources"] if session == f"{user}-chat")
    ledger.equal("S2", "the sources are the message files whose bytes held the value", observed=sources,
                 expected=record["held_before"], what="message indexes")
    left = record["rows_left"]
    ledger.check("S2", "no vector row of the user left names a source message",
                 evidence=f"{len(left)} rows of {user}; the messages each names: {left}",
                 holds=bool(left) and all(r and not set(r) & set(sources) for r in left))
    state = record["state_left"]
    ledger.check("S2", "every state entry left has a lineage, and none names a source",
                 evidence=state["lineage"],
                 holds=set(state["lineage"]) == {f"profile/{k}" for k in state["profile"]}
                 and not any(set(m or []) & set(sources) for m in state["lineage"].values()))

    # S3: the summary
    summary = record["summary"]
    ledger.check("S3", "the summary held the value; the one forget() wrote does not, and is not empty",
                 evidence=f"{len(summary['before'])} -> {len(summary['after'])} characters",
                 holds=_holds(summary["before"], value) and not _holds(summary["after"], value)
                 and bool(summary["after"].strip()))
    sent = [json.dumps(call["messages"], ensure_ascii=False) for call in summary["calls"]]
    ledger.check("S3", "the model that wrote it received messages without the value",
                 evidence=f"{len(sent)} summarizer call(s), holding the value: {sum(_holds(m, value) for m in sent)}",
                 holds=bool(sent) and not any(_holds(m, value) for m in sent))
    named = summary["lineage"]
    call = summary["calls"][0]["messages"] if summary["calls"] else []
    ledger.check("S3", "the summarizer received the folded messages, one reply '(continued)', then its request",
                 evidence=f"{len(named)} folded, then {call[len(named):len(named) + 1]}; "
                          f"{len(call)} messages in all",
                 holds=bool(named) and len(call) == len(named) + 2
                 and call[len(named)] == ["assistant", "(continued)"])
    received = [text for _, text in call[:len(named)]]
    files = [record["message_texts"].get(str(i)) for i in named]
    ledger.check("S2 S3", "the new summary's lineage names the messages its model call received",
                 evidence=f"lineage: messages {named[:1]}...{named[-1:]}; the call's first {len(named)} messages "
                          f"are those files' texts: {files == received}",
                 holds=bool(named) and files == received)

    # S4: the reworded note
    note = record["note"]
    ledger.check("S4", "before: the byte scan passed over the note",
                 evidence=f"the note's file {note['files']}; files the scan found: {record['scan']['before']['files']}",
                 holds=bool(note["files"]) and not set(note["files"]) & set(record["scan"]["before"]["files"]))
    found = [t for t in record["paraphrase"]["before"] if reworded(value) in t]
    ledger.check("S4", "before: the paraphrase check found the note, without the value whole",
                 evidence=f"{len(record['paraphrase']['before'])} places; the note among them: {found}",
                 holds=len(found) == 1 and not _holds(found[0], value))
    ledger.check("S4", "forget()'s own text matching misses the note", evidence=f"{note['text']!r}: forget() "
                 f"matches {note['forget_matches']}", holds=not note["forget_matches"] and bool(note["text"]))
    lineage = note["lineage"]
    ledger.check("S4", "the note's lineage names a source message",
                 evidence=f"the note's line names messages {[r and r['messages'] for r in lineage]}",
                 holds=len(lineage) == 1 and bool(lineage[0]) and set(lineage[0]["messages"]) <= set(sources)
                 and bool(lineage[0]["messages"]))
    ledger.check("C1 S4", "after: the note's reworded value is in no markdown line of the user",
                 evidence=f"lines before: {len(note['lines']['before'])}, after: {len(note['lines']['after'])}",
                 holds=len(note["lines"]["before"]) == 1 and not note["lines"]["after"])

    # S5: what does not descend from the sources stays
    for label, words in [("near", f"{user}'s {s['near_key']}, which shares a word with the value"),
                         ("mine", f"{user}'s other facts"), ("theirs", f"{other}'s facts")]:
        ledger.check("C1 S5", f"{words}: in every store, as many copies in each as before",
                     evidence=f"counted raw: {raw_after[label]}",
                     holds=raw_after[label] == raw_before[label]
                     and all(raw_after[label][store] > 0 for store in STORE_NAMES))
    digests = record["theirs"]["digests"]
    ledger.check("S5", f"{other}'s session and markdown files: the same bytes",
                 evidence=f"{len(digests['after'])} files, each with the sha256 it had before",
                 holds=bool(digests["before"]) and digests["after"] == digests["before"])
    ledger.equal("S5", f"the byte scan still finds {other}'s value in all five stores",
                 observed=record["theirs"]["scan_stores"], expected=sorted(STORE_NAMES))

    # S6: rewritten in place; the sessions
    messages = record["messages"]
    kept = set(messages["before"]) & set(messages["now"])
    added = len(messages["now"]) - len(kept)
    ledger.check("S6", "every message file is still there; those that held the value were rewritten",
                 evidence=f"{len(messages['before'])} files before, {len(kept)} of them still there; changed: "
                          f"{messages['changed']}; holding the value now: {messages['still_hold']}; {added} added "
                          f"since, by the restored session's {len(record['questions'])} questions and replies",
                 holds=kept == set(messages["before"]) and messages["changed"] == record["held_before"]
                 and bool(messages["changed"]) and not messages["still_hold"]
                 and added == 2 * len(record["questions"]))
    ledger.equal("S6", "the session has the shape the SDK reads", observed=record["session_files_checked"],
                 expected=len(messages["now"]) + 2,
                 what="JSON files checked, session.json and agent.json with the message files")
    restored, fresh = record["restored"], record["fresh"]
    first = restored[0]["messages"] if restored else []
    ledger.equal("S6", "a fresh Agent restores the summary and the files after the folded ones",
                 observed=len(first) - 1, expected=1 + len(messages["before"]) - record["removed"],
                 what="messages in the first restored call, before its question")
    ledger.check("S6", "the restored session's first message is the summary forget() wrote",
                 evidence=f"{first[0][1][:60]!r}..." if first else "no call",
                 holds=bool(first) and first[0][1] == summary["after"])
    calls = [json.dumps(c["messages"], ensure_ascii=False) for c in restored + fresh[user]]
    ledger.check("S6", "no call of the restored or the fresh session received the value",
                 evidence=f"{len(calls)} calls, holding the value: {sum(_holds(c, value) for c in calls)}",
                 holds=bool(calls) and not any(_holds(c, value) for c in calls))
    replies = [c["reply"] for c in restored + fresh[user]]
    ledger.check("S6", "no reply gives the value",
                 evidence=f"{len(replies)} replies, giving it: {sum(_holds(r, value) for r in replies)}",
                 holds=bool(replies) and not any(_holds(r, value) for r in replies))
    pairs = [tuple(p) for p in s["others"][user]]
    for label, session in [("restored", restored), ("fresh", fresh[user])]:
        sent = [json.dumps(c["messages"], ensure_ascii=False) for c in session]
        got = [v for _, v in pairs if any(_holds(c, v) for c in sent)]
        answered = [_reply_to(session, record["questions"][k]) or "" for k, _ in pairs]
        ok = [v for (_, v), reply in zip(pairs, answered) if _holds(reply, v)]
        ledger.check("S6", f"the {label} session received each of {user}'s facts that stay, and gives each",
                     evidence=f"received {len(got)} of {len(pairs)}; replies holding their value: {len(ok)}: "
                              + " | ".join(answered),
                     holds=len(got) == len(ok) == len(pairs))
    theirs = _reply_to(fresh.get(other, []), record["questions"][s["fact_key"]]) or ""
    ledger.check("C1 S6", f"{other}'s fresh session still gives {other}'s value",
                 evidence=repr(theirs), holds=_holds(theirs, other_value))
    return ledger
