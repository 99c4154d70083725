"""nngpu against the TFLite interpreter (ai_edge_litert, the `tflite` extra) on one .tflite model:
what `nngpu compare` and zoo/report.py print and tests/tflite/test_zoo.py asserts.

Inputs are random with a fixed seed, drawn from the model's own input details: floats uniform in
[-1, 1); quantized (u)int8 over their type's full range; other integers, which the zoo's models
use as token ids, in [0, INDEX_HIGH); an open dimension (a dynamic batch) is DYNAMIC_EXTENT.

The tolerance rule, per output, against litert's default run (XNNPACK-delegated):
- float: max abs error <= REL_TOL x the output's range (max - min, floored at RANGE_FLOOR so a
  near-constant output is not judged below float32 resolution), or within TFLite's own kernel
  spread: the max abs difference between the default run and its reference kernels (BUILTIN_REF);
- quantized (scale != 0): within QUANT_STEPS quantization step;
- other integers (indices, shapes): exact, or within the same kernel spread."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import numpy as np

REL_TOL = 1e-4
RANGE_FLOOR = 1e-3
QUANT_STEPS = 1
INDEX_HIGH = 100       # the zoo's models use integer inputs as token ids, from vocabularies at least this large
DYNAMIC_EXTENT = 2     # what an open dimension gets, so a dynamic batch is really exercised
SEED = 0


@dataclass
class OutputCheck:
    name: str
    error: float       # max abs error (float) or max steps (integer), against the default run
    tolerance: float
    quantized: bool
    note: str = ""     # a shape or dtype mismatch, non-finite values
    spread: float = 0.0  # TFLite's own: its default run against its reference kernels, same unit
    span: float = 0.0    # a float output's range (max - min, floored at RANGE_FLOOR)

    @property
    def ok(self) -> bool:
        return not self.note and self.error <= self.tolerance


@dataclass
class Outcome:
    """One model on one backend. `import_error` / `run_error`: the one-line reason it stopped."""

    model: str
    backend: str
    import_error: str = ""
    run_error: str = ""
    placement: str = ""
    note: str = ""
    checks: list[OutputCheck] = field(default_factory=list)
    nngpu_ms: float | None = None
    tflite_ms: float | None = None

    @property
    def ok(self) -> bool:
        return not self.import_error and not self.run_error and bool(self.checks) \
            and all(c.ok for c in self.checks)

    def worst(self) -> OutputCheck | None:
        """The output furthest beyond (or nearest to) its tolerance."""
        def badness(c: OutputCheck) -> float:
            if c.note:
                return np.inf
            if c.tolerance:
                return c.error / c.tolerance
            return np.inf if c.error else 0.0
        return max(self.checks, key=badness, default=None)


def one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


# litert's op resolvers: its default (XNNPACK delegated), TFLite's reference kernels, and its
# optimized builtin kernels without delegates (the spread's stand-in where the reference aborts).
DEFAULT, REFERENCE, BUILTIN = "default", "reference", "builtin"


def interpreter(path: Path, kind: str = DEFAULT, keep_all: bool = False) -> Any:
    """litert's interpreter of `kind`; keep_all: every intermediate tensor stays readable."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    resolver = {DEFAULT: OpResolverType.AUTO, REFERENCE: OpResolverType.BUILTIN_REF,
                BUILTIN: OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}[kind]
    return Interpreter(model_path=str(path), experimental_op_resolver_type=resolver,
                       experimental_preserve_all_tensors=keep_all)


def _input_details(path: Path) -> list[dict]:
    return interpreter(path).get_input_details()


def make_inputs(path: Path, seed: int = SEED) -> list[np.ndarray]:
    """The random inputs of a model, in its input order (see the module docstring)."""
    rng = np.random.default_rng(seed)
    out = []
    for d in _input_details(path):
        sig = d.get("shape_signature")
        dims = [int(s) for s in (sig if sig is not None and len(sig) else d["shape"])]
        shape = [DYNAMIC_EXTENT if s < 0 else s for s in dims]
        dtype = np.dtype(d["dtype"])
        scale = d["quantization"][0]
        if dtype.kind == "f":
            out.append(rng.uniform(-1.0, 1.0, shape).astype(dtype))
        elif dtype.kind == "b":
            out.append(rng.integers(0, 2, shape).astype(np.bool_))
        elif scale:
            info = np.iinfo(dtype)
            out.append(rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype))
        else:
            out.append(rng.integers(0, INDEX_HIGH, shape).astype(dtype))
    return out


def prepared(it: Any, inputs: list[np.ndarray]) -> Any:
    """`it` allocated for the shapes of `inputs` and given them."""
    for d, a in zip(it.get_input_details(), inputs):
        if list(d["shape"]) != list(a.shape):
            it.resize_tensor_input(d["index"], list(a.shape))
    it.allocate_tensors()
    for d, a in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], a)
    return it


def tflite_run(path: Path, inputs: list[np.ndarray], kind: str = DEFAULT) -> tuple[list[np.ndarray], list[dict]]:
    """litert's outputs and output details for `inputs`."""
    it = prepared(interpreter(path, kind), inputs)
    it.invoke()
    details = it.get_output_details()
    return [it.get_tensor(d["index"]).copy() for d in details], details


def median_ms(call: Callable[[], Any], runs: int) -> float:
    """The median time of `call` in ms over `runs` calls, after one warm-up call."""
    call()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def tflite_ms(path: Path, inputs: list[np.ndarray], runs: int) -> float:
    """The median time of one invoke of the default (XNNPACK) interpreter."""
    return median_ms(prepared(interpreter(path), inputs).invoke, runs)


@dataclass
class Reference:
    """What TFLite computes for a model: the inputs, its default and reference-kernel outputs."""

    inputs: list[np.ndarray]
    default: list[np.ndarray]
    kernels: list[np.ndarray]
    details: list[dict]
    note: str = ""   # set when the reference kernels died and the builtin ones stand in


def _outputs(path: Path, inputs: list[np.ndarray], kind: str) -> list[np.ndarray]:
    return tflite_run(path, inputs, kind)[0]


def _isolated(path: Path, inputs: list[np.ndarray], kind: str) -> list[np.ndarray] | None:
    """tflite_run in a child process: None when TFLite dies there (its reference kernels abort
    the process on some models, e.g. the full-size int8 MobileNet v3)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        try:
            return pool.submit(_outputs, path, inputs, kind).result()
        except BrokenProcessPool:
            return None


@lru_cache(maxsize=4)
def reference(path: Path, seed: int = SEED, isolate: bool = False) -> Reference:
    """TFLite's outputs for the model's random inputs (reference_for)."""
    return reference_for(path, make_inputs(path, seed), isolate)


def reference_for(path: Path, inputs: list[np.ndarray], isolate: bool = False) -> Reference:
    """TFLite's outputs for `inputs`; `isolate` runs the reference kernels in a child process, so
    that one that aborts costs its model the spread, not the caller its life."""
    default, details = tflite_run(path, inputs)
    kernels = _isolated(path, inputs, REFERENCE) if isolate else _outputs(path, inputs, REFERENCE)
    if kernels is not None:
        return Reference(inputs, default, kernels, details)
    return Reference(inputs, default, _outputs(path, inputs, BUILTIN), details,
                     "TFLite's reference kernels abort: spread from its builtin kernels")


def _diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max(initial=0.0))


def check_output(name: str, ref: np.ndarray, alt: np.ndarray, got: np.ndarray, scale: float) -> OutputCheck:
    """One output against the rule of the module docstring (`alt`: TFLite's reference kernels)."""
    quantized = ref.dtype.kind in "iu" and bool(scale)
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return OutputCheck(name, np.inf, 0.0, quantized, f"{got.dtype}{list(got.shape)}, TFLite "
                                                          f"{ref.dtype}{list(ref.shape)}")
    if ref.dtype.kind == "f" and not np.isfinite(got[np.isfinite(ref)]).all():
        return OutputCheck(name, np.inf, 0.0, False, "non-finite values where TFLite's are finite")
    error, spread = _diff(ref, got), _diff(ref, alt)
    if quantized:
        return OutputCheck(name, error, float(QUANT_STEPS), True, spread=spread)
    if ref.dtype.kind == "f":
        span = max(float(ref.max() - ref.min()) if ref.size else 0.0, RANGE_FLOOR)
        return OutputCheck(name, error, max(REL_TOL * span, spread), False, spread=spread, span=span)
    return OutputCheck(name, error, spread, False, spread=spread)


def _session(path: Path, backend: str) -> Any:
    from nngpu.session import Session

    return Session(str(path), backend=backend)


def _placement(session: Any) -> str:
    """How nngpu split the model, where it says (a partitioned Session's `placement`)."""
    placement = getattr(session, "placement", None)
    return "" if placement is None else " ".join(str(placement).split())


def compare(path: Path, backend: str = "numpy", runs: int = 0, isolate: bool = False,
            inputs: list[np.ndarray] | None = None) -> Outcome:
    """Import, run and check one model on `inputs` (default: its seeded random ones); with
    runs > 0 also time both (median ms of `runs`). `isolate`: TFLite's reference kernels run in
    a child process (see `reference_for`)."""
    path = Path(path)
    out = Outcome(path.stem, backend)
    ref = reference(path, isolate=isolate) if inputs is None else reference_for(path, inputs, isolate)
    out.note = ref.note
    if runs > 0:
        out.tflite_ms = tflite_ms(path, ref.inputs, runs)
    try:
        session = _session(path, backend)
    except Exception as e:  # the report shows why, one line
        out.import_error = one_line(e)
        return out
    with session:
        out.placement = _placement(session)
        try:
            got = list(session.run(ref.inputs).values())  # in model input order, as litert's
        except Exception as e:
            out.run_error = one_line(e)
            return out
        if len(got) != len(ref.default):
            out.run_error = f"{len(got)} outputs, TFLite has {len(ref.default)}"
            return out
        out.checks = [check_output(d["name"], r, a, g, d["quantization"][0])
                      for d, r, a, g in zip(ref.details, ref.default, ref.kernels, got)]
        if runs > 0:
            out.nngpu_ms = _nngpu_ms(session, ref.inputs, runs)
    return out


def _nngpu_ms(session: Any, inputs: list[np.ndarray], runs: int) -> float:
    """The median time of one execution, inputs set once (as tflite_ms)."""
    session.set_inputs(inputs)
    return median_ms(session.execute, runs)
