"""Seeded mutations of .tflite files, and a batch runner that puts each through `nngpu run` on
numpy in a child process with memory and time limits.

    python -m tests.tflite.mutate OUT_DIR  < one JSON case per line ({"path": ...})

prints one JSON line per case: {"path", "rc", "traceback", "err"} (the last stderr line; warnings
may come before it)."""
from __future__ import annotations

import json
import random
import resource
import struct
import sys
from pathlib import Path

KINDS = ("flip", "large", "negative", "truncate", "duplicate")


def mutate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One mutation of `data`: (what was done, the new bytes). The first 8 bytes (root offset,
    identifier) are left alone, so the file still reads as a .tflite flatbuffer."""
    kind = rng.choice(KINDS)
    buf = bytearray(data)
    at = rng.randrange(8, len(buf) - 4)
    if kind == "flip":
        for _ in range(rng.randint(1, 4)):
            k = rng.randrange(8, len(buf))
            buf[k] ^= 1 << rng.randrange(8)
        return f"flip near {at}", bytes(buf)
    if kind in ("large", "negative"):
        at -= at % 4     # flatbuffer fields are 4-byte aligned
        value = rng.choice([0x7FFFFFFF, 0x10000000, 65536, 1 << 20]) if kind == "large" else rng.choice([-1, -2, -(1 << 31)])
        struct.pack_into("<i", buf, at, value)
        return f"{kind} {value} at {at}", bytes(buf)
    if kind == "truncate":
        return f"truncate at {at}", bytes(buf[:at])
    n = rng.randint(4, 64)
    span = bytes(buf[at: at + n])
    to = rng.randrange(8, len(buf) - n)
    buf[to: to + len(span)] = span
    return f"duplicate {n} bytes from {at} to {to}", bytes(buf)


def cases(sources: list[Path], count: int, seed: int, out_dir: Path) -> list[dict]:
    """`count` mutated files written under out_dir, spread over `sources`."""
    rng = random.Random(seed)
    made = []
    for k in range(count):
        src = sources[k % len(sources)]
        what, data = mutate(src.read_bytes(), rng)
        path = out_dir / f"{k:04d}-{src.stem}.tflite"
        path.write_bytes(data)
        made.append({"path": str(path), "source": src.name, "what": what})
    return made


def _run_one(path: str) -> dict:
    import contextlib
    import io

    from nngpu.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(["run", path, "--backend", "numpy", "--repeat", "1", "--warmup", "0", "--quiet"])
        except SystemExit as e:
            rc = e.code
        except MemoryError:
            rc = "out of memory"
    lines = err.getvalue().strip().splitlines()
    return {"path": path, "rc": rc, "traceback": "Traceback" in err.getvalue(), "err": lines[-1] if lines else ""}


def main(argv: list[str]) -> int:
    limit = int(argv[0]) if argv else 4 << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))   # a runaway allocation is a MemoryError
    for line in sys.stdin:
        result = _run_one(json.loads(line)["path"])
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
