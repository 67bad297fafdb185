"""Notebook 10's checks (companion/checks/delete_leaves_behind.py), each shown failing on a broken copy of the
recorded run."""

from __future__ import annotations

from checks_harness import broken, check_suite, load_record

from companion.checks import delete_leaves_behind


def recipe(r, name):
    return r["recipes"][name]


def seen(r, what):
    return next(t for t in r["forget"]["transient"] if t["what"] == what)


def journal_held_nothing(r):  # a database in WAL mode: no rollback journal with the old pages
    seen(r, "rollback journal").update(raw=0, embedding=0, shown=0)


def temporary_with_the_value(r):  # a redaction that missed a copy: the new file holds the value before its rename
    next(t for t in r["forget"]["transient"] if t["what"] == "temporary file").update(raw=1)


BREAKAGES = {
    # a SQLite built with secure_delete on by default: the DELETE itself zeroed the text
    "a plain DELETE: SQL finds no row, the file still holds the text":
        lambda r: recipe(r, "DELETE")["raw"].update(value=0),
    # a DELETE that missed one row: its text is a live row's
    "the scan places that text in pages no live row owns":
        lambda r: recipe(r, "DELETE")["where"].__setitem__(0, "page 4 (memories): a live row"),
    "FTS5's index data still holds a word of the value (read with SQL)":
        lambda r: recipe(r, "DELETE").update(index_words=[]),
    # an index that rewrote the word's segment in place instead of appending the deletion's record
    "the DELETE appended a segment that holds the word: two segments, where there was one":
        lambda r: recipe(r, "DELETE").update(index_segments=1),
    "eight recipes, and SELECT finds no row after any of them":
        lambda r: recipe(r, "DELETE + VACUUM").update(rows=1),
    "the scan finds nothing after a merge with secure_delete or VACUUM, and only then":
        lambda r: recipe(r, "DELETE + secure_delete").update(scan=[]),
    # a word of the value left in an index page after the cleanest recipe
    "a raw count of the value and its own words agrees, recipe by recipe":
        lambda r: recipe(r, "DELETE + merge + VACUUM")["raw"].update(words=1),
    "without a merge, FTS5's index data keeps a word of the value; with one, none":
        lambda r: recipe(r, "DELETE + merge").update(index_words=["lane"]),
    # a merge that overwrote the old segments' pages: only the rows' text is left
    # a secure_delete that only unlinked the cells: the text still where the plain DELETE left it
    "secure_delete wrote zeros where the plain DELETE left the text (both copies, read raw)":
        lambda r: r["secure_delete_zeroed"].__setitem__(0, False),
    "a merge alone: no word in the index data, yet the file's bytes hold the word outside the text, and the text":
        lambda r: recipe(r, "DELETE + merge")["raw"].update(words=3, words_alone=0),
    "forget()'s rollback journal held the value: its places, counted raw, are the table's":
        journal_held_nothing,
    # a forget without secure_delete: the deleted rows' text was still in the file before VACUUM
    "forget()'s DELETE, with secure_delete and a merge, left no copy even before VACUUM (its copy, read raw)":
        lambda r: seen(r, "database before VACUUM").update(raw=3),
    "every temporary file held none of the value; the first old file, agent.json, held it (copies, read raw)":
        temporary_with_the_value,
    # a write in place: agent.json rewritten through its old file, the temporary file's bytes never became it
    "the first temporary file was renamed over agent.json: the new file holds its bytes (digests)":
        lambda r: r["forget"]["renamed"].update(temporary=False),
    # a forget without VACUUM: free pages left
    "after forget(): no file of the stores holds the value, and the file has no free page":
        lambda r: r["forget"]["after"].update(free_pages_header=3, free_pages=3),
    # a forget killed before it cleaned up
    "no journal, temporary or plan file is left":
        lambda r: r["forget"]["leftovers"].append(".forget-plan.json"),
    # a backup taken after the forget proves nothing about restoring; one that missed the markdown folder, little
    "the backup, taken before the forget, holds the value in all five stores":
        lambda r: r["backup"]["stores"].remove("markdown"),
    # a log that kept what was forgotten: the request with the value in it
    "the log holds the request as a user and a key, never the value (read again, and raw)":
        lambda r: r["log"].update(raw=1),
    # a restore with no replay
    "after the replay, the restored stores hold none of it, and the other user's value stays":
        lambda r: r["restored"].update(raw=9, scan=11),
    "the user's file decrypted to all the user's memories while the key existed":
        lambda r: r["shred"]["decrypted_before"].pop(1),
    # a plaintext temporary file left beside the ciphertext
    "no file in shred/ ever held the value's bytes":
        lambda r: r["shred"].update(raw=1),
    # a key copied before the shred, still on disk
    "after the shred, the user's key file is gone and the file cannot be read":
        lambda r: r["shred"].update(key_file=True),
    # one key shared by every user: the other user's key opens the backup
    "the backup is the same ciphertext, and no key left opens it":
        lambda r: r["shred"].update(backup_opens_with=["grace"]),
    "grace's file still decrypts, with grace's own facts":
        lambda r: r["shred"].update(other_reads=[]),
}

globals().update(check_suite(delete_leaves_behind, "10_what_a_delete_leaves_behind", BREAKAGES))


def test_a_table_that_counts_more_places_than_the_journal_holds_fails():
    """The journal's places must lie between the whole-word count and the count anywhere (a value ending in a digit
    can touch a binary byte that is a digit too): a table claiming more than the bytes hold fails."""
    record = broken(load_record("10_what_a_delete_leaves_behind"),
                    lambda r: seen(r, "rollback journal").update(shown=seen(r, "rollback journal")["raw_anywhere"]
                                                                 + seen(r, "rollback journal")["embedding"] + 1))
    row = delete_leaves_behind.claims(record).row(
        "forget()'s rollback journal held the value: its places, counted raw, are the table's")
    assert row.status == "FAILS"
