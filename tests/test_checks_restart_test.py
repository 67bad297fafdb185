"""Notebook 01's checks (companion/checks/restart_test.py), each shown failing on a broken copy of the recorded run."""

from __future__ import annotations

from datetime import datetime, timedelta

from checks_harness import broken, check_suite, load_record

from companion.checks import restart_test


def later(stamp: str, seconds: float) -> str:
    return (datetime.fromisoformat(stamp) + timedelta(seconds=seconds)).isoformat()


def stored(record):
    return record["sessions"][record["session_id"]]["messages"]


def theirs(record):
    return record["sessions"][record["other_session_id"]]["messages"]


def writer_said(record, session, name, text):
    record["writers"]["stdout"][session][name] = text


def lose_the_last_reply(record):
    record["writers"]["sessions"]["with-lock"].pop()


def fact_in_environment(record):
    """The second process inherited the facts in an environment variable: they did not cross in a file only."""
    record["environment_with_facts"] = ["USER_FACTS"]


def a_writer_failed(record):
    """A writer that crashed after writing its turn: an error was raised, so the loss was not silent."""
    record["writers"]["exit codes"]["no-lock"]["writer-2"] = 1


def a_writer_wrote_elsewhere(record):
    """A writer that said it restored 2 messages but wrote its turn as messages 4 and 5: no overwrite to explain."""
    writer_said(record, "no-lock", "writer-2", "messages restored: 2\nreply: ok\nmessages now: 4\n"
                "message ids written: [4, 5]\n")


BREAKAGES = {
    # the two processes overlapped: the second started before the first had exited
    "two OS processes, neither of them this kernel; the second started after the first exited":
        lambda r: r["processes"]["recall"].update(started=later(r["processes"]["plant"]["ended"], -0.5)),
    # the second process was told the facts on its command line
    "the second process was given neither fact: its arguments are the same program, backend, id and folder and a "
    "question; no variable of its environment holds the facts":
        lambda r: r["processes"]["recall"]["args"].__setitem__(-1, "I am Pin and I like 42. What is my name?"),
    # the plant wrote its message only after the second process had started
    "the facts were in a file before the second process started: message_0.json":
        lambda r: stored(r)[0].update(created_at=later(r["processes"]["recall"]["started"], 0.1)),
    # a second process that restored nothing could not answer
    "the second process's reply, saved as message_3.json, gives both facts":
        lambda r: stored(r)[3].update(text="I cannot see your name or your favorite number in this conversation."),
    "the second process restored every message on disk when it started":
        lambda r: r["processes"]["recall"].update(stdout="messages restored: 0\nreply: ?\nmessages now: 2\n"),
    # a session whose agent.json was never written
    "the session folder holds session.json, agent.json and one file per message":
        lambda r: r["sessions"][r["session_id"]]["files"].remove("agents/agent_default/agent.json"),
    # the first turn's reply written by the second process: one file, then three
    "each turn added two message files, the prompt and the reply: 0 and 1 by the first process, 2 and 3 by the second":
        lambda r: stored(r)[1].update(created_at=later(r["processes"]["recall"]["started"], 0.1)),
    # a session manager that ignored the id and restored the first session
    "another session id got a folder of its own; its first message is its own question":
        lambda r: theirs(r)[0].update(text=stored(r)[0]["text"]),
    # another id that still answered: a leak between sessions
    "its reply gives neither fact, where the same question on the first id gave both":
        lambda r: theirs(r)[1].update(text="Your name is Pin and your favorite number is 42."),
    # without a lock, the second writer restored the first's turn: no race, nothing lost
    "without a lock every writer restored 2 messages, wrote its turn as messages 2 and 3 and exited with 0, yet one "
    "turn reached disk":
        lambda r: writer_said(r, "no-lock", "writer-2",
                              "messages restored: 4\nreply: ok\nmessages now: 6\nmessage ids written: [4, 5]\n"),
    "with the lock none was lost: every prompt on disk, each followed by its reply":
        lose_the_last_reply,
    # a count that took the files before the writers as lost
    "the messages lost the lesson prints agree with a recount from the files":
        lambda r: r["writers"]["table"].update({"no-lock": 4}),
}

globals().update(check_suite(restart_test, "01_restart_test", BREAKAGES))


NO_LOCK = ("without a lock every writer restored 2 messages, wrote its turn as messages 2 and 3 and exited with 0, "
           "yet one turn reached disk")


def status_of(record, words):
    (row,) = [r for r in restart_test.claims(record).rows if r.claim == words]
    return row.status


def test_a_fact_in_the_environment_fails_the_no_fact_check():
    """The second way a fact could reach the second process besides its arguments: the environment it inherits."""
    words = ("the second process was given neither fact: its arguments are the same program, backend, id and folder "
             "and a question; no variable of its environment holds the facts")
    assert status_of(broken(load_record("01_restart_test"), fact_in_environment), words) == "FAILS"


def test_a_writer_that_wrote_other_ids_fails_the_no_lock_check():
    """The writers' own report of the files they wrote is checked too, not only what they restored."""
    assert status_of(broken(load_record("01_restart_test"), a_writer_wrote_elsewhere), NO_LOCK) == "FAILS"


def test_a_writer_that_failed_fails_the_no_lock_check():
    """A turn lost with an error is not the silent loss the lesson shows."""
    assert status_of(broken(load_record("01_restart_test"), a_writer_failed), NO_LOCK) == "FAILS"
