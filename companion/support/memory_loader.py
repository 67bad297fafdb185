"""Notebook 06's inputs from data/: the memories one user left in earlier sessions, and the paraphrase pairs.

The notebook calls these instead of opening "../data/..." itself, so it runs from any working directory and a
malformed file stops with a message that names the file and what is wrong with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from companion.support.paths import DATA_DIR

DATA = DATA_DIR
USER_MEMORIES = DATA / "memories" / "user_memories.json"
PARAPHRASE_PAIRS = DATA / "recall" / "paraphrase_pairs.jsonl"


@dataclass(frozen=True)
class UserMemories:
    """The memories of data/memories/user_memories.json: every memory, the question the file was written for, and
    the one memory that answers it (`expected`, also in `memories`)."""

    memories: tuple[str, ...]
    query: str
    expected: str
    path: Path

    @property
    def earlier(self) -> list[str]:
        """Every memory except the answer: what earlier sessions stored before the notebook's agent stores the answer."""
        return [memory for memory in self.memories if memory != self.expected]


def load_user_memories(path: str | Path = USER_MEMORIES) -> UserMemories:
    """Read and check the memory file: a list of distinct non-empty memories, a query, and the expected memory."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from None
    memories = data.get("memories") if isinstance(data, dict) else None
    if not isinstance(memories, list) or not memories or not all(isinstance(m, str) and m.strip() for m in memories):
        raise ValueError(f'{path}: "memories" must be a non-empty list of non-empty strings')
    if len(set(memories)) != len(memories):
        raise ValueError(f'{path}: "memories" holds the same text twice')
    query, expected = data.get("query"), data.get("expected")
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f'{path}: "query" must be a non-empty string')
    if expected not in memories:
        raise ValueError(f'{path}: "expected" must be one of the "memories"; got {expected!r}')
    return UserMemories(tuple(memories), query, expected, path)
