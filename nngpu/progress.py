"""Progress bars on stderr (tqdm) for long work: kernel compilation in prepare, conformance cases.

Off unless a command turns them on (`nngpu` does when stderr is a terminal and --quiet is not
given), so library users and CI logs never see them."""
from __future__ import annotations

import contextlib
import sys
from typing import Iterator, Protocol

_enabled = False


class Bar(Protocol):
    def update(self, n: int = 1) -> object: ...


class _Silent:
    def update(self, n: int = 1) -> None:
        pass


def enable(on: bool) -> None:
    global _enabled
    _enabled = on


def enabled() -> bool:
    return _enabled


@contextlib.contextmanager
def bar(total: int, desc: str, unit: str = "it") -> Iterator[Bar]:
    """A bar for `total` units of work, or a silent stand-in when bars are off."""
    if not _enabled or total <= 0:
        yield _Silent()
        return
    from tqdm import tqdm

    # delay: quick work (a warm cache) shows no bar at all.
    with tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True, delay=0.5) as b:
        yield b
