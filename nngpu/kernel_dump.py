"""`nngpu kernels MODEL`: write the generated kernels of a model and its fusion groups.

The plan's segments depend on the values its shapes depend on; the dump shows the segments
for one execution: the model's own example inputs for a corpus .json file, zeros otherwise."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .compiler.interpreter import GraphRunner
from .compiler.lower import GemmStep, HostStep, KernelStep, Transfer, trace_segments
from .modelutil import as_model_1_3
from .ops.dtypes import dtype_of, is_tensor


def _load(path: Path):
    """(model, example input values or None)."""
    if path.suffix == ".tflite":
        from .tflite import load_tflite

        return load_tflite(str(path)).model, None
    from .json_models import build_model, build_request, load_file

    case = load_file(path)[0]
    model = build_model(case)
    ex = build_request(case)
    inputs = []
    main = as_model_1_3(model).main
    for arg, idx in zip(ex.request.inputs, main.inputIndexes):
        operand = main.operands[idx]
        if arg.hasNoValue:
            inputs.append(None)
            continue
        raw = np.frombuffer(ex.input_pool.view(arg.location.offset, arg.location.length), dtype=dtype_of(operand.type))
        inputs.append(raw.reshape(operand.dimensions) if is_tensor(operand.type) else raw.reshape(()))
    return model, inputs


def _zeros(runner: GraphRunner) -> list[np.ndarray]:
    graph = runner.model.main
    return [np.zeros([d or 1 for d in graph.operands[i].dimensions], dtype=dtype_of(graph.operands[i].type))
            for i in graph.inputIndexes]


def dump_kernels(model_path: str, out_dir: str, dialect: str = "opencl", fuse: bool = True) -> int:
    model, inputs = _load(Path(model_path))
    runner = GraphRunner(as_model_1_3(model))
    with np.errstate(all="ignore"):
        values = runner.trace(inputs if inputs is not None else _zeros(runner))
    segments = trace_segments(runner, values, dialect, fuse)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ops = runner.model.main.operations
    ext = ".cl" if dialect == "opencl" else ".cu"
    lines, n = [], 0
    for seg in segments:
        if seg.start:
            lines.append(f"-- from operation {seg.start}: specialised at run time on what earlier results decide")
        for step in seg.steps:
            if isinstance(step, KernelStep):
                names = " + ".join(f"{k}:{ops[k].type.name}" for k in step.ops)
                (out / f"{n:03d}_{step.name}{ext}").write_text(step.source)
                lines.append(f"step {n:3d} kernel {step.name} ({step.size} threads): {names}")
            elif isinstance(step, GemmStep):
                lines.append(f"step {n:3d} gemm m={step.m} n={step.n} k={step.k}: tensors {step.args}")
            elif isinstance(step, HostStep):
                lines.append(f"step {n:3d} host   {step.op}:{ops[step.op].type.name}")
            elif isinstance(step, Transfer):
                lines.append(f"step {n:3d} {'upload' if step.to_device else 'download'} operand {step.tensor}")
            n += 1
    device, host = sum(s.device_ops for s in segments), sum(s.host_ops for s in segments)
    kernels = sum(len(s.kernels) for s in segments)
    lines.append(f"{device} operations in {kernels} device kernels, {host} on the host")
    (out / "groups.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"written to {out}")
    return 0
