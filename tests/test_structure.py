"""The package's shape rules: small files, and operation families that share only ops/lib."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nngpu"
OPS = PACKAGE / "ops"
SHARED = {"registry", "node", "lib"}  # what a family module may import from nngpu.ops


def _ops_imports(path: Path) -> set[str]:
    """The nngpu.ops modules a module under nngpu/ops imports (first name below nngpu.ops)."""
    tree = ast.parse(path.read_text())
    depth = len(path.relative_to(OPS).parts)  # 1 for a family, 2 for a lib module
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == depth:               # relative to nngpu/ops itself
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(a.name for a in node.names)
        elif node.level == 0 and node.module and node.module.startswith("nngpu.ops."):
            found.add(node.module.split(".")[2])
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_500_lines(path: Path):
    assert len(path.read_text().splitlines()) <= 500


def test_families_import_only_the_shared_modules():
    families = [p for p in OPS.glob("*.py") if p.name != "__init__.py" and p.stem not in SHARED]
    assert len(families) > 20
    for path in families:
        assert _ops_imports(path) <= SHARED, f"{path.name} imports another family"


def test_the_shared_helpers_import_no_family():
    for path in (OPS / "lib").glob("*.py"):
        assert _ops_imports(path) <= SHARED, f"lib/{path.name} imports a family"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str) -> set[str]:
    """The nngpu modules `name` imports anywhere in its text: at the top, inside functions
    (deferred) and under TYPE_CHECKING alike. `from X import Y` names X.Y where that is a
    module, else X; its own package (whose __init__ runs first) is not an edge."""
    path = MODULES[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names)
    return {m for m in found if m in MODULES and m != name and not name.startswith(m + ".")}


def _cycle() -> list[str] | None:
    """One import circle among the package's modules, or None (depth-first search)."""
    graph = {m: sorted(_imports(m)) for m in MODULES}
    state: dict[str, int] = {}        # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in graph[m]:
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        path.pop()
        state[m] = 2
        return None

    for m in graph:
        if m not in state and (found := visit(m)):
            return found
    return None


def test_no_import_circle():
    assert _cycle() is None, " -> ".join(_cycle() or [])


def test_the_cycle_finder_finds_a_circle(monkeypatch):
    """The check above can fail: two modules importing each other are found."""
    real = _imports
    fake = {"nngpu.runtime.plan": {"nngpu.runtime.segment"}, "nngpu.runtime.segment": {"nngpu.runtime.plan"}}
    monkeypatch.setitem(globals(), "_imports", lambda m: fake.get(m, real(m)))
    assert set(_cycle() or []) == {"nngpu.runtime.plan", "nngpu.runtime.segment"}


def test_the_runtime_takes_only_step_types_from_the_compiler():
    for name in MODULES:
        if name.startswith("nngpu.runtime"):
            compiler = {m for m in _imports(name) if m.startswith("nngpu.compiler")}
            assert compiler <= {"nngpu.compiler.steps"}, f"{name} imports {sorted(compiler)}"
