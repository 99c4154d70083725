"""The CUDA target's GEMM with an epilogue (kernels/gemm.cu, backends/cuda_tiled_gemm.py), bound
as the CUDA backend binds it and run by the host harness, block by block with its shared-memory
tiles and barriers: ragged tiles, B either way round, the bias and clamp, a residual, A's
scaled columns, float16 matrices, a float16 C, against numpy."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from nngpu.backends.cuda import TARGET as CUDA
from nngpu.backends.cuda_tiled_gemm import tiled_gemm_unit

from .host_backend import HostCudaBackend

pytestmark = pytest.mark.skipif(not shutil.which("g++"), reason="no g++ on this machine")


def _device(backend: HostCudaBackend, host: np.ndarray) -> np.ndarray:
    buf = backend.alloc(host.nbytes)
    backend.upload(buf, host)
    return buf


def _run(backend, a, b, m, n, k, b_transposed, epilogue=None, scale=None, half=False, half_c=False):
    """C from bind_gemm's call: A and B (and the scale) as float16 with `half`, C with `half_c`."""
    ab = np.float16 if half else np.float32
    c_type = np.float16 if half_c else np.float32
    c = backend.alloc(m * n * np.dtype(c_type).itemsize)
    bufs = None if epilogue is None else tuple(_device(backend, x) if isinstance(x, np.ndarray) else x
                                                for x in epilogue)
    s = None if scale is None else _device(backend, scale.astype(ab))
    backend.bind_gemm(_device(backend, a.astype(ab)), _device(backend, b.astype(ab)), c, m, n, k, b_transposed,
                      bufs, None, None, s, False, half, half_c, half and scale is not None)()
    out = np.empty((m, n), c_type)
    backend.download(c, out)
    return out.astype(np.float32)


CASES = [(37, 45, 70, True), (37, 45, 70, False), (64, 32, 32, False), (1, 40, 33, True), (5, 3, 0, True)]


@pytest.mark.parametrize("m,n,k,b_transposed", CASES)
def test_the_tiled_gemm_stores_bias_and_clamp_of_the_product(m, n, k, b_transposed):
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if b_transposed else (k, n), dtype=np.float32)
    bias = rng.standard_normal(n, dtype=np.float32)
    if m > 2 and k:
        a[2, 0] = np.nan   # NaN stays NaN through the clamps
    backend = HostCudaBackend()
    launches = backend.launches
    got = _run(backend, a, b, m, n, k, b_transposed, (bias, 0.0, 6.0))
    assert backend.launches == launches + 1   # one kernel: no second pass over C
    product = a.astype(np.float64) @ (b.T if b_transposed else b).astype(np.float64)
    want = np.clip(product + bias, 0.0, 6.0)   # np.clip keeps NaN too
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(k, 1))
    assert np.array_equal(np.isnan(got), np.isnan(want))


def test_a_residual_is_added_after_the_clamp_and_clamped_again():
    m, n, k = 50, 36, 40
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((n, k), dtype=np.float32)
    bias, residual = rng.standard_normal(n, dtype=np.float32), rng.standard_normal((m, n), dtype=np.float32)
    got = _run(HostCudaBackend(), a, b, m, n, k, True, (bias, -np.inf, np.inf, residual, 0.0, np.inf))
    want = np.maximum(a.astype(np.float64) @ b.T + bias + residual, 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_scaled_columns_of_a_without_an_epilogue():
    """A squeeze-and-excite gate folded into a bare GEMM: the tiled kernel, not cuBLAS."""
    m, n, k = 33, 20, 48
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    gate = rng.random(k, dtype=np.float32)
    backend = HostCudaBackend()
    got = _run(backend, a, b, m, n, k, False, scale=gate)
    assert backend.launches == 1
    np.testing.assert_allclose(got, (a * gate).astype(np.float64) @ b, rtol=1e-5, atol=1e-4)


def test_float16_matrices_scale_and_output():
    """A relaxed model's float16 temporaries: A, B and the gate read as float16, the sums float32,
    C rounded to float16 as it is stored."""
    m, n, k = 40, 24, 64
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((n, k), dtype=np.float32)
    bias, gate = rng.standard_normal(n, dtype=np.float32), rng.random(k, dtype=np.float32)
    got = _run(HostCudaBackend(), a, b, m, n, k, True, (bias, -1.0, 1.0), gate, half=True, half_c=True)
    h = lambda x: x.astype(np.float16).astype(np.float64)   # noqa: E731
    want = np.clip((h(a) * h(gate)).astype(np.float32).astype(np.float64) @ h(b).T + bias, -1.0, 1.0)
    assert got.dtype == np.float32 and np.array_equal(got, got.astype(np.float16).astype(np.float32))
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)


def test_a_bare_gemm_stays_a_cublas_call():
    m, n, k = 8, 8, 8
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    backend = HostCudaBackend()
    got = _run(backend, a, b, m, n, k, False)
    assert backend.launches == 0   # HostCudaBackend.gemm: cublasGemmEx by cuBLAS's definition
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


def test_indices_are_32_bit_unless_a_matrix_has_more_elements():
    small, _ = tiled_gemm_unit(CUDA.renderer, 1000, 1000, 1000, True, (0.0, 6.0))
    large, grid = tiled_gemm_unit(CUDA.renderer, 1 << 16, 64, 1 << 15, True, (0.0, 6.0))
    assert "#define IDX int\n" in small and "#define IDX long long\n" in large
    assert grid.threads == ((1 << 16) // 32 * 2 * 256,) and grid.group == (256,)


def _nvrtc_errors(sources: list[str]) -> list[str]:
    """What NVRTC says of each unit it fails to compile to an sm_90 cubin (none without CuPy)."""
    from nngpu.backends.cuda import compile_cubin

    errors = []
    for k, source in enumerate(sources):
        try:
            assert compile_cubin(source, f"gemm{k}")[:4] == b"\x7fELF"
        except RuntimeError as e:
            errors.append(str(e)[:2000])
    return errors


def test_every_variant_compiles_with_nvrtc():
    """B either way round, with and without each part of the epilogue, float16 or float32: the
    units the host harness runs are the ones NVRTC compiles for the GPU."""
    pytest.importorskip("cupy", reason="CuPy + NVRTC (extra 'cuda') are not installed")
    sources = [tiled_gemm_unit(CUDA.renderer, 50, 36, 40, b_t, bounds, None, None, scale, half, half, half and scale)[0]
               for b_t in (False, True) for bounds in (None, (0.0, 6.0), (-np.inf, np.inf, 0.0, np.inf))
               for scale in (False, True) for half in (False, True) if bounds is not None or scale]
    assert not _nvrtc_errors(sources)


def test_the_face_detectors_gemms_with_folded_kernels_run_on_host_and_compile_with_nvrtc(tmp_path):
    """Its PAD+ADD+RELU kernels folded into the GEMMs as they store (THEN, rendered as CUDA); and
    `nngpu kernels --target cuda` writes those very units."""
    pytest.importorskip("cupy", reason="CuPy + NVRTC (extra 'cuda') are not installed")
    pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")
    from nngpu.modelutil import as_model_1_3
    from nngpu.runtime.interpreter import GraphRunner
    from nngpu.session import random_inputs
    from nngpu.tflite import load_tflite
    from nngpu.tflite.models import find_model

    from .run import run_on_host_cuda

    path = find_model("face_detection_short_range")
    if path is None:
        pytest.skip("the face detector is not cached: run ci/fetch-models.sh")
    imported = load_tflite(path)
    model = as_model_1_3(imported.model)
    inputs = random_inputs(imported.inputs, seed=1)
    backend = HostCudaBackend()
    got = run_on_host_cuda(model, inputs, backend).outputs
    want = GraphRunner(model).run(inputs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * float(np.ptp(w)))
    gemms = [unit for unit in backend.launched if "nn_gemm_tiled" in unit]
    assert sum("#define THEN\n" in unit for unit in gemms) >= 2   # distinct units folding PAD+ADD+RELU
    assert not _nvrtc_errors(gemms)
    from nngpu.cli import main

    assert main(["kernels", str(path), "--target", "cuda", "--out", str(tmp_path)]) == 0
    assert {p.read_text().strip() for p in tmp_path.glob("*_gemm.cu")} == {unit.strip() for unit in gemms}


@pytest.mark.parametrize("short", ["A", "B", "C", "bias", "residual"])
def test_a_buffer_shorter_than_its_matrix_is_refused_at_binding(short):
    """The kernel reads and writes through pointers: a plan that bound too little stops there."""
    m, n, k = 20, 12, 9
    backend = HostCudaBackend()
    sizes = {"A": m * k * 4, "B": n * k * 4, "C": m * n * 4, "bias": n * 4, "residual": m * n * 4}
    buf = {name: backend.alloc(size - 4 if name == short else size) for name, size in sizes.items()}
    epilogue = (buf["bias"], 0.0, 6.0, buf["residual"], 0.0, 6.0)
    with pytest.raises(ValueError, match=f"^{short}: {sizes[short]} bytes needed"):
        backend.bind_gemm(buf["A"], buf["B"], buf["C"], m, n, k, True, epilogue)
