import os
from pathlib import Path

os.environ.setdefault("XDG_CACHE_HOME", str(Path(__file__).resolve().parent.parent / ".cache"))
# One BLAS thread: on a small shared machine OpenBLAS threads stall on busy cores and make the
# numpy figures jitter by several times; TFLite is measured at 1 and 2 threads explicitly.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
