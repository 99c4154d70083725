"""Compilation caching, case by case after VTS CompilationCachingTests: save and retrieve (also
at non-zero fd offsets), wrong handle counts, wrong fd counts, wrong access modes, the TOCTOU
races, a replaced security-sensitive cache, corrupted / lengthened caches, a wrong token; and
what VTS does not cover: truncation, another identity or key, deadlines, fd leaks, and a cache
restored in a fresh process with the kernel cache emptied (nothing recompiled)."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal.types import (DataLocation, ErrorStatus, ExecutionPreference, MeasureTiming, Model, NativeHandle,
                             Operand, OperandLifeTime as L, OperandType as T, Operation, OperationType as Op,
                             OptionalTimePoint, Priority, Request, RequestArgument)
from nngpu.json_models import build_model, build_request, load_file
from nngpu.memory import allocate_shared

CORPUS = Path(__file__).resolve().parents[1] / "data" / "nnapi-cts"
CASES = {"float32": ("V1_0/conv_float_2.json.gz", 0), "quant8": ("V1_0/conv_quant8.json.gz", 0),
         "per_channel": ("V1_2/conv2d_per_channel.json.gz", 0), "while": ("V1_3/while_fib.json.gz", 0)}
FAILED = (ErrorStatus.GENERAL_FAILURE, ErrorStatus.INVALID_ARGUMENT)
BACKENDS = ["numpy", *device_backends()]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """A kernel cache (and so a cache key) of the test's own."""
    monkeypatch.setenv("NNGPU_CACHE_DIR", str(tmp_path / "kernels"))


class Files:
    """VTS's cache file groups: one path per handle, opened afresh for each call."""

    def __init__(self, root: Path, name: str = "cache"):
        self.model = [root / f"{name}_model"]
        self.data = [root / f"{name}_data"]
        self.extra = root / f"{name}_extra"
        self.opened: list[int] = []

    def _handle(self, paths, mode) -> NativeHandle:
        fds = [os.open(p, mode | os.O_CREAT, 0o600) for p in paths]
        self.opened += fds
        return NativeHandle(fds)

    def handles(self, model=None, data=None, model_mode=os.O_RDWR, data_mode=os.O_RDWR):
        """(modelCache, dataCache): `model` / `data` override the groups (a list of path lists)."""
        model = model if model is not None else [[p] for p in self.model]
        data = data if data is not None else [[p] for p in self.data]
        return [self._handle(g, model_mode) for g in model], [self._handle(g, data_mode) for g in data]

    def close(self) -> None:
        for fd in self.opened:
            os.close(fd)
        self.opened.clear()


@pytest.fixture
def files(tmp_path):
    f = Files(tmp_path)
    yield f
    f.close()


def case_of(kind: str):
    path, k = CASES[kind]
    return load_file(CORPUS / path)[k]


def save(device, model, handles, token=bytes(range(32))):
    cb = PreparedModelCallback()
    version = device.prepareModel_1_3 if not isinstance(model, Model) else None
    if version is None:
        launch = device.prepareModel_1_2(model, ExecutionPreference.FAST_SINGLE_ANSWER, *handles, token, cb)
    else:
        launch = device.prepareModel_1_3(model, ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM,
                                         OptionalTimePoint(), *handles, token, cb)
    status, prepared = cb.get(120)
    assert launch == status == ErrorStatus.NONE and prepared is not None
    return prepared


def restore(device, handles, token=bytes(range(32)), deadline=None):
    cb = PreparedModelCallback()
    if deadline is None:
        launch = device.prepareModelFromCache(*handles, token, cb)
    else:
        launch = device.prepareModelFromCache_1_3(deadline, *handles, token, cb)
    assert cb.wait(120)
    status, prepared = cb.get()
    assert (status == ErrorStatus.NONE) == (prepared is not None)
    if status not in (ErrorStatus.MISSED_DEADLINE_PERSISTENT, ErrorStatus.MISSED_DEADLINE_TRANSIENT):
        assert launch == status or launch == ErrorStatus.NONE
    return status, prepared


def outputs(prepared, case) -> bytes:
    ex = build_request(case)
    status, _, _ = prepared.executeSynchronously(ex.request, MeasureTiming.NO)
    assert status == ErrorStatus.NONE
    return bytes(ex.output_pool.map())


def expect_same(prepared, reference, case) -> None:
    assert outputs(prepared, case) == outputs(reference, case)


# ---- save and retrieve ---------------------------------------------------------------------------
def test_cache_files_needed():
    assert Device("numpy").getNumberOfCacheFilesNeeded() == (ErrorStatus.NONE, 1, 1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", sorted(CASES))
def test_save_and_retrieve(backend, kind, files):
    case = case_of(kind)
    device = Device(backend)
    reference = save(device, build_model(case), files.handles())
    status, prepared = restore(Device(backend), files.handles())
    assert status == ErrorStatus.NONE
    expect_same(prepared, reference, case)


def test_save_and_retrieve_at_non_zero_offsets(files):
    case = case_of("float32")
    model_cache, data_cache = files.handles()
    for h in model_cache + data_cache:
        os.write(h.fds[0], b"\0\0")
    reference = save(Device("numpy"), build_model(case), (model_cache, data_cache))
    model_cache, data_cache = files.handles()
    for h in model_cache + data_cache:
        os.read(h.fds[0], 1)
    status, prepared = restore(Device("numpy"), (model_cache, data_cache))
    assert status == ErrorStatus.NONE
    expect_same(prepared, reference, case)


def test_no_cache_vectors_ignore_the_token(files):
    save(Device("numpy"), build_model(case_of("float32")), ([], []), token=b"short")
    assert not files.model[0].exists()


# ---- wrong arguments -----------------------------------------------------------------------------
def _wrong_groups(files):
    """(name, model groups, data groups) of each wrong count of handles or of fds per handle."""
    m, d, x = [[p] for p in files.model], [[p] for p in files.data], files.extra
    return [("extra model handle", m + [[x]], d), ("no model handle", [], d),
            ("extra data handle", m, d + [[x]]), ("no data handle", m, []),
            ("two fds in a model handle", [m[0] + [x]], d), ("no fd in a model handle", [[]], d),
            ("two fds in a data handle", m, [d[0] + [x]]), ("no fd in a data handle", m, [[]])]


def test_save_with_wrong_handles_prepares_but_saves_nothing_usable(files):
    case = case_of("float32")
    for name, model, data in _wrong_groups(files):
        prepared = save(Device("numpy"), build_model(case), files.handles(model, data))
        assert outputs(prepared, case), name       # preparing succeeded and runs
        status, restored = restore(Device("numpy"), files.handles(model, data))
        assert status in FAILED and restored is None, name


def test_retrieve_with_wrong_handles_fails(files):
    case = case_of("float32")
    save(Device("numpy"), build_model(case), files.handles())
    for name, model, data in _wrong_groups(files):
        status, restored = restore(Device("numpy"), files.handles(model, data))
        assert status in FAILED and restored is None, name


def test_wrong_token_length_is_invalid(files):
    save(Device("numpy"), build_model(case_of("float32")), files.handles())
    assert restore(Device("numpy"), files.handles(), token=bytes(31))[0] == ErrorStatus.INVALID_ARGUMENT


@pytest.mark.parametrize("which", ["model", "data"])
def test_save_with_a_read_only_fd_saves_nothing(which, files):
    case = case_of("float32")
    modes = {"model_mode": os.O_RDWR, "data_mode": os.O_RDWR, f"{which}_mode": os.O_RDONLY}
    prepared = save(Device("numpy"), build_model(case), files.handles(**modes))
    assert outputs(prepared, case)
    status, restored = restore(Device("numpy"), files.handles(**modes))
    assert status in FAILED and restored is None


@pytest.mark.parametrize("which", ["model", "data"])
def test_retrieve_with_a_write_only_fd_is_general_failure(which, files):
    save(Device("numpy"), build_model(case_of("float32")), files.handles())
    modes = {"model_mode": os.O_RDWR, "data_mode": os.O_RDWR, f"{which}_mode": os.O_WRONLY}
    assert restore(Device("numpy"), files.handles(**modes)) == (ErrorStatus.GENERAL_FAILURE, None)


# ---- the security-sensitive cache ----------------------------------------------------------------
def chain_model(op: Op, length: int = 100) -> Model:
    """x → op(·, 1.5) `length` times: VTS's large test model."""
    f32 = lambda life, consumers, loc=DataLocation(): Operand(T.TENSOR_FLOAT32, [4], consumers, 0.0, 0, life, loc)
    values = np.array([1.5] * 4, np.float32).tobytes() + np.zeros(1, np.int32).tobytes()
    operands = [f32(L.SUBGRAPH_INPUT, 1), f32(L.CONSTANT_COPY, length, DataLocation(0, 0, 16)),
                Operand(T.INT32, [], length, 0.0, 0, L.CONSTANT_COPY, DataLocation(0, 16, 4))]
    ops = []
    for k in range(length):
        last = k == length - 1
        operands.append(f32(L.SUBGRAPH_OUTPUT if last else L.TEMPORARY_VARIABLE, 0 if last else 1))
        ops.append(Operation(op, [0 if k == 0 else len(operands) - 2, 1, 2], [len(operands) - 1]))
    return Model(operands, ops, [0], [len(operands) - 1], values)


def chain_result(prepared) -> np.ndarray:
    x = np.array([1, 2, 3, 4], np.float32)
    inp, out = allocate_shared(16), allocate_shared(16)
    inp.map()[:] = x.tobytes()
    request = Request([RequestArgument(False, DataLocation(0, 0, 16), [4])],
                      [RequestArgument(False, DataLocation(1, 0, 16), [4])], [inp, out])
    assert prepared.executeSynchronously(request, MeasureTiming.NO)[0] == ErrorStatus.NONE
    return out.array(np.float32, 0, 4)


def _copy_file(src: Path, dst: Path) -> None:
    """copyCacheFiles: rewrite dst in place with src's content."""
    data = src.read_bytes()
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


@pytest.fixture
def mul_and_add(tmp_path, files):
    """modelMul saved under token 0 in its own model cache; the token for modelAdd is token 1."""
    mul_files = Files(tmp_path, "mul")
    save(Device("numpy"), chain_model(Op.MUL), files.handles(model=[[mul_files.model[0]]]), bytes(32))
    yield mul_files.model[0], bytes([1] + [0] * 31)
    mul_files.close()


def test_replaced_security_sensitive_cache(files, mul_and_add):
    mul_cache, add_token = mul_and_add
    save(Device("numpy"), chain_model(Op.ADD), files.handles(), add_token)
    _copy_file(mul_cache, files.model[0])
    assert restore(Device("numpy"), files.handles(), add_token) == (ErrorStatus.GENERAL_FAILURE, None)


@pytest.mark.parametrize("during", ["save", "retrieve"])
def test_toctou(during, files, mul_and_add):
    mul_cache, add_token = mul_and_add
    expected = np.array([1, 2, 3, 4], np.float32) + np.float32(150.0)
    for _ in range(20):
        copier = threading.Thread(target=_copy_file, args=(mul_cache, files.model[0]))
        if during == "save":
            copier.start()
        save(Device("numpy"), chain_model(Op.ADD), files.handles(), add_token)
        if during == "retrieve":
            copier.start()
        status, prepared = restore(Device("numpy"), files.handles(), add_token)
        copier.join()
        if status == ErrorStatus.NONE:  # either fails or is modelAdd, never modelMul
            np.testing.assert_allclose(chain_result(prepared), expected, rtol=1e-6)


def _flip_bit(path: Path, rng: random.Random) -> None:
    data = bytearray(path.read_bytes())
    data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))


def _append(path: Path, rng: random.Random) -> None:
    with open(path, "ab") as f:
        f.write(bytes(rng.randrange(256) for _ in range(rng.randint(1, 256))))


def _truncate(path: Path, rng: random.Random) -> None:
    os.truncate(path, rng.randrange(path.stat().st_size))


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("change", [_flip_bit, _append, _truncate], ids=["flip", "append", "truncate"])
@pytest.mark.parametrize("which", ["model", "data"])
def test_corrupted_cache_fails(which, change, seed, files):
    save(Device("numpy"), build_model(case_of("quant8" if seed % 2 else "float32")), files.handles())
    change(getattr(files, which)[0], random.Random(seed))
    assert restore(Device("numpy"), files.handles()) == (ErrorStatus.GENERAL_FAILURE, None)


@pytest.mark.parametrize("seed", range(10))
def test_wrong_token(seed, files):
    rng = random.Random(seed)
    token = bytearray(range(32))
    save(Device("numpy"), build_model(case_of("float32")), files.handles(), bytes(token))
    token[rng.randrange(32)] ^= 1 << rng.randrange(8)
    assert restore(Device("numpy"), files.handles(), bytes(token)) == (ErrorStatus.GENERAL_FAILURE, None)


def test_another_identity_or_key_fails(files, tmp_path, monkeypatch):
    save(Device("numpy"), build_model(case_of("float32")), files.handles())
    assert restore(Device("numpy", fusion=False), files.handles()) == (ErrorStatus.GENERAL_FAILURE, None)
    if device_backends():
        assert restore(Device(device_backends()[0]), files.handles()) == (ErrorStatus.GENERAL_FAILURE, None)
    monkeypatch.setenv("NNGPU_CACHE_DIR", str(tmp_path / "another driver"))   # another key
    assert restore(Device("numpy"), files.handles()) == (ErrorStatus.GENERAL_FAILURE, None)


def test_a_cache_of_another_kind_fails(files):
    save(Device("numpy"), build_model(case_of("float32")), files.handles())
    swapped = files.handles(model=[[files.data[0]]], data=[[files.model[0]]])
    assert restore(Device("numpy"), swapped) == (ErrorStatus.GENERAL_FAILURE, None)


def test_a_data_cache_of_another_model_fails(tmp_path, files):
    save(Device("numpy"), build_model(case_of("float32")), files.handles())
    other = Files(tmp_path, "other")
    save(Device("numpy"), build_model(case_of("quant8")), other.handles())
    mixed = files.handles(data=[[other.data[0]]])
    assert restore(Device("numpy"), mixed) == (ErrorStatus.GENERAL_FAILURE, None)
    other.close()


# ---- deadlines, resources ------------------------------------------------------------------------
def test_deadlines(files):
    save(Device("numpy"), build_model(case_of("float32")), files.handles())
    status, _ = restore(Device("numpy"), files.handles(), deadline=OptionalTimePoint(time.monotonic_ns()))
    assert status == ErrorStatus.MISSED_DEADLINE_PERSISTENT
    status, _ = restore(Device("numpy"), files.handles(), deadline=OptionalTimePoint(-1))
    assert status == ErrorStatus.INVALID_ARGUMENT
    status, _ = restore(Device("numpy"), files.handles(), deadline=OptionalTimePoint(time.monotonic_ns() + 10**11))
    assert status == ErrorStatus.NONE


def test_no_fd_is_kept(files):
    device, model = Device("numpy"), build_model(case_of("float32"))
    save(device, model, files.handles())
    restore(device, files.handles())
    files.close()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        save(device, model, files.handles())
        restore(device, files.handles())
        files.close()
    assert len(os.listdir("/proc/self/fd")) <= before


_RESTORE = """
import os, sys
from nngpu.driver.device import Device
from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.hal.types import NativeHandle
from nngpu.json_models import load_file, build_request
from nngpu.hal.types import MeasureTiming
backend, model_path, data_path, case_path = sys.argv[1:]
cb = PreparedModelCallback()
handles = [[NativeHandle([os.open(p, os.O_RDWR)])] for p in (model_path, data_path)]
Device(backend).prepareModelFromCache(*handles, bytes(range(32)), cb)
status, prepared = cb.get(120)
assert status == 0, status
programs = getattr(prepared.executor, "programs", None)
ex = build_request(load_file(case_path)[0])
assert prepared.executeSynchronously(ex.request, MeasureTiming.NO)[0] == 0
sys.stdout.buffer.write(bytes([programs.built if programs else 0]) + bytes(ex.output_pool.map()))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_restored_in_a_fresh_process_without_compiling(backend, files, tmp_path):
    """A fresh process, the kernel cache emptied (`nngpu cache clear`): the restored model's
    kernels come from the model cache alone, and its outputs are the saved model's."""
    case_path = CORPUS / CASES["per_channel"][0]
    case = load_file(case_path)[0]
    reference = save(Device(backend), build_model(case), files.handles())
    for binary in (tmp_path / "kernels").glob("*.bin"):
        binary.unlink()
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    run = subprocess.run([sys.executable, "-c", _RESTORE, backend, str(files.model[0]), str(files.data[0]),
                          str(case_path)], capture_output=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert run.stdout[0] == 0, f"{run.stdout[0]} programs compiled"
    assert run.stdout[1:] == outputs(reference, case)
