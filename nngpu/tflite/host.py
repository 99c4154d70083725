"""Run a host partition (operators nngpu's driver cannot run) on TFLite's own kernels, through
ai-edge-litert's interpreter, on a flatbuffer holding just those operators (submodel.cut)."""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from ..hal.types import ErrorStatus
from ..whole_model import ExecutionError
from .errors import TFLiteImportError
from .partition import Partition, PartitionPlan
from .submodel import cut

_UNRESOLVED = re.compile(r"unresolved custom op: ([^\s.]+)")


def _reason(e: Exception) -> str:
    """TFLite's message in one line, without the node number it appends."""
    text = " ".join(str(e).split()).split("Node number")[0].strip()
    return text or type(e).__name__


class HostOperatorError(TFLiteImportError):
    """A host partition TFLite cannot load: a custom operator it has no kernel for, or a model
    the interpreter refuses."""


def _interpreter(model: bytes):
    """A TFLite interpreter of `model` on TFLite's builtin kernels: no default XNNPACK delegate,
    whose arithmetic differs from the reference kernels' (and which logs to stderr)."""
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError as e:
        raise HostOperatorError("running operators nngpu's driver cannot run needs TFLite's interpreter: "
                                "pip install ai-edge-litert") from e
    return Interpreter(model_content=model,
                       experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)


class HostPartition:
    """One host partition, loaded into a TFLite interpreter once; `run` takes its input arrays
    (partition input order) and returns its outputs."""

    def __init__(self, plan: PartitionPlan, part: Partition):
        self.part = part
        graph = plan.graph
        self.names = names = ", ".join(f"#{i} {graph.operators[i].name}" for i in part.ops)
        kinds = list(dict.fromkeys(graph.operators[i].name for i in part.ops))
        self.label = "+".join(kinds) + " (TFLite)"  # the profiler's name for this partition's runs
        model, kept = cut(plan.data, graph, part.ops, part.inputs, part.outputs)
        try:
            self.it = _interpreter(model)
            self.it.allocate_tensors()
        except (RuntimeError, ValueError) as e:
            found = _UNRESOLVED.search(str(e))
            if found:
                custom = [i for i in part.ops if graph.operators[i].name == found.group(1)]
                where = f"#{custom[0]} " if custom else ""
                raise HostOperatorError(f"operator {where}{found.group(1)}: a custom operator with no NNAPI "
                                        f"counterpart and no host implementation") from e
            raise HostOperatorError(f"TFLite cannot load the host operators {names}: {_reason(e)}") from e
        self._in = [kept[t] for t in part.inputs]
        self._out = [kept[t] for t in part.outputs]
        details = {d["index"]: d for d in self.it.get_input_details()}
        self._shapes: list[tuple[int, ...]] = [tuple(int(n) for n in details[i]["shape"]) for i in self._in]
        self._dtypes = [np.dtype(details[i]["dtype"]) for i in self._in]

    def run(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The partition's outputs for these inputs; an int32 the driver computed for an int64
        tensor (narrowed indices) is widened back to the type TFLite's kernels read."""
        try:
            resized = False
            for k, (i, a) in enumerate(zip(self._in, arrays)):
                if self._shapes[k] != a.shape:
                    self.it.resize_tensor_input(i, list(a.shape))
                    self._shapes[k] = a.shape
                    resized = True
            if resized:
                self.it.allocate_tensors()
            for i, a, dtype in zip(self._in, arrays, self._dtypes):
                self.it.set_tensor(i, a if a.dtype == dtype else a.astype(dtype))
            self.it.invoke()
        except (RuntimeError, ValueError) as e:  # TFLite's kernels refused these values
            raise ExecutionError(f"the host operators {self.names} ({_reason(e)})", ErrorStatus.GENERAL_FAILURE) from e
        return [self.it.get_tensor(i) for i in self._out]
