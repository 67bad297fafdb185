"""Notebook 14's ledger: corrections that became procedures, asked first and carried in every later system prompt.

The evidence never comes from the lesson's tables or printouts:
- what each call received (its system prompt, its messages, the `add_memory` calls and their results) and what it
  answered is read at the model (a `MeteredModel`'s `exchanges`); each session is a fresh agent, so a call that
  receives a single message opens the next session;
- the store file, the guard's audit file, the application's answer log and the copies of the store file taken while
  the owner was asked are read from the workspace with `json`;
- the diff over sessions is recounted line by line as multisets, not with `difflib`.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from companion.checks import save_record
from companion.memory.procedural import PROCEDURES_HEADING, QUESTION
from companion.models.backends import resolve_backend, resolve_bedrock_endpoint
from companion.support.ledger import Ledger

CLAIMS = {
    "C1": "a correction becomes an instruction only with the owner's yes; a hook puts it in every later session's prompt",
    "S1": "add_memory writes each procedure to the store, with the session it was learned in",
    "S2": "the owner is asked before every write; anyone else's instruction is refused without asking",
    "S3": "a BeforeInvocationEvent hook rebuilds the system prompt from the base prompt and the stored procedures",
    "S4": "the instructions diffed over sessions add a blank line and a heading once, then one line per procedure, "
          "and remove nothing; the replies change",
}


def _said(message: dict[str, Any]) -> str:
    return " ".join(b["text"] for b in message["content"] if "text" in b).strip()


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if path.exists() else []


def record(recorder: Any, plain: Any, *, sessions: list[list[tuple[str, str]]], base_prompt: str, owner: str,
           other: str, backend: str | None, workspace_dir: Path) -> dict[str, Any]:
    """The evidence of notebook 14's run. `recorder` is the `MeteredModel` of every session's agent, each session a
    fresh agent; `plain` the one of the agents without procedural memory; `sessions` the script."""
    workspace_dir = Path(workspace_dir)
    calls, uses, results, session = [], {}, {}, 0
    for x in recorder.exchanges:
        messages = x["messages"]
        if len(messages) == 1:  # a fresh agent's first call: the next session begins
            session += 1
        calls.append({"session": session, "system_prompt": x["system_prompt"] or "",
                      "said": _said(messages[-1]) if messages else "", "reply": x["reply"]})
        asked = ""
        for message in messages:
            if message["role"] == "user" and _said(message):
                asked = _said(message)
            for block in message["content"]:
                if "toolUse" in block and (session, block["toolUse"]["toolUseId"]) not in uses:
                    use = block["toolUse"]  # tool use ids are unique within a session's conversation
                    uses[session, use["toolUseId"]] = {
                        "name": use["name"], "entries": (use.get("input") or {}).get("entries"),
                        "session": session, "asked_by_line": asked}
                if "toolResult" in block:
                    result = block["toolResult"]
                    results[session, result["toolUseId"]] = {"status": result["status"], "text": " ".join(
                        c.get("text", "") for c in result["content"])}
    answers = _jsonl(workspace_dir / "answers.jsonl")
    store_file = workspace_dir / "procedures.json"
    return save_record({
        "offline_rules": resolve_backend(backend) == "offline" or resolve_bedrock_endpoint() == "local",
        "owner": owner,
        "other": other,
        "base_prompt": base_prompt,
        "sessions": [[list(turn) for turn in turns] for turns in sessions],
        "calls": calls,
        "tool_calls": [{"id": i, **use, **({"result": results[s, i]} if (s, i) in results else {})}
                       for (s, i), use in uses.items()],
        "store": json.loads(store_file.read_text(encoding="utf-8")) if store_file.exists() else [],
        "audit": [{k: row.get(k) for k in ("entry", "action", "rule", "speaker")}
                  for row in _jsonl(workspace_dir / "audit.jsonl")],
        "answers": answers,
        "asked_copies": [(workspace_dir / f"asked-{n}.json").read_text(encoding="utf-8")
                         for n in range(1, len(answers) + 1)],
        "plain": [{"said": _said(x["messages"][-1]), "reply": x["reply"]} for x in plain.exchanges],
    }, workspace_dir)


def _quoted(question: str) -> str:
    return question.partition("“")[2].partition("”")[0]


def _question_replies(calls: list[dict[str, Any]]) -> list[str]:
    """The reply to the owner's question in each session, in order (the last call that received it)."""
    found: dict[int, str] = {}
    for call in calls:
        if call["said"] == QUESTION:
            found[call["session"]] = call["reply"]
    return [found[s] for s in sorted(found)]


def claims(record: dict[str, Any]) -> Ledger:
    """Every check of notebook 14, decided from `record` alone."""
    ledger = Ledger(claims=CLAIMS)
    stored = [r["text"] for r in record["store"]]
    speaker_of = {line: who for turns in record["sessions"] for who, line in turns}
    memory_calls = [c for c in record["tool_calls"] if c["name"] == "add_memory"]
    succeeded = [e for c in memory_calls if c.get("result", {}).get("status") == "success" for e in c["entries"] or []]
    ledger.check("S1", "each stored procedure came from an add_memory call whose result reached the model as success",
                 evidence=f"{len(stored)} stored; add_memory calls {len(memory_calls)}, their entries that "
                          f"succeeded: {succeeded}",
                 holds=bool(stored) and sorted(stored) == sorted(set(succeeded)))
    session_of = {e: c["session"] for c in memory_calls for e in c["entries"] or []}
    kept = {r["text"]: r["session"] for r in record["store"]}
    ledger.check("S1", "each procedure keeps the session whose call asked for it",
                 evidence=f"in the file: {kept}; sessions of the add_memory calls: "
                          f"{ {t: session_of.get(t) for t in kept} }",
                 holds=bool(kept) and all(session_of.get(t) == s for t, s in kept.items()))

    confirmed = {row["entry"] for row in record["audit"] if row["action"] == "confirm"}
    said_yes = {_quoted(a["asked"]) for a in record["answers"] if a["response"] == "yes"}
    ledger.check("C1 S2", "every stored procedure was asked about (audit) and answered yes (answer log)",
                 evidence=f"{len(stored)} stored; with a confirm row: {len(set(stored) & confirmed)}; answered yes: "
                          f"{len(set(stored) & said_yes)}",
                 holds=bool(stored) and set(stored) <= confirmed and set(stored) <= said_yes)
    asked_texts = [_quoted(a["asked"]) for a in record["answers"]]
    copies = record["asked_copies"]
    held_then = [t for t, copy in zip(asked_texts, copies) if copy and t in [r["text"] for r in json.loads(copy)]]
    ledger.check("S2", "each was asked about while the store file did not hold it",
                 evidence=f"the store file while asking: {[len(c) for c in copies]} bytes; stored ones asked: "
                          f"{len(set(stored) & set(asked_texts))} of {len(stored)}; holding the one asked: {held_then}",
                 holds=bool(stored) and set(stored) <= set(asked_texts) and not held_then)
    refused = [row for row in record["audit"] if row["action"] == "deny"]
    others = [c for c in memory_calls if speaker_of.get(c["asked_by_line"]) == record["other"]]
    prompts = [c["system_prompt"] for c in record["calls"]]
    foreign = [e for c in others for e in c["entries"] or []]
    ledger.check("S2", "the other participant's instruction was refused by the speaker rule, never asked, in no prompt",
                 evidence=f"audit refusals: {[(r['rule'], r['speaker']) for r in refused]}; the other's add_memory "
                          f"results: {[c.get('result', {}).get('text', '')[:40] for c in others]}; asked: "
                          f"{[e for e in foreign if e in asked_texts]}; in prompts: "
                          f"{sum(e in p for e in foreign for p in prompts)}",
                 holds=bool(others) and [(r["rule"], r["speaker"]) for r in refused] == [("speaker", record["other"])]
                 and all(c.get("result", {}).get("text", "").startswith("DENIED: speaker") for c in others)
                 and not any(e in asked_texts or e in stored or any(e in p for p in prompts) for e in foreign))

    learned = {r["text"]: r["session"] for r in record["store"]}
    later = [(text, call) for text, session in learned.items() for call in record["calls"]
             if isinstance(session, int) and call["session"] > session]
    carried = sum(text in call["system_prompt"] for text, call in later)
    ledger.check("C1 S3", "every procedure is in the system prompt of every call of every later session",
                 evidence=f"{len(learned)} procedures; (procedure, later call) pairs: {len(later)}; the prompt "
                          f"carries it in {carried}",
                 holds=bool(later) and carried == len(later))
    base = record["base_prompt"]

    def rebuilt(prompt: str) -> bool:
        lines = prompt.splitlines()
        if lines == [base]:
            return True
        listed = [line.removeprefix("- ") for line in lines[3:]]
        return lines[:3] == [base, "", PROCEDURES_HEADING] and listed == stored[:len(listed)] and bool(listed)

    odd = [p for p in dict.fromkeys(prompts) if not rebuilt(p)]
    ledger.check("S3", "every prompt the model received is the base prompt, then stored procedures in stored order",
                 evidence=f"{len(prompts)} calls, {len(set(prompts))} distinct prompts; other prompts: {odd}",
                 holds=bool(prompts) and not odd)

    distinct = list(dict.fromkeys(prompts))
    added, removed = [], []
    for before, after in zip(distinct, distinct[1:]):
        b, a = Counter(before.splitlines()), Counter(after.splitlines())
        added += [line.removeprefix("- ") for line in (a - b).elements()]
        removed += list((b - a).elements())
    ledger.check("C1 S4", "the diffs add a blank line, the heading and each procedure, and remove nothing",
                 evidence=f"{len(distinct)} distinct prompts; lines added (counted without difflib): {len(added)}, "
                          f"blank {added.count('')}, heading {added.count(PROCEDURES_HEADING)}, procedures in "
                          f"stored order {[a for a in added if a in stored] == stored}; removed {len(removed)}",
                 holds=[a for a in added if a in stored] == stored and added.count("") == 1
                 and added.count(PROCEDURES_HEADING) == 1 and len(added) == len(stored) + 2 and not removed)

    replies = _question_replies(record["calls"])
    plain = [c["reply"] for c in record["plain"] if c["said"] == QUESTION]
    claim = "session 1 answers in feet and 12-hour time, session 4 in metres, 24-hour, with the ticket; plain, in feet"
    if record["offline_rules"]:
        last = replies[-1] if replies else ""
        metres = f"{15 * 0.3048:.1f} m"  # session 4's 15 feet, converted here
        ledger.check("S4", claim,
                     evidence=f"session 1: {replies[0].strip() if replies else None!r}; session 4: {last.strip()!r}; "
                              f"without procedures, session 4: {plain[-1].strip() if plain else None!r}",
                     holds=len(replies) == 4 and "30 feet" in replies[0] and "3 pm" in replies[0]
                     and all(w in last for w in (metres, "11:00", "OPS-7002")) and "feet" not in last
                     and len(plain) == 4 and "15 feet" in plain[-1] and "11 am" in plain[-1])
    else:
        ledger.skip("S4", claim, reason="a real model words units, times and ticket numbers its own way")
    return ledger
