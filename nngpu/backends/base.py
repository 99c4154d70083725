"""The backend interface, in three parts: allocation and copies, compilation (one disk cache for
every backend), and launch.

A backend knows nothing about models: the compiler hands it C source and launch sizes. Buffers
are opaque handles; `upload` / `download` move bytes between them and host numpy arrays (views
of shared-memory pools, so a pool is copied once, with no staging copy in between)."""
from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import logging
import math
import os
import re
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

import numpy as np

from ..hal.types import DeviceType
from ..ir.schedule import Grid

if TYPE_CHECKING:
    from ..compiler.target import Target

log = logging.getLogger("nngpu.backends")


@dataclass
class DeviceValue:
    """A tensor value resident in a backend buffer: an IBuffer's storage, or a region of a
    burst slot's registered pool (at `offset` bytes into it)."""

    buf: object
    shape: tuple[int, ...]
    dtype: np.dtype
    backend: "Backend"
    offset: int = 0

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize  # not np.prod: µs on a burst's hot path

    def to_host(self) -> np.ndarray:
        host = np.empty(self.shape, dtype=self.dtype)
        self.backend.download_into(self.buf, host, self.offset)
        self.backend.synchronize()
        return host


def cache_dir(create: bool = True) -> Path:
    """Where compiled kernels are kept: $NNGPU_CACHE_DIR, else $XDG_CACHE_HOME/nngpu/kernels
    (apart from the downloaded models beside it)."""
    if os.environ.get("NNGPU_CACHE_DIR"):
        path = Path(os.environ["NNGPU_CACHE_DIR"])
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base) / "nngpu" / "kernels"
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


CACHE_SUFFIX = ".bin"  # every cache entry; `nngpu cache clear` removes only these


def entry_path(key: str) -> Path:
    """Where the disk cache keeps the binary of cache key `key`."""
    return cache_dir() / f"{key}{CACHE_SUFFIX}"


def write_atomically(path: Path, data: bytes) -> None:
    """Write through a private temporary file and rename it into place, so that another process
    sharing the cache never reads a half-written binary."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        log.warning("cannot write kernel cache %s", path)
        tmp.unlink(missing_ok=True)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:  # absent, or removed by `nngpu cache clear` meanwhile
        return None


_INCLUDE = re.compile(r'^#include "([\w.]+)"$', re.M)


@functools.lru_cache(maxsize=None)
def kernel_template(name: str) -> str:
    """A hand-written kernel from the top-level kernels/ folder (or the installed copy), read
    once, its `#include "FILE"` lines replaced by that file of the same folder: the text
    compiled, and keyed in the cache, is then the whole unit."""
    here = Path(__file__).resolve()
    for base in (here.parents[2] / "kernels", here.parents[1] / "kernels"):
        if (base / name).exists():
            return _INCLUDE.sub(lambda m: kernel_template(m.group(1)), (base / name).read_text())
    raise FileNotFoundError(f"kernel template {name} not found")


def cache_key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


@dataclass
class ProgramSet:
    """The compiled programs of one prepared model, as binaries by cache key: `given` ones (from
    a compilation cache) are loaded instead of built; `used` collects every program the model
    compiles or loads, for saving to a compilation cache."""

    given: Mapping[str, bytes] = field(default_factory=dict)
    # key -> its binary, asked for only when a compilation cache is saved (Backend.binary_of)
    used: dict[str, Callable[[], bytes]] = field(default_factory=dict)
    built: int = 0      # programs that had to be compiled from source

    def binaries(self) -> dict[str, bytes]:
        return {key: binary() for key, binary in self.used.items()}


_PROGRAMS: contextvars.ContextVar[ProgramSet | None] = contextvars.ContextVar("nngpu_programs", default=None)


@contextlib.contextmanager
def compiling_for(programs: ProgramSet) -> Iterator[None]:
    """Route the compiles in this block (this thread) through `programs`."""
    token = _PROGRAMS.set(programs)
    try:
        yield
    finally:
        _PROGRAMS.reset(token)


@dataclass(frozen=True)
class Provider:
    """What a backend module offers the package: its module-level PROVIDER, found by discovery
    (backends/__init__.py). Adding a backend is adding one module that declares one."""

    name: str
    create: Callable[..., "Backend"]        # (index: device N of `devices`, None: its own choice);
                                            # raises ImportError without its package, else why not
    preference: Callable[[], int | None]    # how much `auto` wants it on this machine; None: unusable
    package: str | None = None              # the import it needs
    install: str = ""                       # how to install that: one line
    targets: tuple[Target, ...] = ()        # how kernels are written for it (by device); none: it compiles none
    # the devices it sees here, in `name:N` order; None: one, implicit (no `name:N`)
    devices: Callable[[], list[str]] | None = None


class DeviceHealth:
    """Whether a device still runs anything: after a sticky fault its context is poisoned, every
    later call answers DEVICE_UNAVAILABLE, and only a new Device (a new context) recovers."""

    def __init__(self) -> None:
        self.lost: str | None = None   # the fault that lost it


class Backend(ABC):
    name: str
    target: Target | None   # how the compiler writes kernels for it (its module's); None: no kernels
    device_type: DeviceType
    description: str
    kernels_per_unit: int | None = None   # kernels per compiled program (None: a segment's all)
    # The device's compiler keeps what it compiles, keyed by source and options, so the disk
    # cache would hold it twice, and asking it for a binary costs a compile: binaries are asked
    # for only to save a compilation cache.
    compiler_caches: bool = False

    def __init__(self) -> None:
        # key -> (loaded program, its binary: where compiler_caches, None until asked for)
        self._programs: dict[str, tuple[Any, bytes | None]] = {}
        self._compile_lock = threading.Lock()
        self.health = DeviceHealth()   # shared with the plans' queues (for_plan)

    # ---- faults -------------------------------------------------------------------------------
    def is_sticky(self, error: BaseException) -> bool:
        """Whether `error` leaves the device unusable for good (a kernel's illegal address, a
        device lost): the backend's own to say; none by default."""
        return False

    def note_fault(self, error: BaseException) -> bool:
        """Mark the device lost when `error` is sticky; whether it was."""
        if not self.is_sticky(error):
            return False
        if self.health.lost is None:
            self.health.lost = f"{type(error).__name__}: {error}"
        return True

    def for_plan(self) -> "Backend":
        """This backend as one prepared model's plan uses it: the same device, compiled programs
        and memory, with a queue (stream) of its own, so that different models' executions
        overlap and a capture records only its own plan's work. Work on it is ordered with other
        queues only by synchronize(): an execution ends with one, before its outputs are read.
        A backend without queues is its own."""
        return self

    # ---- allocation and copies ------------------------------------------------------------------
    @abstractmethod
    def alloc(self, nbytes: int) -> Any: ...

    @abstractmethod
    def free(self, buf: Any) -> None: ...

    @abstractmethod
    def upload(self, buf: Any, host: np.ndarray) -> None: ...

    @abstractmethod
    def download(self, buf: Any, host: np.ndarray) -> None: ...

    @abstractmethod
    def copy(self, dst: Any, src: Any, nbytes: int, dst_offset: int = 0, src_offset: int = 0) -> None:
        """Device-to-device copy of `nbytes` bytes, from `src_offset` in src to `dst_offset` in dst."""

    # ---- compilation ----------------------------------------------------------------------------
    def compile(self, source: str, names: list[str]) -> list[Any]:
        """The launchable kernels `names` of one translation unit: from memory, else from the
        prepared model's compilation cache (see ProgramSet), else from the disk cache (keyed by
        source, device and options; not where the device's compiler keeps its own), else built
        and written there."""
        key = cache_key(self.name, self.cache_identity(), source)
        programs = _PROGRAMS.get()
        with self._compile_lock:
            entry = self._programs.get(key)
            if entry is None and programs is not None and key in programs.given:
                entry = self._load(programs.given[key], key)
            if entry is None:
                path = entry_path(key)
                binary = None if self.compiler_caches else _read(path)
                entry = None if binary is None else self._load(binary, path.name)
                if entry is None:
                    binary, program = self.build(source)
                    entry = program, binary
                    if binary is not None:
                        write_atomically(path, binary)
                    if programs is not None:
                        programs.built += 1
            self._programs[key] = entry
            if programs is not None:
                programs.used[key] = functools.partial(self.binary_of, key)
            return [self.kernel(entry[0], name) for name in names]

    def binary_of(self, key: str) -> bytes:
        """The binary of the program compiled under `key`, asked of the device the first time."""
        with self._compile_lock:
            program, binary = self._programs[key]
            if binary is None:
                binary = self.binary(program)
                self._programs[key] = program, binary
            return binary

    def _load(self, binary: bytes, what: str) -> tuple[Any, bytes] | None:
        try:
            return self.load(binary), binary
        except Exception:  # a stale or foreign binary: rebuild from source
            log.info("cached kernel binary %s is unusable; rebuilding", what)
            return None

    def cache_identity(self) -> str:
        """What besides the source decides the binary: device, driver, compiler options."""
        return ""

    def relaxed_precision(self) -> str:
        """What a model that allows float16 (relaxComputationFloat32toFloat16) computes in float16
        here, and why the rest stays float32, as the spec permits: prepare logs it."""
        return f"all float32: the {self.name} backend has no float16 kernels yet"

    def build(self, source: str) -> tuple[bytes | None, Any]:
        """Compile `source`: (the binary to cache, None where compiler_caches; the loaded program)."""
        raise NotImplementedError(f"the {self.name} backend compiles no kernels")

    def binary(self, program: Any) -> bytes:
        """What load() makes `program` again from, where build() gave no binary."""
        raise NotImplementedError(f"the {self.name} backend compiles no kernels")

    def load(self, binary: bytes) -> Any:
        """The loaded program of a cached binary."""
        raise NotImplementedError(f"the {self.name} backend compiles no kernels")

    def kernel(self, program: Any, name: str) -> Any:
        """The launchable kernel `name` of a loaded program."""
        raise NotImplementedError(f"the {self.name} backend compiles no kernels")

    # ---- launch -------------------------------------------------------------------------------
    def launch(self, kernel: Any, grid: Grid, args: list[Any]) -> None:
        raise NotImplementedError(f"the {self.name} backend launches no kernels")

    def prepare_gemm(self) -> None:
        """Make ready at prepare what `gemm` needs before a graph captures it (CUDA: this thread's
        cuBLAS handle). A program a bound GEMM compiles joins the compilation cache anyway: a
        segment binds its steps while it records the programs it uses."""

    def gemm(self, a: Any, b: Any, c: Any, m: int, n: int, k: int, b_transposed: bool = False,
             relaxed: bool = False, half: bool = False) -> None:
        """C[m, n] = A[m, k] @ B[k, n]: row-major float32 buffers (a library call where the
        platform has one); with b_transposed, `b` holds B as [n, k]; `relaxed`: the model allows
        float16 range and precision (relaxed_precision says what the backend makes of it); `half`:
        A and B are float16 (asked only of a target with gemm_half_inputs), C float32."""
        raise NotImplementedError(f"the {self.name} backend has no GEMM")

    # ---- bound steps: what a plan builds at prepare and only calls per execution ----------------
    def bind(self, kernel: Any, grid: Grid, args: list[Any]) -> Callable[[], Any]:
        """The launch of `kernel` over `grid` and `args`, as a call without arguments."""
        return functools.partial(self.launch, kernel, grid, args)

    def bind_gemm(self, a: Any, b: Any, c: Any, m: int, n: int, k: int, b_transposed: bool = False,
                  epilogue: tuple | None = None, then: tuple[str, list] | None = None,
                  ldb: int | None = None, scale: Any = None, relaxed: bool = False,
                  half: bool = False, half_c: bool = False, half_scale: bool = False) -> Callable[[], Any]:
        """The GEMM as a call without arguments; with epilogue (bias buffer, lo, hi) it stores
        clamp(C + bias, lo, hi), and with (bias, lo, hi, residual buffer, lo2, hi2)
        clamp(clamp(C + bias, lo, hi) + residual, lo2, hi2); with `then` (a folded kernel's
        source, its buffers) that kernel's value of clamp(C + bias, lo, hi): what only a backend
        whose target has gemm_epilogue is asked for. `ldb`: B's row stride where its rows are
        padded (a target's gemm_row_stride); `scale`: a buffer of K floats that multiply A's
        columns as they are read (asked for with gemm_epilogue too); `relaxed` and `half` as gemm's;
        `half_c`: the epilogue stores a float16 C (asked only of a target with gemm_half_output);
        `half_scale`: the scale is float16 (asked only with `half`)."""
        if ldb is not None:
            raise NotImplementedError(f"the {self.name} backend's GEMM reads B with rows of N columns")
        if scale is not None:
            raise NotImplementedError(f"the {self.name} backend's GEMM scales no columns of A")
        if epilogue is not None or then is not None or half_c:
            raise NotImplementedError(f"the {self.name} backend's GEMM has no epilogue")
        return functools.partial(self.gemm, a, b, c, m, n, k, b_transposed, relaxed, half)

    # Whether a bound step's buffer argument may be replaced between executions (`rebind`): the
    # kernels reading an input then read it where the execution's device value already is (a
    # registered pool, an IBuffer), and nothing copies it. Not where graphs record the arguments.
    rebinds = False

    def rebind(self, call: Callable[[], Any], index: int, buf: Any) -> None:
        """Argument `index` of the kernel a `bind` or `bind_gemm` call launches is now `buf`."""
        raise NotImplementedError(f"the {self.name} backend binds arguments once")

    def region(self, buf: Any, offset: int, nbytes: int) -> Any | None:
        """`nbytes` of `buf` from `offset` as a buffer that can be a kernel's argument (`buf`
        itself from 0), or None where the device cannot make one at that offset."""
        return buf if offset == 0 else None

    def timed(self, run: Callable[[], Any]) -> int | None:
        """Run a bound step alone and wait for it: its device time in ns from the backend's own
        events (profiling), None where it has none."""
        run()
        self.synchronize()
        return None

    def download_async(self, buf: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A new host array of `buf`'s first bytes, valid after the next synchronize() (so an
        execution's outputs cost one wait, not one each)."""
        host = np.empty(shape, dtype=dtype)
        self.download(buf, host)
        return host

    def download_into(self, buf: Any, host: np.ndarray, offset: int = 0) -> None:
        """Enqueue the copy of `buf`'s bytes from `offset` into `host` (a view of a request's
        pool, say: no staging array), complete after the next synchronize()."""
        if offset:
            raise NotImplementedError(f"the {self.name} backend downloads from a buffer's start only")
        self.download(buf, host)

    # CUDA graphs (see runtime/replay.py): a backend with `graphs` records bound steps into one
    # replayable call and moves host bytes through pinned staging buffers it can capture.
    graphs = False

    def capture(self, steps: list[Callable[[], Any]]) -> Callable[[], Any]:
        raise NotImplementedError(f"the {self.name} backend captures no graphs")

    def pinned(self, nbytes: int) -> np.ndarray:
        """A page-locked uint8 host array (staging for captured uploads and downloads)."""
        raise NotImplementedError(f"the {self.name} backend captures no graphs")

    def stage_in(self, buf: Any, staging: np.ndarray, nbytes: int) -> None:
        """Enqueue the copy of a pinned staging array's first `nbytes` into `buf` (capturable)."""
        raise NotImplementedError(f"the {self.name} backend captures no graphs")

    def stage_out(self, staging: np.ndarray, buf: Any, nbytes: int) -> None:
        """Enqueue the copy of `buf`'s first `nbytes` into a pinned staging array (capturable)."""
        raise NotImplementedError(f"the {self.name} backend captures no graphs")

    def address(self, buf: Any) -> int:
        """Where `buf` lives on the device: a captured copy from it is valid while this holds."""
        raise NotImplementedError(f"the {self.name} backend captures no graphs")

    def synchronize(self) -> None:
        """Wait for everything enqueued."""

    def constant_buffer(self, host: np.ndarray) -> Any | None:
        """A read-only buffer that kernels read `host` (a contiguous constant in its storage type)
        through in place, keeping `host` alive: the host array is then the only copy. None where
        the device has memory of its own (the caller allocates and uploads)."""
        return None

    # ---- host registration (burst slots) ----------------------------------------------------------
    def shares_memory(self, other: "Backend") -> bool:
        """Whether `other`'s buffers are this backend's: the same device backend or one of its
        plans' (for_plan), which share its memory and its health."""
        return getattr(other, "health", None) is self.health

    def register_host(self, view: np.ndarray) -> Any | None:
        """A buffer over the writable host bytes `view` (a pool's mapping) that `copy` reads and
        writes in place, so transfers to and from it are device-side; None where the backend
        cannot (the caller then moves the bytes through the host). Kept until release_host."""
        return None

    def release_host(self, handle: Any) -> None:
        """Give up a register_host buffer; `view` may be unmapped afterwards."""
