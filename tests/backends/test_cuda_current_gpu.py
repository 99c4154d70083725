"""The rule that makes `cuda:N` right on any thread, held where no GPU runs it: every method of
CudaBackend that reaches CuPy (self.cp, cupy, cupyx, self.stream, a CuPy array's methods through
its buffers) is wrapped by `_on_device`, which makes the backend's GPU current around it. A new
method that forgets would allocate, launch or copy on whatever GPU the calling thread has current
(tests/backends/test_cuda_devices.py checks the behaviour on GPUs)."""
from __future__ import annotations

import ast
from pathlib import Path

import nngpu.backends.cuda as cuda

# methods that touch no CuPy state: pure answers, or attribute reads of a buffer
_PURE = {"is_sticky", "relaxed_precision", "cache_identity", "address", "free", "build"}


def _methods() -> dict[str, ast.FunctionDef]:
    tree = ast.parse(Path(cuda.__file__).read_text())
    backend = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "CudaBackend")
    return {f.name: f for f in backend.body if isinstance(f, ast.FunctionDef)}


def _reaches_cupy(fn: ast.FunctionDef) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
                and node.attr in ("cp", "stream"):
            return True
        if isinstance(node, ast.Name) and node.id in ("cupy", "cupyx"):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cupy"):
            return True
    return False


def _wrapped(fn: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "_on_device" for d in fn.decorator_list)


def test_every_method_that_reaches_cupy_runs_with_its_gpu_current():
    methods = _methods()
    reaching = {name for name, fn in methods.items() if name != "__init__" and _reaches_cupy(fn)}
    assert reaching and not {name for name in reaching if not _wrapped(methods[name])}
    # the rest touch no CuPy state: named here, so a method that changes must be looked at again
    assert {name for name, fn in methods.items() if name != "__init__" and not _wrapped(fn)} == _PURE


def test_the_rule_finds_a_method_that_forgets():
    source = "class CudaBackend:\n    def upload(self, buf, host):\n        buf.set(host, stream=self.stream)\n"
    fn = ast.parse(source).body[0].body[0]
    assert _reaches_cupy(fn) and not _wrapped(fn)
