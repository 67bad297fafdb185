"""Notebook 08's checks (companion/checks/what_to_remember.py), each shown failing on a broken copy of the recorded
run; and a real model's run, on which the checks about the offline model's own decisions are skipped."""

from __future__ import annotations

from checks_harness import check_suite

from companion.checks import what_to_remember

QUESTION = "What is my programming language?"


def rows(record, store):
    return record["stores"][store]["rows"]


def call(record, reader, question=QUESTION):
    return next(c for c in record["reads"][reader]["calls"] if c["question"].startswith(question))


def row(record, store, content):
    return next(r for r in rows(record, store) if r["content"] == content)


def drop_extraction_call(record):
    calls = record["writes"]["extraction"]
    calls.remove(next(c for c in calls if c["kind"] == "extraction"))


def keep_the_quiet_line(record):
    """An extractor that stored the sentence that names no attribute, with its lineage."""
    quiet = next(line for line, (key, _) in record["script"]["labels"].items() if key is None)
    at = next(int(i) for i, (_, text) in record["sessions"]["extraction"]["messages"].items() if text == quiet)
    copied = dict(rows(record, "extraction")[0], id="m099", content=quiet, key=None, value=None)
    copied["lineage"] = dict(copied["lineage"], messages=[at, at + 1])
    rows(record, "extraction").append(copied)


BREAKAGES = {
    # a dump that missed a message
    "dumping stores every message of its session":
        lambda r: rows(r, "dump").pop(3),
    # an extractor that returned every message as it was said
    "extraction stores several (3+) times fewer memories than dumping":
        lambda r: r["stores"]["extraction"].update(rows=list(rows(r, "dump"))),
    # a fresh session that did not get the editor back
    "extraction answers as many questions as dumping in a fresh session, none counted from two values":
        lambda r: call(r, "extraction-recall", "What is my editor?").update(
            reply="I cannot see your editor in this conversation."),
    # a dump that filtered the chatter out
    "dumping stores the chatter too":
        lambda r: r["stores"]["dump"].update(rows=[x for x in rows(r, "dump") if x["content"] != "ok"]),
    # an extractor that got a value wrong
    "every extraction memory states the value the user gave for its attribute":
        lambda r: row(r, "extraction", "The user's home city is Lima.").update(
            content="The user's home city is Lisbon."),
    # a search that returned the user's line without the reply that echoes it
    "for every question, dumping injects the user's fact and the reply repeating it":
        lambda r: call(r, "dump-recall", "What is my editor?")["entries"].pop(),
    "dumping injects more text than extraction for every question":
        lambda r: call(r, "dump-recall", "What is my editor?").update(entries=[]),
    "extraction costs one more model call per turn": drop_extraction_call,
    "the fact turn that states no attribute leaves no memory, while the dump keeps it": keep_the_quiet_line,
    # a dump whose search had already dropped the old value
    "the dump and the plain extraction store each inject both values":
        lambda r: call(r, "dump-recall").update(entries=call(r, "dump-recall")["entries"][2:]),
    # a model that answers the first value it reads
    "with both stored, the offline model answers the value the store returned last":
        lambda r: call(r, "reversed-recall").update(reply="Your programming language is Go."),
    # a store that deleted the old record instead of ending it
    "the old value is kept in the file, ended, pointing to the new one":
        lambda r: r["stores"]["selective"].update(rows=[x for x in rows(r, "selective") if x["id"] != "m002"]),
    "the fresh session answers the new value, not the old one":
        lambda r: call(r, "selective-recall").update(reply="Your programming language is Python."),
    # a store that kept both values current
    "read in one user's scope, the superseding store injects one value; its file keeps both, the old as history":
        lambda r: call(r, "ada-scoped")["entries"].append("The user's programming language is Python."),
    # a scope leak: the second user's editor reached the first user's call
    "each entry a scoped session received is a record of that user in the file":
        lambda r: call(r, "ada-scoped", "What is my editor?")["entries"].append("The user's editor is Emacs."),
    # a store that filtered by user even without a scope
    "without the scope, the second user's memories reach the first user's calls":
        lambda r: [c.update(entries=[e for e in c["entries"] if "Emacs" not in e and "Rust" not in e
                                     and "Oslo" not in e]) for c in r["reads"]["ada-unscoped"]["calls"]],
    # an entry that says whose it is
    "the unscoped calls received both users' memories side by side, none naming its user":
        lambda r: call(r, "ada-unscoped", "What is my editor?")["entries"].append("grace's editor is Emacs."),
    "each user's scoped session answers with that user's values; unscoped, the other's":
        lambda r: call(r, "grace-scoped", "What is my editor?").update(reply="Your editor is Vim."),
    # a lineage that names chatter instead of the fact's messages
    "every memory an agent wrote in a session names messages that state it":
        lambda r: rows(r, "extraction")[1]["lineage"].update(messages=[2, 3], message_files=["message_2.json",
                                                                                             "message_3.json"]),
    "each record's lineage names its user and when it was written":
        lambda r: rows(r, "extraction")[0]["lineage"].update(user=None),
    "each record's message ids are the tracking ids in the named message files":
        lambda r: rows(r, "dump")[0]["lineage"].update(message_files=["message_1.json"]),
    "a superseded memory names the record and the messages that replaced it":
        lambda r: row(r, "selective", "The user's programming language is Python.")["lineage"]["replaced_by"].update(
            messages=[8, 9]),
    # a hook that left its stamp in the messages sent
    "the stamps on the messages reach no model call":
        lambda r: r["stamps"].update(stamped=3),
}

VARIANTS = {"a real model": lambda r: r.update(offline_rules=False)}

globals().update(check_suite(what_to_remember, "08_what_to_remember", BREAKAGES, VARIANTS))
