"""Run a model with the real Plan on the host CUDA backend, and the kernel counts the tests report."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from nngpu.runtime.interpreter import GraphRunner
from nngpu.compiler.lower import device_plan
from nngpu.modelutil import as_model_1_3

from .host_backend import HostCudaBackend

PROPERTY = "cuda_host_kernels"   # the user property the terminal summary adds up


@dataclass
class HostRun:
    outputs: list[np.ndarray]
    backend: HostCudaBackend

    @property
    def kernels(self) -> list[str]:
        """The distinct kernels this run launched (as kernel_ids)."""
        return kernel_ids(self.backend.launched)

    @property
    def idle(self) -> list[str]:
        """Kernels compiled but never launched: 0 elements (the CUDA backend skips those too)."""
        return kernel_ids(b for b in self.backend.compiled if b not in self.backend.launched)


def run_on_host_cuda(model, inputs: Sequence[np.ndarray | None], backend: HostCudaBackend | None = None) -> HostRun:
    """The model's outputs (host arrays) from a Plan on `backend` (default: a fresh one; pass
    one to read what it refused when this raises HostUnsupported)."""
    backend = backend or HostCudaBackend()
    plan = device_plan(GraphRunner(as_model_1_3(model)), backend)
    with np.errstate(all="ignore"):  # host steps compute what the reference computes
        outputs = plan.execute(list(inputs))
    return HostRun([np.asarray(o) for o in outputs], backend)


def kernel_ids(bodies: Iterable[str]) -> list[str]:
    """Short identities of kernel texts, to count distinct kernels across tests."""
    return [hashlib.sha256(b.encode()).hexdigest()[:20] for b in bodies]


def record(request, kernels: list[str], verdict: str, reason: str = "", idle: list[str] = ()) -> None:
    """Tell the terminal summary which kernels this test ran and how they came out:
    verdict is "matched", "mismatched" or "skipped" (with the reason); `idle`: not launched."""
    request.node.user_properties.append(
        (PROPERTY, {"kernels": kernels, "verdict": verdict, "reason": reason, "idle": list(idle)}))
