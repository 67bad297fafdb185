"""How long the offline model takes per call, at the conversation lengths the notebooks use.

Run: .venv/bin/python benchmarks/offline_model.py   (target: under 5 ms per call at 40 messages)
The numbers go in issue notes; tests do not assert them, because a loaded CI machine would make them flaky.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from companion.offline_model import OfflineModel


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


if __name__ == "__main__":
    print(f"{'messages':>8}  {'p50 ms':>7}  {'p95 ms':>7}  {'max ms':>7}")
    for size in (2, 10, 40, 100):
        result = measure(size)
        print(f"{size:>8}  {result['p50']:7.3f}  {result['p95']:7.3f}  {result['max']:7.3f}")
