"""The SDK's FileMemoryStore, with the lineage of every line it writes.

`FileMemoryStore.add(content, metadata)` accepts the SDK's metadata "for interface compatibility" and drops it, so a
markdown memory cannot say where it came from. `LineageFileMemoryStore` keeps everything else of the SDK's store (one
file per topic under `memory/<name>/`, named after the first line, later facts appended to a file of the same name,
the SDK's keyword search) and writes each line as `companion.memory.lineage.markdown_line` does: a list line ending
with its lineage as an HTML comment (`<!-- lineage {...} -->`, hidden when the file is rendered). `forget()` reads
that comment back (`read_markdown_lineage`) to find the lines that descend from the messages it forgets.

The comment is for code, not for the model: `search` returns each file's text with the comments cut out, so what the
`MemoryManager` injects into a prompt is the memory alone.
"""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from strands.vended_memory_stores.file_memory_store import FileMemoryStore
from strands.vended_memory_stores.file_memory_store.store import _normalize_key, _slugify

from companion.memory.lineage import LINEAGE_KEY, markdown_line

_COMMENT = re.compile(r"\s*<!-- lineage \{.*?\} -->")


def without_lineage(text: str) -> str:
    """A markdown memory's text without its lineage comments (what a reader, or a model, should see)."""
    return _COMMENT.sub("", text)


class LineageFileMemoryStore(FileMemoryStore):
    """A FileMemoryStore whose lines carry their lineage (the metadata `add` receives under "lineage")."""

    async def add(self, content: str, metadata: dict[str, Any] | None = None) -> str:
        """Write the memory as the SDK's store does (file named after the first line; a file of that name gets the new
        lines appended), each line as `- text <!-- lineage {...} -->`. Returns the storage key."""
        lines = [re.sub(r"^#+\s*|^[-*]\s+", "", line).strip() for line in content.split("\n")]
        lines = [line for line in lines if line]
        if not lines:
            raise ValueError("A memory must contain some text; got an empty one.")
        origin = (metadata or {}).get(LINEAGE_KEY)
        slug = _slugify(lines[0]) or "entry"
        key = _normalize_key(f"{slug}.md").lower()
        written = "\n".join(markdown_line(line, origin) for line in lines)
        async with self._write_lock:
            existing = await self._storage.read(key)
            if existing:
                written = f"{existing.decode('utf-8', errors='replace').rstrip()}\n{written}"
            await self._storage.write(key, written.encode("utf-8"))
        return key

    def add_now(self, content: str, metadata: dict[str, Any] | None = None) -> str:
        """`add` from synchronous code, also where an event loop already runs in this thread (a notebook cell): the
        coroutine runs to the end in a worker thread of its own."""
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, self.add(content, metadata)).result()

    async def search(self, query: str, options: Any = None) -> list[Any]:
        """The SDK's search, with each entry's lineage comments cut out of the text it returns."""
        entries = await super().search(query, options)
        for entry in entries:
            entry.content = without_lineage(entry.content)
        return entries
