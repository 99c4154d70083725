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
