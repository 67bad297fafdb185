"""How long the write policy of notebook 11 takes on large inputs (issue 19, item 1).

Run: .venv/bin/python benchmarks/write_policy.py
Target: any 1 MB input decided well under 1 s, with a reason of bounded length. Before the fix, `WritePolicy.judge`
on a 1 MB entry against a 1 MB turn took 90 s (`foreign_values` searched the whole turn once per token) and its reason
was 1.2 MB; removing quoted passages and memory blocks from a turn took quadratic time on quote marks or "<memory"
tags that never close. The numbers go in issue notes; tests assert only a generous limit, because a loaded CI machine
would make a tight one flaky. CPU time (process time) is printed beside wall time: on a shared machine it is the
fairer figure. "result chars" is the length of the reason (judge, guard) or of the text returned (owner_turn_text).
An entry over 500 characters is refused as input before any rule reads it (first row); the 400-character row is the
largest entry the provenance rule searches a 1 MB turn for.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

from companion.memory.write_policy import MemoryWriteGuard, WritePolicy, owner_turn_text

MEGABYTE = 1_000_000


def megabyte(unit: str) -> str:
    return unit * (MEGABYTE // len(unit))


def values(count: int, prefix: str = "V") -> str:
    return " ".join(f"{prefix}{i}" for i in range(count))


TURN = "Please remember that my deploy day is Tuesday. " + megabyte("Capital Words 12 and more text @ here. ")


def judge(entry: str, turn: str) -> str:
    return WritePolicy(owner="ada").judge(entry, turn, "ada").reason


def guard(entries) -> str:
    handler = MemoryWriteGuard(WritePolicy(owner="ada"))
    event = SimpleNamespace(tool_use={"name": "add_memory", "input": {"entries": entries}, "toolUseId": "t"},
                            invocation_state={"user_id": "ada"},
                            agent=SimpleNamespace(messages=[{"role": "user", "content": [{"text": TURN}]}]))
    decision = handler.before_tool_call(event)
    return getattr(decision, "reason", type(decision).__name__)


ROWS = {
    "judge: 1 MB entry of distinct values, 1 MB turn": lambda: judge("The user's " + values(150_000)[:MEGABYTE], TURN),
    "judge: 400-character entry of 80 values, 1 MB turn": lambda: judge("The user's " + values(80)[:400], TURN),
    "judge: ordinary entry, 1 MB turn": lambda: judge("The user's deploy day is Tuesday.", TURN),
    "owner_turn_text: 1 MB of unclosed “": lambda: owner_turn_text([{"role": "user", "content": [{"text": megabyte("“a ")}]}]),
    "owner_turn_text: 1 MB of newlines": lambda: owner_turn_text([{"role": "user", "content": [{"text": megabyte("\n")}]}]),
    "owner_turn_text: 1 MB of unclosed <memory>": lambda: owner_turn_text(
        [{"role": "user", "content": [{"text": megabyte("<memory> ")}]}]),
    "owner_turn_text: 1 MB of short 'x' quotes": lambda: owner_turn_text([{"role": "user", "content": [{"text": megabyte("'x")}]}]),
    "guard: entries as a 1 MB string": lambda: guard(megabyte("a")),
    "guard: 20 entries of 50 KB each": lambda: guard([megabyte("A1 ")[:50_000]] * 20),
    "guard: 100,000 one-word entries": lambda: guard(["x"] * 100_000),
}


def main() -> None:
    print(f"{'input':58} {'wall s':>8} {'cpu s':>8} {'result chars':>13}")
    for name, run in ROWS.items():
        wall, cpu = time.perf_counter(), time.process_time()
        reason = run()
        print(f"{name:58} {time.perf_counter() - wall:8.3f} {time.process_time() - cpu:8.3f} {len(reason):13,}")


if __name__ == "__main__":
    main()
