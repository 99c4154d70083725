"""The README's Python blocks run exactly as written: each in a fresh namespace, in order, from an
empty working directory; the first one prints the sum it computes."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```$", README.read_text(), flags=re.S | re.M)


def _run(k: int) -> str:
    """Block k's stdout; an exception in it fails the test."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(BLOCKS[k], f"README.md python block {k + 1}", "exec"), {"__name__": "__readme__"})
    return out.getvalue()


def test_readme_has_the_blocks() -> None:
    assert len(BLOCKS) >= 2, "README.md should show the ModelBuilder + Session block and the HAL block"
    assert "ModelBuilder" in BLOCKS[0] and "Session" in BLOCKS[0]


@pytest.mark.parametrize("k", range(len(BLOCKS)), ids=[f"block{k + 1}" for k in range(len(BLOCKS))])
def test_readme_block_runs(k: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _run(k)


def test_first_block_prints_the_sum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    expected = np.ones((2, 2), np.float32) + np.eye(2, dtype=np.float32)
    assert _run(0).strip() == str(expected)
