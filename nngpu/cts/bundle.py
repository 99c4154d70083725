"""Refresh the bundled, gzip-compressed corpus under tests/data/nnapi-cts from a corpus folder.

    python -m nngpu.cts.bundle ../shared/nnapi-cts
"""
from __future__ import annotations

import gzip
import shutil
import sys
from pathlib import Path

BUNDLE = Path(__file__).resolve().parents[2] / "tests" / "data" / "nnapi-cts"


def bundle(source: Path, dest: Path = BUNDLE) -> int:
    count = 0
    for f in sorted(source.glob("*/*.json")):
        out = dest / f.parent.name / (f.name + ".gz")
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(f, "rb") as src, gzip.GzipFile(out, "wb", compresslevel=9, mtime=0) as dst:
            shutil.copyfileobj(src, dst)
        count += 1
    shutil.copy(source / "README.md", dest / "README.md")
    return count


if __name__ == "__main__":
    n = bundle(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/nnapi-cts"))
    print(f"bundled {n} files into {BUNDLE}")
