"""Kernels compiled ahead (`nngpu cache build`): a model's CUDA translation units compiled by
NVRTC where no GPU is, into the kernel cache under the keys a CUDA device of that architecture
looks up, so a GPU machine given the cache (NNGPU_CACHE_DIR) loads each kernel instead of
compiling it at prepare.

The units are those a device plan compiles for one execution: its first segment, from the
model's shapes, and each later segment that the values of that execution decide (the inputs
given: a corpus case's own, else seeded random ones)."""
from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..backends.base import entry_path, write_atomically
from ..backends.cuda import CudaBackend, compile_cubin, unit_cache_key
from ..compiler.lower import trace_segments
from ..hal.types import Model
from ..modelutil import as_model_1_3
from ..ops.registry import HalVersion
from ..runtime.interpreter import GraphRunner

ARCH = re.compile(r"sm_\d{2,3}[af]?")


@dataclass
class Prebuilt:
    built: int = 0      # units compiled now
    cached: int = 0     # units the cache held already

    def __iadd__(self, other: "Prebuilt") -> "Prebuilt":
        self.built += other.built
        self.cached += other.cached
        return self


def arch_problem(arch: str) -> str | None:
    """Why NVRTC cannot compile for `arch` (a name like sm_90), or None."""
    if not ARCH.fullmatch(arch):
        return f"--arch {arch!r} is not a CUDA architecture such as sm_90"
    try:
        compile_cubin('extern "C" __global__ void nn_probe(float *a) { a[0] = 1.0f; }', "probe", arch)
    except ImportError as e:
        return f"compiling CUDA kernels needs CuPy's NVRTC: pip install 'nngpu[cuda]' ({e})"
    except Exception as e:  # NVRTC refuses the architecture
        return f"NVRTC cannot compile for {arch}: {(str(e).strip().splitlines() or [type(e).__name__])[0]}"
    return None


def model_units(model, inputs: Sequence[np.ndarray | None]) -> list[str]:
    """The CUDA translation units a device plan compiles for one execution of `model` on
    `inputs`, as the driver prepares it (a flat Model through the 1.2 entry points)."""
    version = HalVersion.V1_2 if isinstance(model, Model) else HalVersion.V1_3
    runner = GraphRunner(as_model_1_3(model), version)
    with np.errstate(all="ignore"):
        values = runner.trace(list(inputs))
    fusion = os.environ.get("NNGPU_FUSION", "1") != "0"   # as the Device decides it
    return [source for segment in trace_segments(runner, values, CudaBackend.target, fusion)
            for source, _ in segment.units(CudaBackend.kernels_per_unit)]


def prebuild(units: Sequence[str], arch: str, jobs: int = 1) -> Prebuilt:
    """Compile each unit the cache lacks for `arch` and write it there (NVRTC runs outside the
    GIL: `jobs` threads compile at once)."""
    keyed = {unit_cache_key(arch, u): u for u in units}
    missing = {k: u for k, u in keyed.items() if not entry_path(k).is_file()}

    def build(item: tuple[str, str]) -> None:
        key, source = item
        write_atomically(entry_path(key), compile_cubin(source, "unit", arch))

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        list(pool.map(build, missing.items()))
    return Prebuilt(len(missing), len(keyed) - len(missing))
