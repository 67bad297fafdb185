"""How long the offline model takes per call: at the conversation lengths the notebooks use, and on 1 MB messages.

Run: .venv/bin/python benchmarks/offline_model.py
Targets: under 5 ms per call at 40 messages; under 100 ms for a 1 MB message of any content (the time must grow
linearly with the length: before issue 7 a message with one long whitespace run took quadratic time, 10k spaces 1.7 s).
The numbers go in issue notes; tests do not assert them, because a loaded CI machine would make them flaky. The 1 MB
rows print wall time and CPU time (process time): on a shared machine the CPU time is the fairer figure.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from companion.models.offline_model import OfflineModel


def conversation(messages: int) -> list[dict]:
    turns = []
    for index in range(messages // 2):
        text = "My codename is ORION." if index == 0 else f"Filler turn {index}: the committee met and adjourned."
        turns.append({"role": "user", "content": [{"text": text}]})
        turns.append({"role": "assistant", "content": [{"text": "Noted."}]})
    turns.append({"role": "user", "content": [{"text": "What is my codename?"}]})
    return turns


async def one_call(model: OfflineModel, messages: list[dict]) -> None:
    async for _ in model.stream(messages, system_prompt="You are a concise assistant."):
        pass


def measure(size: int, repeats: int = 500) -> dict[str, float]:
    model = OfflineModel()
    messages = conversation(size)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(one_call(model, messages))  # warm-up
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        loop.run_until_complete(one_call(model, messages))
        times.append((time.perf_counter() - started) * 1000)
    loop.close()
    times.sort()
    return {"p50": statistics.median(times), "p95": times[int(0.95 * len(times)) - 1], "max": times[-1]}


MEGABYTE = 1_000_000


def megabyte(unit: str, prefix: str = "", suffix: str = "") -> str:
    """About 1 MB of text: `unit` repeated between a prefix and a suffix."""
    return prefix + unit * ((MEGABYTE - len(prefix) - len(suffix)) // len(unit)) + suffix


LARGE_MESSAGES = {
    "1 MB of spaces": megabyte(" ", "My name is", "Pin."),
    "1 MB of mixed text": megabyte(
        "The build finished in four minutes. My codename is ORION and my plan is pro. Is it raining today? "
        'State: {"plan": "team"}\n'
    ),
    "1 MB of statements": "".join(f"My key{index} is value{index}. " for index in range(MEGABYTE // 22)),
    "1 MB of questions": megabyte("What is my name? "),
    "1 MB of braces": megabyte("{"),
    "1 MB of line breaks": megabyte("\n \n", "My name is", "Pin."),
}


def measure_large(text: str, repeats: int = 3) -> dict[str, float]:
    """Best of `repeats` for one call that states the text, then one that asks a question after it (ms/MB)."""
    model = OfflineModel()
    megabytes = len(text.encode()) / MEGABYTE
    stated = [{"role": "user", "content": [{"text": text}]}]
    asked = stated + [
        {"role": "assistant", "content": [{"text": "Noted."}]},
        {"role": "user", "content": [{"text": "What is my name and my codename?"}]},
    ]
    result = {}
    for name, messages in (("stated", stated), ("asked", asked)):
        walls, cpus = [], []
        for _ in range(repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            model.respond(messages)
            walls.append((time.perf_counter() - wall) * 1000 / megabytes)
            cpus.append((time.process_time() - cpu) * 1000 / megabytes)
        result[f"{name} wall"], result[f"{name} cpu"] = min(walls), min(cpus)
    return result


if __name__ == "__main__":
    print(f"{'messages':>8}  {'p50 ms':>7}  {'p95 ms':>7}  {'max ms':>7}")
    for size in (2, 10, 40, 100):
        result = measure(size)
        print(f"{size:>8}  {result['p50']:7.3f}  {result['p95']:7.3f}  {result['max']:7.3f}")
    print()
    print("one message of about 1 MB, stated, then a question asked after it (best of 3, ms per MB)")
    print(f"{'message':>22}  {'stated wall':>11}  {'stated cpu':>10}  {'asked wall':>10}  {'asked cpu':>9}")
    for label, text in LARGE_MESSAGES.items():
        result = measure_large(text)
        print(
            f"{label:>22}  {result['stated wall']:11.1f}  {result['stated cpu']:10.1f}"
            f"  {result['asked wall']:10.1f}  {result['asked cpu']:9.1f}"
        )
