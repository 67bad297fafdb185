"""Notebook 09's checks (companion/checks/forgetting.py), each shown failing on a broken copy of the recorded run."""

from __future__ import annotations

from checks_harness import check_suite

from companion.checks import forgetting

NOTE = "home address: Harbour Lane, no. 12"
SAID = "My home address is 12 Harbour Lane."


def raw(r, when, label):
    return r["raw"][when][label]


def reply_to(calls, question):
    return next(c for c in calls if c["messages"][-1][1].startswith(question))


def the_pub_went_from_one_message(r):
    raw(r, "after", "near")["session messages"] -= 1


def never_in(label, store):
    def breakage(r):
        raw(r, "before", label)[store] = raw(r, "after", label)[store] = 0
    return breakage


def one_more_file(r):
    first = next(iter(r["theirs"]["digests"]["after"]))
    r["theirs"]["digests"]["after"][first] = "0" * 64


BREAKAGES = {
    # a summarizer that refused: the summary never held the fact
    "before: the fact was in all five stores, counted raw":
        lambda r: raw(r, "before", "value").update(summary=0),
    # a scan that missed a page of the SQLite file
    "a plain count finds as many places as the byte scan, kind by kind":
        lambda r: r["scan"]["before"]["kinds"].update({"value bytes": 8}),
    "after: the byte scan finds the fact in no file of the stores":
        lambda r: r["scan"]["after"].update(places=2),
    # a free page that kept the row's text
    "a plain count agrees, kind by kind":
        lambda r: r["plain"]["after"].update({"value bytes": 1}),
    # the forget by text: the reworded note stayed
    "after: the paraphrase check finds the fact in no store of the user":
        lambda r: r["paraphrase"]["after"].append(f"- {NOTE}"),
    # a summary that was not written again
    "after: no store holds the value, counted raw":
        lambda r: raw(r, "after", "value").update(summary=1),
    # a scan that matched the way forget() does: it missed the full-width disguise
    "the byte scan matches what forget()'s own matching misses":
        lambda r: r["probe"].update(scan_finds=0),
    # a forget that missed the reply of turn 6, which repeats the address
    "the sources are the message files whose bytes held the value":
        lambda r: r["sources"].pop(),
    "no vector row of the user left names a source message":
        lambda r: r["rows_left"].append([0, 1]),
    "every state entry left has a lineage, and none names a source":
        lambda r: r["state_left"]["lineage"].update({"profile/favorite pub": [0]}),
    "the summary held the value; the one forget() wrote does not, and is not empty":
        lambda r: r["summary"].update(after=r["summary"]["before"]),
    # a summarizer call without the filler reply: two user messages in a row, which Bedrock refuses
    "the summarizer received the folded messages, one reply '(continued)', then its request":
        lambda r: r["summary"]["calls"][0]["messages"].pop(len(r["summary"]["lineage"])),
    # forget() handed the summarizer the messages before redacting them
    "the model that wrote it received messages without the value":
        lambda r: r["summary"]["calls"][0]["messages"][0].__setitem__(1, SAID),
    # a lineage off by one: it names a message the call did not receive
    "the new summary's lineage names the messages its model call received":
        lambda r: r["summary"].update(lineage=r["summary"]["lineage"] + [11]),
    # a scan that found the note after all (so the note would prove nothing about the scan)
    "before: the byte scan passed over the note":
        lambda r: r["scan"]["before"]["files"].append(r["note"]["files"][0]),
    "before: the paraphrase check found the note, without the value whole":
        lambda r: r["paraphrase"].update(before=[t for t in r["paraphrase"]["before"] if NOTE not in t]),
    "forget()'s own text matching misses the note":
        lambda r: r["note"].update(forget_matches=True),
    # a note-taker that recorded the pub's messages as its lineage
    "the note's lineage names a source message":
        lambda r: r["note"]["lineage"][0].update(messages=[2]),
    "after: the note's reworded value is in no markdown line of the user":
        lambda r: r["note"]["lines"]["after"].append(f"- {NOTE}"),
    # a forget by text: the pub's message shares "Harbour" and lost a sentence
    "ada's favorite pub, which shares a word with the value: in every store, as many copies in each as before":
        the_pub_went_from_one_message,
    # a profile hook that never kept the user's other facts: none before, none after
    "ada's other facts: in every store, as many copies in each as before":
        never_in("mine", "agent.state"),
    # a forget without the user scope: grace's address went too
    "grace's facts: in every store, as many copies in each as before":
        lambda r: raw(r, "after", "theirs").update({"vector store": 3}),
    "grace's session and markdown files: the same bytes":
        one_more_file,
    "the byte scan still finds grace's value in all five stores":
        lambda r: r["theirs"]["scan_stores"].remove("summary"),
    # a forget that deleted message_0.json instead of rewriting it (a restore then writes one file fewer)
    "every message file is still there; those that held the value were rewritten":
        lambda r: r["messages"]["now"].remove("message_0.json"),
    "the session has the shape the SDK reads":
        lambda r: r.update(session_files_checked=r["session_files_checked"] - 1),
    # the positional offset skipped one kept message (a file deleted instead of rewritten)
    "a fresh Agent restores the summary and the files after the folded ones":
        lambda r: r["restored"][0]["messages"].pop(1),
    "the restored session's first message is the summary forget() wrote":
        lambda r: r["restored"][0]["messages"][0].__setitem__(1, r["summary"]["before"]),
    # a vector row that kept the fact, injected into a fresh call
    "no call of the restored or the fresh session received the value":
        lambda r: r["fresh"]["ada"][0]["messages"][-1].__setitem__(1, "What is my home address?\n<memory>" + SAID),
    "no reply gives the value":
        lambda r: r["restored"][0].update(reply="Your home address is 12 Harbour Lane."),
    "the restored session received each of ada's facts that stay, and gives each":
        lambda r: reply_to(r["restored"], "What is my team?").update(reply="I cannot see your team."),
    "the fresh session received each of ada's facts that stay, and gives each":
        lambda r: reply_to(r["fresh"]["ada"], "What is my editor?").update(reply="I cannot see your editor."),
    "grace's fresh session still gives grace's value":
        lambda r: r["fresh"]["grace"][0].update(reply="I cannot see your home address in this conversation."),
}

globals().update(check_suite(forgetting, "09_forgetting_on_purpose", BREAKAGES))
