"""`nngpu cache info|clear|build`: the kernel cache ($NNGPU_CACHE_DIR, else $XDG_CACHE_HOME/nngpu/kernels).

`clear` removes only the cache's own entries, so pointing NNGPU_CACHE_DIR at a shared folder is
safe. PoCL keeps a cache of its own ($XDG_CACHE_HOME/pocl) for the code it generates at a
kernel's first launch; `info` names it.

`build --arch sm_90 MODEL... | --corpus DIR` compiles the CUDA kernels of models (or of a
conformance corpus's cases) with NVRTC, with no GPU needed, into the cache; a GPU machine of that
architecture given the folder (NNGPU_CACHE_DIR) then loads them instead of compiling at prepare.
OpenCL binaries are the device driver's own: a first run on the device fills the cache."""
from __future__ import annotations

import os
from pathlib import Path

from .errors import CLIError


def add_parser(sub, common) -> None:
    c = sub.add_parser("cache", parents=[common], help="show, clear or build the kernel cache",
                       description=__doc__.split("\n\n")[0])
    actions = c.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=type(c))
    actions.add_parser("info", parents=[common], help="where the cache is and what it holds")
    actions.add_parser("clear", parents=[common], help="remove the cache's entries")
    b = actions.add_parser("build", parents=[common], help="compile CUDA kernels ahead, with no GPU",
                           description=__doc__.split("\n\n")[2])
    b.add_argument("models", nargs="*", metavar="MODEL", help=".tflite or corpus-format .json models")
    b.add_argument("--backend", default="cuda", help="the backend to compile for (cuda)")
    b.add_argument("--arch", default="sm_90", help="the CUDA architecture (default sm_90)")
    b.add_argument("--corpus", metavar="DIR", help="every case of a conformance corpus folder")
    b.add_argument("-k", metavar="PATTERN", help="with --corpus: only cases whose name contains one of these "
                   "comma-separated words")
    b.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="NVRTC compiles at once (default: the CPUs)")
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

    if args.action == "build":
        from .cache_build import build

        return build(args)
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
        if (root / "numba").is_dir():
            print(f"the numpy plan's compiled loops (Numba's cache, renewed when their source changes): {root / 'numba'}")
        return 0
    size = _size(entries)
    try:
        for p in entries:
            p.unlink()
    except OSError as e:
        raise CLIError(f"cannot remove {e.filename}: {e.strerror}", 1) from e
    print(f"removed {len(entries)} entries ({size}) from {root}")
    return 0
