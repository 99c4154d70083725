"""The feature level 6 and 7 cases (AIDL_V2, AIDL_V3) on the ways a model reaches the driver
besides the in-process corpus run: restored from the compilation cache (every case on numpy,
a sample on each device backend), through a spawned `nngpu serve`, and, on a device backend,
in device kernels rather than on the host reference."""
from __future__ import annotations

import json
import subprocess
import sys
import zlib

import pytest

from nngpu.backends import device_backends
from nngpu.cts.runner import PATHS, run_case
from nngpu.cts.through_cache import ThroughCache
from nngpu.json_models import load_cases

from .test_corpus import BUNDLED_CORPUS
from .test_served import _env

VERSIONS = ("AIDL_V2", "AIDL_V3")
CASES = list(load_cases(BUNDLED_CORPUS, VERSIONS))
DEVICE_EVERY = 24
# one case of each spec file, the quantized and float16 forms among them
SERVED = ["batch_matmul_TwoBatchSize_quant8_signed", "pack_FLOAT32_binary_axis1_float16",
          "reshape_int32_all_tensors_as_inputs", "mirror_pad_tensorflow_summary_quant8_asymm_all_tensors_as_inputs",
          "reverse_dim3_axis1_int32", "rsqrt_quant8_125t_10_25h_0_all_inputs_as_internal"]


def _device_sample():
    for case in CASES:
        if zlib.crc32(case.name.encode()) % DEVICE_EVERY == 0:
            for backend in device_backends():
                yield pytest.param(case, backend, id=f"{backend}-{case.version}/{case.name}")


_devices: dict = {}


def _device(backend: str):
    from nngpu.driver.device import Device

    if backend not in _devices:
        _devices[backend] = Device(backend)
    return _devices[backend]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.version}/{c.name}" for c in CASES])
def test_restored_from_the_compilation_cache_on_numpy(case):
    records = run_case(ThroughCache(_device("numpy")), "numpy", case, ("sync",))
    assert [r.result for r in records] == ["passed"], records[0].detail


@pytest.mark.parametrize("case,backend", list(_device_sample()))
def test_on_a_device_backend_in_device_kernels_and_through_the_cache(case, backend):
    records = run_case(_device(backend), backend, case, PATHS)
    assert all(r.result == "passed" or (r.path == "fenced" and r.result == "skipped") for r in records), \
        [r.detail for r in records]
    device_ops, host_ops = records[0].placement
    assert host_ops == 0 and device_ops == len(case.main["operations"])
    cached = run_case(ThroughCache(_device(backend)), backend, case, ("sync",))
    assert cached[0].result == "passed", cached[0].detail


def test_through_the_service(tmp_path):
    out = tmp_path / "records.jsonl"
    done = subprocess.run([sys.executable, "-m", "nngpu", "cts", "-q", "--service", "--backend", "numpy", "--path",
                           "all", "--version", ",".join(VERSIONS), "-k", ",".join(SERVED), "--json", str(out),
                           str(BUNDLED_CORPUS)], capture_output=True, text=True, timeout=300, env=_env())
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["name"] for r in records} >= set(SERVED) and {r["path"] for r in records} == set(PATHS)
    assert all(r["result"] == "passed" for r in records), [r for r in records if r["result"] != "passed"]
