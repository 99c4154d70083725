"""compiler/render_column_then.py: a folded kernel that is not lane-wise in its index but is
along a row (the face detector's PAD+ADD+RELU: y + z[r * K + c] for columns c < K, y past
them) gets vector functions that load z in vectors and take a vector across the edge K lane
by lane; a kernel with anything else keeps the lane-by-lane function. On PoCL every vector
function gives the scalar function's bits, lane for lane, NaN included."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import create, device_backends
from nngpu.backends.opencl import OpenCLRenderer
from nngpu.compiler.render_epilogue import render_then
from nngpu.ir.expr import Buffer, Load, Var, const, select
from nngpu.ir.kernel import Kernel
from nngpu.ir.schedule import Grid

ROW = 32          # the caller's rows: a GEMM's N, a template's channels
ROWS = 6
Y, Z, S = 1, 2, 3   # buffer keys: the producer's output, the padded input, a per-column scale


def _kernel(value_of) -> Kernel:
    i = Var("i", "int")
    y = Load(Buffer(Y, "float"), i)
    return Kernel("nn_k", Buffer(9, "float"), (ROWS, ROW), i, value_of(i, y))


def pad_add_relu(edge: int) -> Kernel:
    """max(y + pad(z), 0): z has `edge` columns, zeros after them."""
    def value(i, y):
        col = i % ROW
        z = Load(Buffer(Z, "float"), (i / ROW) * edge + col)
        t = select(col >= edge, const(0.0, "float"), z) + y
        return select(t < const(0.0, "float"), const(0.0, "float"), t)
    return _kernel(value)


def pad_add_prelu(edge: int) -> Kernel:
    """The palm detector's: the sum's negative part times a per-column slope, plus its positive."""
    def value(i, y):
        col = i % ROW
        z = Load(Buffer(Z, "float"), (i / ROW) * edge + col)
        t = select(col >= edge, const(0.0, "float"), z) + y
        zero = const(0.0, "float")
        return select(t > zero, zero, t) * Load(Buffer(S, "float"), col) + select(t < zero, zero, t)
    return _kernel(value)


def strided(_edge: int) -> Kernel:
    """y + z[2c]: an index of slope 2 along the row, no vector load."""
    return _kernel(lambda i, y: y + Load(Buffer(Z, "float"), (i % ROW) * 2))


def gathered_in_a_lane_select(edge: int) -> Kernel:
    """y > 0 ? z[r * edge + c] : y: a load only the lanes that take that branch make."""
    def value(i, y):
        z = Load(Buffer(Z, "float"), (i / ROW) * edge + i % ROW)
        return select(y > const(0.0, "float"), z, y)
    return _kernel(value)


def _then(kernel: Kernel) -> str:
    return render_then(OpenCLRenderer(), kernel, Y, ROW, True)


def _vector_function(text: str, n: int) -> str:
    """The body of nn_then_vN in `text`."""
    return text.split(f"nn_then_v{n}(")[1].split("{\n", 1)[1].split("\n}\n")[0]


@pytest.mark.parametrize("n", [4, 8, 16])
def test_a_pad_add_loads_its_rows_in_vectors_and_takes_the_edge_lane_by_lane(n):
    body = _vector_function(_then(pad_add_relu(24)), n)
    assert f"vload{n}(0, in0 + " in body and f"(c >= 24) == ((c + {n - 1}) >= 24)" in body
    assert "lane[j] = nn_then(" in body   # after the test: the vector across the edge


def test_a_per_column_load_is_a_vector_load_of_the_column():
    body = _vector_function(_then(pad_add_prelu(24)), 8)
    assert "vload8(0, in1 + c)" in body


@pytest.mark.parametrize("case", [strided, gathered_in_a_lane_select])
def test_anything_else_takes_its_lanes_one_by_one(case):
    body = _vector_function(_then(case(24)), 8)
    assert "vload8(0, in" not in body and body.strip().startswith("float lane[8];")


def test_a_condition_on_the_row_alone_needs_no_test():
    kernel = _kernel(lambda i, y: select(i / ROW < 3, Load(Buffer(Z, "float"), (i / ROW) * 24 + i % ROW), y) * y)
    body = _vector_function(_then(kernel), 8)
    assert "if (" not in body and "lane[" not in body and "vload8(0, in0 + ((r * 24) + c))" in body


@pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")
@pytest.mark.parametrize("edge", [24, 20, 30])
@pytest.mark.parametrize("case", [pad_add_relu, pad_add_prelu, strided, gathered_in_a_lane_select])
def test_every_vector_function_gives_the_scalar_functions_bits(case, edge):
    """A harness calls nn_then_vN on every vector of N columns of each row, and nn_then on each
    element, on the same inputs: the same bits (edges 24, 20 and 30 put the edge between
    vectors and inside them)."""
    text = _then(case(edge))
    params = text.split("#define THEN_PARAMS ")[1].split("\n")[0]
    args = text.split("#define THEN_ARGS ")[1].split("\n")[0]
    calls = "\n".join(
        f"    for (int c = 0; c < {ROW}; c += {n}) vstore{n}(nn_then_v{n}(vload{n}(0, ys + r * {ROW} + c), "
        f"r * {ROW} + c, r, c{args}), 0, vec{n} + r * {ROW} + c);" for n in (4, 8, 16))
    harness = text + f"""
__kernel void harness(__global const float* restrict ys, __global float* restrict lanes,
                      __global float* restrict vec4, __global float* restrict vec8, __global float* restrict vec16{params}) {{
    const int r = get_global_id(0);
    for (int c = 0; c < {ROW}; ++c) lanes[r * {ROW} + c] = nn_then(ys[r * {ROW} + c], r * {ROW} + c, r, c{args});
{calls}
}}
"""
    backend = create("opencl")
    (kernel,) = backend.compile(harness, ["harness"])
    rng = np.random.default_rng(edge)
    ys = (rng.standard_normal(ROWS * ROW) * 3).astype(np.float32)
    ys[:3] = [np.nan, np.inf, -np.inf]
    z = rng.standard_normal(ROWS * 2 * ROW).astype(np.float32)   # room for the strided case
    slope = rng.standard_normal(ROW).astype(np.float32)
    others = {Z: z, S: slope}
    keys = [b.key for b in case(edge).inputs if b.key != Y]   # in0, in1, ... in this order
    buffers = [backend.alloc(a.nbytes) for a in [ys, *(others[k] for k in keys)]]
    for buf, a in zip(buffers, [ys, *(others[k] for k in keys)]):
        backend.upload(buf, a)
    outs = [backend.alloc(ys.nbytes) for _ in range(4)]
    backend.bind(kernel, Grid((ROWS,), None), [buffers[0], *outs, *buffers[1:]])()
    backend.synchronize()
    got = []
    for buf in outs:
        host = np.empty_like(ys)
        backend.download(buf, host)
        got.append(host)
    for vec in got[1:]:
        assert vec.tobytes() == got[0].tobytes()
    if case is pad_add_relu:
        padded = np.pad(z[:ROWS * edge].reshape(ROWS, edge), [(0, 0), (0, ROW - edge)]).ravel()
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(got[0], np.where(ys + padded < 0, 0, ys + padded))
