"""`nngpu cache info|clear`: the kernel cache ($NNGPU_CACHE_DIR, else $XDG_CACHE_HOME/nngpu/kernels).

`clear` removes only the cache's own entries, so pointing NNGPU_CACHE_DIR at a shared folder is
safe. PoCL keeps a cache of its own ($XDG_CACHE_HOME/pocl) for the code it generates at a
kernel's first launch; `info` names it."""
from __future__ import annotations

import os
from pathlib import Path

from .errors import CLIError


def add_parser(sub, common) -> None:
    c = sub.add_parser("cache", parents=[common], help="show or clear the kernel cache",
                       description=__doc__.split("\n\n")[0])
    c.add_argument("action", choices=("info", "clear"))
    c.set_defaults(func=run)


def _entries(root: Path) -> list[Path]:
    from ..backends.base import CACHE_SUFFIX

    if not root.is_dir():
        return []
    # Entries and the temporaries an interrupted write can leave (.<entry>.<pid>.<thread>).
    return [p for p in root.iterdir() if p.is_file() and (p.suffix == CACHE_SUFFIX or
                                                          p.name.startswith(".") and CACHE_SUFFIX + "." in p.name)]


def _size(paths: list[Path]) -> str:
    n = sum(p.stat().st_size for p in paths)
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def run(args) -> int:
    from ..backends.base import cache_dir
    from ..driver.cache_files import KEY_FILE

    root = cache_dir(create=False)
    entries = _entries(root)
    if args.action == "info":
        source = "$NNGPU_CACHE_DIR" if os.environ.get("NNGPU_CACHE_DIR") else "$XDG_CACHE_HOME/nngpu/kernels"
        print(f"kernel cache: {root} ({source})")
        print(f"  {len(entries)} entries, {_size(entries)}" if root.is_dir() else "  empty (not created yet)")
        key = root / KEY_FILE
        print(f"compilation cache key: {key}{'' if key.exists() else ' (made at the first save)'}; `clear` keeps it")
        pocl = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pocl"
        if pocl.is_dir():
            print(f"PoCL's own cache: {pocl}")
        return 0
    size = _size(entries)
    try:
        for p in entries:
            p.unlink()
    except OSError as e:
        raise CLIError(f"cannot remove {e.filename}: {e.strerror}", 1) from e
    print(f"removed {len(entries)} entries ({size}) from {root}")
    return 0
