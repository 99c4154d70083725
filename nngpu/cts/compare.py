"""The corpus accuracy criteria (TestHarness.cpp), applied to every element."""
from __future__ import annotations

import numpy as np

from ..hal.types import OperandType as T
from ..json_models import TestCase, to_array

FP16_TOL = 5.0 * 2.0**-10
FP32_ATOL, FP32_RTOL = 1e-5, 5.0 * 2.0**-23


def tolerance(case: TestCase, operand_type: T) -> tuple[float, float] | None:
    """(atol, rtol) for an output of this type; None means an exact comparison."""
    if operand_type == T.TENSOR_FLOAT32:
        return (FP16_TOL, FP16_TOL) if case.relaxed or case.has_float16() else (FP32_ATOL, FP32_RTOL)
    if operand_type == T.TENSOR_FLOAT16:
        return FP16_TOL, FP16_TOL
    if operand_type in (T.TENSOR_INT32, T.INT32, T.TENSOR_QUANT16_ASYMM, T.TENSOR_QUANT16_SYMM):
        return 1.0, 0.0
    if operand_type in (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM):
        return (3.0 if "mobilenet" in case.name else 1.0), 0.0
    return None


def compare_output(case: TestCase, operand: dict, actual: np.ndarray) -> str | None:
    """None when `actual` meets the criteria, else a description of the first mismatch."""
    t = T[operand["type"]]
    expected = to_array(operand["data"], t, operand["dimensions"]).reshape(-1)
    actual = actual.reshape(-1)
    if actual.size != expected.size:
        return f"{actual.size} elements, expected {expected.size}"
    tol = tolerance(case, t)
    if tol is None:
        bad = np.nonzero(actual != expected)[0]
    else:
        atol, rtol = tol
        e = expected.astype(np.float64)
        a = actual.astype(np.float64)
        with np.errstate(invalid="ignore"):
            ok = (np.abs(a - e) <= atol + rtol * np.abs(e)) | (np.isnan(e) & np.isnan(a)) | (np.isinf(e) & (a == e))
        bad = np.nonzero(~ok)[0]
    if bad.size:
        i = int(bad[0])
        return f"element {i}: got {actual[i]!r}, expected {expected[i]!r} ({bad.size} of {expected.size} differ)"
    return None


def check_multinomial(case: TestCase, samples: np.ndarray) -> str | None:
    """RANDOM_MULTINOMIAL: per class, the fraction of samples must be within the tolerance of
    softmax(logits)."""
    main = case.raw["main"]
    op = main["operations"][0]
    logits_operand = main["operands"][op["inputs"][0]]
    logits = to_array(logits_operand["data"], T[logits_operand["type"]], logits_operand["dimensions"]).astype(np.float64)
    logits = logits.reshape(logits_operand["dimensions"])
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    samples = samples.reshape(logits.shape[0], -1)
    tol = case.multinomial_tolerance
    for b in range(logits.shape[0]):
        counts = np.bincount(samples[b].astype(np.int64), minlength=logits.shape[1])[: logits.shape[1]]
        freq = counts / samples.shape[1]
        worst = np.abs(freq - probs[b]).max()
        if worst > tol:
            return f"batch {b}: class frequency off by {worst:.4f} > {tol}"
    return None
