"""Shared helpers of the TFLite tests: run a model on nngpu and on the reference interpreter."""
from __future__ import annotations

import numpy as np
import pytest


def reference_interpreter():
    """ai_edge_litert's Interpreter class, or skip the test."""
    mod = pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")
    return mod.Interpreter


def run_reference(data: bytes | None, inputs: list[np.ndarray], path: str | None = None,
                  threads: int = 1, xnnpack: bool = True, reference_kernels: bool = False) -> list[np.ndarray]:
    """The interpreter's outputs; xnnpack=False runs TFLite's builtin kernels only (XNNPACK's
    quantized kernels may round one step differently), reference_kernels=True its reference
    kernels (BUILTIN_REF: the arithmetic of record, which the optimized ones may miss by one)."""
    mod = pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")
    kwargs = {"num_threads": threads}
    if reference_kernels:
        kwargs["experimental_op_resolver_type"] = mod.OpResolverType.BUILTIN_REF
    elif not xnnpack:
        kwargs["experimental_op_resolver_type"] = mod.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    it = mod.Interpreter(model_content=data, **kwargs) if path is None else mod.Interpreter(model_path=path, **kwargs)
    it.allocate_tensors()
    for d, a in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], a)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def run_nngpu(imported, inputs: list[np.ndarray], backend: str = "numpy") -> list[np.ndarray]:
    from nngpu.session import Session

    with Session(imported, backend) as s:
        return list(s.run(inputs).values())


def max_error_ratio(ref: np.ndarray, got: np.ndarray, floor: float = 1e-3) -> float:
    """max |ref - got| over the output's range (its magnitude when it holds one value). The
    scale is floored (default 1e-3) so that a saturated, near-constant output (e.g. a sigmoid
    at 1e-20 everywhere) is not judged on differences far below float32 resolution of the
    values that matter."""
    ref64, got64 = ref.astype(np.float64), got.astype(np.float64)
    span = float(ref64.max() - ref64.min()) if ref64.size else 0.0
    span = span or float(np.abs(ref64).max(initial=0.0))
    return float(np.abs(ref64 - got64).max(initial=0.0)) / max(span, floor)


def assert_close(ref: list[np.ndarray], got: list[np.ndarray], rel: float = 1e-4, quant_tol: int = 0) -> None:
    assert len(ref) == len(got)
    for k, (r, g) in enumerate(zip(ref, got)):
        assert r.shape == g.shape, f"output {k}: shape {g.shape}, reference {r.shape}"
        assert r.dtype == g.dtype, f"output {k}: dtype {g.dtype}, reference {r.dtype}"
        if r.dtype.kind in "iub":
            diff = int(np.abs(r.astype(np.int64) - g.astype(np.int64)).max(initial=0))
            assert diff <= quant_tol, f"output {k}: off by up to {diff} (tolerance {quant_tol})"
        else:
            ratio = max_error_ratio(r, g)
            assert ratio <= rel, f"output {k}: max abs error {ratio:.3g} x range (tolerance {rel})"
