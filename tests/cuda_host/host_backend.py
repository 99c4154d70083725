"""A test-only backend that runs the CUDA dialect on the CPU: each translation unit the plan
compiles is built by g++ behind prelude.h (the CUDA built-ins as host C++) into a shared library,
and a launch runs the kernel once per thread of the same grid the CUDA backend launches (the
CUDA target's schedule).

It proves the CUDA rendering (indexing, types, the float16 conversions) with the real Plan; it
does not prove the CuPy glue of nngpu/backends/cuda.py (streams, cubin loading, cuBLAS, host
registration), which only a GPU runs. A GEMM with an epilogue is kernels/gemm.cu's unit, bound,
built and run as the CUDA backend binds it (nngpu/backends/cuda_tiled_gemm.py); a bare one's
`gemm` runs the cublasGemmEx call the CUDA backend makes with numpy, by cuBLAS's definition
(nngpu/backends/cublas_gemm.py). Buffers are numpy uint8 arrays, filled with 0xff when allocated
(NaN as float, -1 as an integer) so that a kernel reading what nothing wrote shows. Binaries are
cached as any backend's are."""
from __future__ import annotations

import ctypes
import functools
import hashlib
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nngpu.backends.numpy import NumpyBackend
from nngpu.backends.cuda import TARGET as CUDA_TARGET
from nngpu.backends.cublas_gemm import row_major_gemm, run_gemm_ex
from nngpu.backends.cuda_tiled_gemm import TiledGemmBinding
from nngpu.hal.types import DeviceType
from nngpu.ir.schedule import Grid

PRELUDE = Path(__file__).with_name("prelude.h")
CXX = "g++"
FLAGS = ("-O1", "-std=c++17", "-pthread", "-shared", "-fPIC", "-ffp-contract=off", "-fvisibility=hidden", "-w")
# What the harness cannot run: its threads share no warp and have no atomics.
UNSUPPORTED = {"atomic": "atomics", "__shfl": "warp shuffles", "__syncwarp": "a warp barrier",
               "extern __shared__": "dynamic shared memory"}
_UNSUPPORTED = re.compile(r"(\batomic(?=[A-Z])|\b__shfl|\b__syncwarp|\bextern\s+__shared__)")
# What needs a block's threads to run together (the threaded launcher of prelude.h).
_TOGETHER = re.compile(r"\b(__shared__|__syncthreads)\b")
_HEAD = r'^extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?'
_KERNEL = re.compile(_HEAD + r'(\w+)\(', re.M)


class HostUnsupported(Exception):
    """A kernel uses a CUDA feature the host harness cannot run (the reason is the message)."""


def unsupported_reason(source: str) -> str | None:
    found = _UNSUPPORTED.search(source)
    if found is None:
        return None
    word = " ".join(found.group(1).split())
    return f"uses {word} ({UNSUPPORTED[word]}): the host harness cannot run it"


def kernel_body(source: str, name: str) -> str:
    """Kernel `name`'s identity: the unit's text where the unit has no other kernel (a template
    specialised by #defines, as kernels/gemm.cu: one body, many kernels), else the kernel's own
    text (the helpers follow from it)."""
    if _KERNEL.findall(source) == [name]:
        return source.strip("\n")
    match = re.search(_HEAD + rf'{name}\(.*?^\}}$', source, re.M | re.S)
    assert match, f"kernel {name} not in its unit"
    return match.group(0)


@functools.lru_cache(maxsize=None)
def prelude_text() -> str:
    """Read once: every unit is built with the prelude that compiler_identity hashed."""
    return PRELUDE.read_text()


_PRELUDE_DIRS: list[tempfile.TemporaryDirectory] = []   # removed as the process ends


@functools.lru_cache(maxsize=None)
def prelude_dir(defines: tuple[str, ...]) -> str:
    """A folder with prelude.h and, where g++ makes it, the header precompiled with the units'
    flags and `defines`, once a process: parsing the prelude's C++ headers was 0.55 s of a GEMM
    unit's 0.72 s of g++. A unit includes it; without a usable .gch g++ reads the text."""
    folder = tempfile.TemporaryDirectory(prefix="nngpu-cuda-host-prelude-")
    _PRELUDE_DIRS.append(folder)
    header = Path(folder.name) / "prelude.h"
    header.write_text(prelude_text())
    flags = [f for f in FLAGS if f != "-shared"]
    subprocess.run([CXX, *flags, *defines, "-x", "c++-header", str(header), "-o", f"{header}.gch"],
                   capture_output=True)
    return folder.name


@functools.lru_cache(maxsize=None)
def compiler_identity() -> str:
    version = subprocess.run([CXX, "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    prelude = hashlib.sha256(prelude_text().encode()).hexdigest()[:16]
    return f"{version}; {' '.join(FLAGS)}; prelude {prelude}"


@dataclass(frozen=True)
class HostKernel:
    name: str
    body: str
    launcher: ctypes._CFuncPtr


class HostCudaBackend(TiledGemmBinding, NumpyBackend):
    name = "cuda-host"
    target = CUDA_TARGET
    device_type = DeviceType.CPU
    description = "CUDA-dialect kernels built by g++ and run on the CPU (tests only)"

    def __init__(self, defines: tuple[str, ...] = ()) -> None:
        """`defines`: macros the units are built with (-D), as NNH_UCONTEXT (prelude.h's fibers)."""
        super().__init__()
        self.defines = tuple(f"-D{d}" for d in defines)
        self._dir = tempfile.TemporaryDirectory(prefix="nngpu-cuda-host-")
        self.compiled: dict[str, str] = {}   # kernel body → name, of every kernel compiled or loaded
        self.launched: dict[str, str] = {}   # the same, of every kernel launched (size > 0)
        self.refused: dict[str, str] = {}    # kernel body → why it cannot run here
        self.launches = 0

    # ---- memory: numpy bytes, as the numpy backend's ------------------------------------------
    def alloc(self, nbytes: int) -> np.ndarray:
        return np.full(max(int(nbytes), 4), 0xff, dtype=np.uint8)

    # ---- compilation: g++ -------------------------------------------------------------------
    def cache_identity(self) -> str:
        return " ".join([compiler_identity(), *self.defines])

    def build(self, source: str) -> tuple[bytes, tuple[ctypes.CDLL, str]]:
        names = _KERNEL.findall(source)
        reason = unsupported_reason(source)
        if reason:
            self.refused.update({kernel_body(source, n): reason for n in names})
            raise HostUnsupported(reason)
        key = hashlib.sha256(source.encode()).hexdigest()[:16]
        cpp, lib = Path(self._dir.name) / f"{key}.cpp", Path(self._dir.name) / f"{key}.so"
        launcher = "NNH_LAUNCHER_THREADS" if _TOGETHER.search(source) else "NNH_LAUNCHER"
        launchers = "".join(f"{launcher}({n})\n" for n in names)
        cpp.write_text(f"#include \"prelude.h\"\n#line 1 \"unit.cu\"\n{source}\n{launchers}")
        done = subprocess.run([CXX, *FLAGS, *self.defines, "-I", prelude_dir(self.defines), "-o", str(lib), str(cpp)],
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"g++ failed for a CUDA unit of {names}:\n{done.stderr[:3000]}")
        binary = lib.read_bytes() + _trailer(source)
        return binary, self.load(binary)

    def load(self, binary: bytes) -> tuple[ctypes.CDLL, str]:
        """The library and the unit's source (kept after the ELF image, for kernel identities)."""
        image, source = _split(binary)
        path = Path(self._dir.name) / f"load-{hashlib.sha256(image).hexdigest()[:16]}.so"
        path.write_bytes(image)
        return ctypes.CDLL(str(path)), source

    def kernel(self, program: tuple[ctypes.CDLL, str], name: str) -> HostKernel:
        lib, source = program
        launcher = getattr(lib, f"nnh_launch_{name}")
        launcher.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint, ctypes.c_uint]
        launcher.restype = None
        kernel = HostKernel(name, kernel_body(source, name), launcher)
        self.compiled.setdefault(kernel.body, name)
        return kernel

    # ---- launch -------------------------------------------------------------------------------
    def launch(self, kernel: HostKernel, grid: Grid, args: list) -> None:
        if grid.total <= 0:
            return
        for a in args:
            if not (isinstance(a, np.ndarray) and a.dtype == np.uint8):
                raise TypeError(f"{kernel.name}: argument {type(a).__name__} is not a buffer of this backend")
        pointers = (ctypes.c_void_p * len(args))(*[a.ctypes.data for a in args])
        (threads,), (block,) = grid.threads, grid.group
        kernel.launcher(pointers, threads // block, block)
        self.launched.setdefault(kernel.body, kernel.name)
        self.launches += 1

    def gemm(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, m: int, n: int, k: int,
             b_transposed: bool = False, relaxed: bool = False, half: bool = False) -> None:
        """The cublasGemmEx call the CUDA backend makes, run with numpy by cuBLAS's definition
        (float16 inputs where relaxed, float16 matrices with `half`): its leading dimensions,
        types and compute type are checked."""
        run_gemm_ex(row_major_gemm(a, b, c, m, n, k, b_transposed, relaxed, half), lambda buf: buf)


_MARK = b"\0nngpu-cuda-host-source\0"


def _trailer(source: str) -> bytes:
    return _MARK + source.encode()


def _split(binary: bytes) -> tuple[bytes, str]:
    image, _, source = binary.rpartition(_MARK)
    if not image:
        raise ValueError("not a cuda-host binary")
    return image, source.decode()
