"""Notebook 10's ledger: what a delete leaves in a SQLite file, around it, in a backup, and what a destroyed key forgets.

The evidence never comes from the lesson's tables:
- each recipe's copy of the SQLite file is read again here: its rows with SQL, its raw bytes (the value whole, and
  the value's own words as whole words, so "0142" inside a timestamp's "12.014231" never counts), FTS5's index data
  with SQL (the blocks of `memory_keywords_data`, not the file's pages), its free-page count from the file's header;
- the bytes where the plain DELETE's copy holds the value's text are read raw in the secure_delete copy (zeros);
- the files forget() showed its observer are read from the copies the observer kept, raw (the text, and the first
  bytes of the fact's embedding); the first temporary file's copy is compared, by digest, with agent.json now;
- the log of forget requests is read again (its JSON lines, and its raw bytes for the value);
- FTS5's segments that hold the value's words are counted with SQL in the backup (the file before any delete) and in
  the plain DELETE's copy;
- the shredded files are read again: the ciphertext raw, each remaining key tried on the backup.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np

from companion.checks import save_record
from companion.measure.byte_scan import index_terms, normalise
from companion.measure.forgetting import Stores
from companion.measure.forgetting_setup import ForgettingScript, scan_for, store_of
from companion.memory.shredding import EncryptedMemory, KeyRing, ShreddedError, can_decrypt
from companion.memory.vector_store import connect
from companion.support.ledger import Ledger

CLAIMS = {
    "C1": "a DELETE hides a row from SELECT but leaves its text until a merge plus secure_delete or VACUUM; "
          "destroying a key forgets a whole user, backups included",
    "S1": "after a plain DELETE, SELECT finds no row, yet the file keeps the text, and the word in two segments of "
          "FTS5's index",
    "S2": "of eight recipes, only an FTS5 merge with secure_delete or VACUUM leaves nothing; a merge alone leaves the "
          "old segments' bytes",
    "S3": "forget() leaves no free page, but while it ran its rollback journal and the old agent.json held the value",
    "S4": "a restored backup brings the fact back; replaying the logged forget removes it again",
    "S5": "crypto-shredding forgets a whole user, backup included, and no other user",
}


def _whole(word: bytes) -> re.Pattern[bytes]:
    """A word as a whole, not inside a longer run of letters or digits; FTS5's main index writes a term after a
    "0" prefix byte, so "0lane" holds "lane" (and "00142" holds "0142")."""
    return re.compile(rb"(?<![0-9a-z])0?" + re.escape(word) + rb"(?![0-9a-z])")


def own_words(script: ForgettingScript) -> list[str]:
    """The value's words that FTS5 indexes (3 characters or more) and nothing else in the conversation holds, also
    without accents (FTS5's tokenizer removes them)."""
    rest = " ".join([script.other_value, *(line for name in script.users for line in script.lines(name)
                                           if script.value.lower() not in line.lower())]).lower()
    held = set(re.findall(r"\w+", rest))
    words = {w for w in index_terms(script.value) if w not in held}
    words |= {unicodedata.normalize("NFKD", w).encode("ascii", "ignore").decode() for w in words}
    return sorted(w for w in words if w)


def _raw(path: Path, value: str, words: list[str]) -> dict[str, int]:
    """Whole copies of the value, in UTF-8 or as JSON writes it with non-ASCII characters escaped (a row's metadata:
    "Calle A\\u00f1il 3"); its own words anywhere; its own words outside the value's copies. Plain bytes compared
    after ASCII lowercasing: none of the scan's normalisation."""
    raw = path.read_bytes().lower()
    forms = {value.lower().encode(), json.dumps(value.lower())[1:-1].encode()}
    whole = re.compile(rb"(?<![0-9a-z])(?:" + b"|".join(re.escape(f) for f in sorted(forms)) + rb")(?![0-9a-z])")
    alone = whole.sub(b" ", raw)
    return {"value": len(whole.findall(raw)), "words": sum(len(_whole(w.encode()).findall(raw)) for w in words),
            "words_alone": sum(len(_whole(w.encode()).findall(alone)) for w in words),
            "value_anywhere": sum(raw.count(f) for f in forms)}  # also where binary bytes touch it ("3" then "7")


def _sqlite(path: Path, value: str, words: list[str]) -> dict[str, Any]:
    """A memory-store file read with SQL: the rows that still hold the value, the value's words in FTS5's index data,
    the free-page count (SQL, and the header's bytes 36-39)."""
    db, _ = connect(path)
    try:
        rows = db.execute("SELECT count(*) FROM memories WHERE instr(lower(content), ?)", (value.lower(),)).fetchone()[0]
        blocks = [b for (b,) in db.execute("SELECT block FROM memory_keywords_data") if isinstance(b, bytes)]
        free = db.execute("PRAGMA freelist_count").fetchone()[0]
    finally:
        db.close()
    def holds(block: bytes, word: str) -> bool:
        return re.search(rb"(?<![0-9a-z])0?" + re.escape(word.encode()), block.lower()) is not None

    return {"rows": rows, "index_words": [w for w in words if holds(b"".join(blocks), w)],
            "index_segments": sum(any(holds(b, w) for w in words) for b in blocks),
            "free_pages": free, "free_pages_header": int.from_bytes(path.read_bytes()[36:40], "big")}


def _folder_raw(root: Path, value: str) -> int:
    return sum(_raw(p, value, [])["value"] for p in sorted(root.rglob("*")) if p.is_file())


def _zeroed(plain: Path, secured: Path, value: str) -> list[bool]:
    """For each copy of the value's text in the plain DELETE's file (raw, case folded), whether the secure_delete
    copy holds only zero bytes there."""
    raw, other, needle = plain.read_bytes().lower(), secured.read_bytes(), value.lower().encode()
    starts = [m.start() for m in re.finditer(re.escape(needle), raw)]
    return [other[at:at + len(needle)] == bytes(len(needle)) for at in starts]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _kind(found: str) -> str:
    return found.split(" '")[0].split(" (")[0]


def record(script: ForgettingScript, stores: Stores, *, copies: dict[str, Path], backup: Stores, seen: Path,
           transient: list[dict[str, Any]], log: Path, restored: Stores, shred: Path, keys: KeyRing,
           decrypted: list[str], embedder: Any, workspace_dir: Path) -> dict[str, Any]:
    """The evidence of notebook 10's run: `copies` maps each recipe to its copy of the SQLite file; `seen` is the
    folder where the observer kept a copy of each file forget() showed it (numbered in `transient`'s order); `log`
    the file of forget requests the restore replayed."""
    value, user, other = script.value, script.user, script.other_user
    words = own_words(script)
    recipes = {}
    for name, path in copies.items():
        places = scan_for(path, script, embedder).places
        recipes[name] = {**_sqlite(Path(path), value, words), "raw": _raw(Path(path), value, words),
                         "scan": sorted(_kind(p.found) for p in places),
                         "where": [p.where for p in places if _kind(p.found) == "text"]}
    sentence = f"The user's {script.fact_key} is {value}."
    vector = np.asarray(embedder.embed([sentence])[0], dtype=np.float32).tobytes()[:64]
    kept = sorted(seen.iterdir())
    by_what = [{"what": t["what"], "file": t["file"], "shown": t["places the scan finds"],
                "raw": _raw(k, value, [])["value"], "raw_anywhere": _raw(k, value, [])["value_anywhere"],
                "embedding": k.read_bytes().count(vector)}
               for t, k in zip(transient, kept)]
    first_tmp = next((k for t, k in zip(transient, kept) if t["what"] == "temporary file"), None)
    first_old = next((t["file"] for t in transient if t["what"] == "old file"), None)
    renamed = {"temporary": first_tmp is not None and first_old is not None
               and _digest(first_tmp) == _digest(stores.root / first_old), "file": first_old}
    leftovers = [p.name for p in stores.root.rglob("*")
                 if p.name.endswith(("-journal", "-wal")) or p.name.startswith(".forget")]
    memories = EncryptedMemory(shred / "data", keys)
    try:
        read_after = f"read: {memories.read(user)}"
    except ShreddedError as error:
        read_after = f"{type(error).__name__}: {str(error).split(' in ')[0]}"
    backup_file = shred / "backup.enc"
    backup_places = scan_for(backup.root, script, embedder).places
    return save_record({
        "script": script.to_dict(),
        "own_words": words,
        "recipes": recipes,
        "index_segments_before": _sqlite(backup.vectors, value, words)["index_segments"],
        "secure_delete_zeroed": _zeroed(Path(copies["DELETE"]), Path(copies["DELETE + secure_delete"]), value),
        "forget": {"transient": by_what, "leftovers": leftovers, "renamed": renamed,
                   "after": {"scan": len(scan_for(stores.root, script, embedder).places),
                             "raw": _folder_raw(stores.root, value),
                             **{k: v for k, v in _sqlite(stores.vectors, value, words).items()
                                if k.startswith("free_pages")}}},
        "backup": {"raw": _folder_raw(backup.root, value), "scan": len(backup_places),
                   "stores": sorted({store_of(backup, p) for p in backup_places})},
        "log": {"requests": [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()],
                "raw": _raw(log, value, [])["value"]},
        "restored": {"raw": _folder_raw(restored.root, value),
                     "scan": len(scan_for(restored.root, script, embedder).places),
                     "other_raw": _folder_raw(restored.root, script.other_value)},
        "shred": {"decrypted_before": decrypted, "raw": _folder_raw(shred, value),
                  "key_file": keys.path(user).exists(), "read_after": read_after,
                  "backup_same": backup_file.read_bytes() == memories.path(user).read_bytes(),
                  "backup_opens_with": [u for u in keys.users() if can_decrypt(keys.key(u), backup_file.read_bytes())],
                  "other_reads": memories.read(other)},
    }, workspace_dir)


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _clean(name: str) -> bool:
    """The rule the lesson states: a merge together with secure_delete or VACUUM."""
    return "merge" in name and ("secure_delete" in name or "VACUUM" in name)


def claims(record: dict[str, Any]) -> Ledger:
    """Every check of notebook 10, decided from `record` alone."""
    ledger = Ledger(claims=CLAIMS)
    s, recipes = record["script"], record["recipes"]
    value, user, other = s["value"], s["user"], s["other_user"]

    plain = recipes.get("DELETE", {})
    ledger.check("C1 S1", "a plain DELETE: SQL finds no row, the file still holds the text",
                 evidence=f"rows SELECT finds {plain.get('rows')}; the value's bytes, raw: {plain.get('raw')}",
                 holds=plain.get("rows") == 0 and plain.get("raw", {}).get("value", 0) > 0)
    ledger.check("S1", "the scan places that text in pages no live row owns",
                 evidence=plain.get("where"),
                 holds=bool(plain.get("where")) and all("no live row" in w or "free page" in w for w in plain["where"]))
    ledger.check("S1", "FTS5's index data still holds a word of the value (read with SQL)",
                 evidence=f"the value's own words {record['own_words']}; in the index data: "
                          f"{plain.get('index_words')}", holds=bool(plain.get("index_words")))
    before, after = record["index_segments_before"], plain.get("index_segments", 0)
    ledger.check("S1", "the DELETE appended a segment that holds the word: two segments, where there was one",
                 evidence=f"index segments holding {record['own_words']} (SQL): before the DELETE {before}, "
                          f"after {after}", holds=before >= 1 and after == before + 1)

    ledger.equal("C1 S2", "eight recipes, and SELECT finds no row after any of them",
                 observed=[r["rows"] for r in recipes.values()], expected=[0] * 8)
    clean = [name for name in recipes if _clean(name)]
    ledger.equal("C1 S2", "the scan finds nothing after a merge with secure_delete or VACUUM, and only then",
                 observed=[name for name, r in recipes.items() if not r["scan"]], expected=clean)
    ledger.equal("C1 S2", "a raw count of the value and its own words agrees, recipe by recipe",
                 observed=[name for name, r in recipes.items() if not any(r["raw"].values())], expected=clean)
    ledger.check("S2", "without a merge, FTS5's index data keeps a word of the value; with one, none",
                 evidence="; ".join(f"{n}: {r['index_words']}" for n, r in recipes.items()),
                 holds=len(recipes) == 8 and all(bool(r["index_words"]) == ("merge" not in n) for n, r in recipes.items()))
    zeroed = record["secure_delete_zeroed"]
    ledger.check("S2", "secure_delete wrote zeros where the plain DELETE left the text (both copies, read raw)",
                 evidence=f"the plain DELETE's copies of the text: {len(zeroed)}; zeros in the secure_delete copy "
                          f"there: {sum(zeroed)}", holds=bool(zeroed) and all(zeroed))
    merged = recipes.get("DELETE + merge", {})
    ledger.check("S2", "a merge alone: no word in the index data, yet the file's bytes hold the word outside the "
                       "text, and the text",
                 evidence=f"index data (SQL): {merged.get('index_words')}; read raw: {merged.get('raw')}",
                 holds=merged.get("index_words") == [] and merged.get("raw", {}).get("words_alone", 0) > 0
                 and merged.get("raw", {}).get("value", 0) > 0)

    forget = record["forget"]
    journal = [t for t in forget["transient"] if t["what"] == "rollback journal"]
    ledger.check("S3", "forget()'s rollback journal held the value: its places, counted raw, are the table's",
                 evidence="; ".join(f"{t['shown']} places: the text {_times(t['raw'])} as a whole word "
                                    f"({_times(t['raw_anywhere'])} anywhere) and its embedding "
                                    f"{_times(t['embedding'])} (read raw)" for t in journal),
                 holds=len(journal) == 1 and journal[0]["raw"] > 0
                 and journal[0]["raw"] + journal[0]["embedding"] <= journal[0]["shown"]
                 <= journal[0]["raw_anywhere"] + journal[0]["embedding"])
    before_vacuum = [t for t in forget["transient"] if t["what"] == "database before VACUUM"]
    ledger.check("S3", "forget()'s DELETE, with secure_delete and a merge, left no copy even before VACUUM "
                       "(its copy, read raw)",
                 evidence=before_vacuum, holds=len(before_vacuum) == 1 and before_vacuum[0]["raw"] == 0)
    temporary = [t for t in forget["transient"] if t["what"] == "temporary file"]
    old = [t for t in forget["transient"] if t["what"] == "old file"]
    ledger.check("S3", "every temporary file held none of the value; the first old file, agent.json, held it "
                       "(copies, read raw)",
                 evidence=f"temporary files: {[t['raw'] for t in temporary]}; "
                          + (f"{old[0]['file']}: {old[0]['raw']}" if old else "no old file"),
                 holds=bool(temporary) and all(t["raw"] == 0 for t in temporary) and bool(old)
                 and old[0]["file"].endswith("/agent.json") and old[0]["raw"] > 0)
    renamed = forget["renamed"]
    ledger.check("S3", "the first temporary file was renamed over agent.json: the new file holds its bytes (digests)",
                 evidence=f"{renamed['file']} now has the first temporary file's digest: {renamed['temporary']}",
                 holds=renamed["temporary"] and str(renamed["file"]).endswith("/agent.json"))
    after = forget["after"]
    ledger.check("C1 S3", "after forget(): no file of the stores holds the value, and the file has no free page",
                 evidence=f"scan {after['scan']}, raw {after['raw']}; free pages: {after['free_pages']} (header: "
                          f"{after['free_pages_header']})",
                 holds=after["scan"] == after["raw"] == after["free_pages"] == after["free_pages_header"] == 0)
    ledger.equal("S3", "no journal, temporary or plan file is left", observed=forget["leftovers"], expected=[])

    backup, restored = record["backup"], record["restored"]
    ledger.check("S4", "the backup, taken before the forget, holds the value in all five stores",
                 evidence=f"scan {backup['scan']} places in {backup['stores']}; raw {backup['raw']}",
                 holds=backup["scan"] > 0 < backup["raw"] and len(backup["stores"]) == 5
                 and "other" not in backup["stores"])
    ledger.check("S4", "after the replay, the restored stores hold none of it, and the other user's value stays",
                 evidence=f"scan {restored['scan']}, raw {restored['raw']}; {other}'s value raw: "
                          f"{restored['other_raw']}",
                 holds=restored["scan"] == restored["raw"] == 0 and restored["other_raw"] > 0)

    log = record["log"]
    ledger.check("S4", "the log holds the request as a user and a key, never the value (read again, and raw)",
                 evidence=f"{log['requests']}; the value, raw: {log['raw']}",
                 holds=log["requests"] == [{"user": user, "key": s["fact_key"]}] and log["raw"] == 0)

    shred = record["shred"]
    ledger.check("S5", "the user's file decrypted to all the user's memories while the key existed",
                 evidence=f"{len(shred['decrypted_before'])} memories",
                 holds=any(normalise(value) in normalise(m) for m in shred["decrypted_before"])
                 and len(shred["decrypted_before"]) == 1 + len(s["others"][user]))
    ledger.equal("S5", "no file in shred/ ever held the value's bytes", observed=shred["raw"], expected=0,
                 what="raw occurrences")
    ledger.check("C1 S5", "after the shred, the user's key file is gone and the file cannot be read",
                 evidence=f"key file: {shred['key_file']}; {shred['read_after']}",
                 holds=not shred["key_file"] and shred["read_after"].startswith("ShreddedError"))
    ledger.check("C1 S5", "the backup is the same ciphertext, and no key left opens it",
                 evidence=f"same bytes: {shred['backup_same']}; keys that open it: {shred['backup_opens_with']}",
                 holds=shred["backup_same"] and not shred["backup_opens_with"])
    ledger.check("S5", f"{other}'s file still decrypts, with {other}'s own facts",
                 evidence=f"{len(shred['other_reads'])} memories",
                 holds=any(normalise(s["other_value"]) in normalise(m) for m in shred["other_reads"]))
    return ledger
