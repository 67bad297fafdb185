"""The companion's layers (companion/README.md): a module imports only from its own layer or lower ones, and no import
circle exists. Read from the source with `ast`, imports inside functions included, so a lazy import cannot hide one."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "companion"
RANK = {"support": 0, "models": 1, "memory": 2, "sessions": 2, "measure": 3, "checks": 4, "replay": 5}
PEERS_APART = {("memory", "sessions"), ("sessions", "memory")}


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imported(name: str, path: Path) -> set[str]:
    """The companion modules `name` imports (resolving `from companion.x import y` to the module y when it is one)."""
    known = modules()
    out: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("companion")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if not base.startswith("companion"):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in known else base)
    return {m for m in out if m in known and m != name}


def layer(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_module_sits_in_a_layer():
    stray = [n for n in modules() if n != "companion" and layer(n) not in RANK]
    assert not stray, f"modules outside the layers of companion/README.md: {stray}"


@pytest.mark.parametrize("name", [n for n in modules() if n != "companion"])
def test_no_import_runs_up_a_layer(name):
    path = modules()[name]
    mine = layer(name)
    bad = []
    for target in sorted(imported(name, path)):
        theirs = layer(target)
        if theirs is None:
            bad.append(f"{target} (the package surface, which imports the models layer)")
        elif RANK[theirs] > RANK[mine] or (mine, theirs) in PEERS_APART:
            bad.append(target)
    assert not bad, f"{name} ({mine}) imports from a higher or a separate layer: {bad}"


def test_no_import_circle():
    graph = {n: imported(n, p) for n, p in modules().items()}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt]
                raise AssertionError("import circle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    """The test above can fail: a support module importing a model is reported."""
    fake = tmp_path / "companion"
    (fake / "support").mkdir(parents=True)
    (fake / "models").mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "support" / "__init__.py").write_text("")
    (fake / "models" / "__init__.py").write_text("")
    (fake / "models" / "m.py").write_text("X = 1\n")
    (fake / "support" / "s.py").write_text("def f():\n    from companion.models.m import X\n    return X\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    assert imported("companion.support.s", fake / "support" / "s.py") == {"companion.models.m"}
    with pytest.raises(AssertionError, match="higher"):
        test_no_import_runs_up_a_layer("companion.support.s")


def test_the_map_names_every_module():
    """companion/README.md's map matches the code: every module is named in it, in its own layer's paragraph."""
    text = (PACKAGE / "README.md").read_text(encoding="utf-8")
    missing = [n for n in modules() if n.count(".") == 2 and not re.search(rf"\b{n.rsplit('.', 1)[1]}\b", text)]
    assert not missing, f"modules the map in companion/README.md does not name: {missing}"
