"""`nngpu kernels MODEL`: write the generated kernels of a model and its fusion groups.

The plan's segments depend on the values its shapes depend on; the dump shows the segments for
one execution: the model's own example inputs for a corpus .json file, zeros otherwise."""
from __future__ import annotations

from .common import open_model, writable_dir
from .errors import CLIError


def add_parser(sub, common) -> None:
    g = sub.add_parser("kernels", parents=[common], help="write a model's generated kernels and fusion groups",
                       description=__doc__.split("\n\n")[0])
    g.add_argument("model", help="a .tflite or corpus-format .json model")
    g.add_argument("--out", default="nngpu-kernels", help="output folder (default nngpu-kernels)")
    g.add_argument("--target", default="opencl",
                   help="the kernel target: opencl (default; a GPU's schedule), opencl-cpu or cuda")
    g.add_argument("--no-fusion", action="store_true", help="one kernel per operation")
    g.add_argument("--relaxed", action="store_true",
                   help="the kernels of the model with relaxComputationFloat32toFloat16 set (on cuda and "
                        "opencl, a GPU's: float32 temporaries stored as float16)")
    g.set_defaults(func=run)


def _example(named) -> list:
    """The inputs to trace with: the case's own, else zeros (a 0 extent taken as 1)."""
    import numpy as np

    if named.example_inputs is not None:
        return named.example_inputs
    return [np.zeros([d or 1 for d in t.shape], t.dtype) for t in named.inputs]


def run(args) -> int:
    import numpy as np

    from ..backends import targets
    from ..runtime.interpreter import ExecutionError, GraphRunner
    from ..compiler.lower import trace_segments
    from ..compiler.pad_fold import fold_pads
    from ..compiler.steps import GemmStep, HostStep, KernelStep, TemplateStep, Transfer
    from ..modelutil import as_model_1_3, relaxed_model

    known = targets()
    if args.target not in known:
        raise CLIError(f"--target {args.target}: no such kernel target; choose from {', '.join(known)}", 2)
    target = known[args.target]
    named = open_model(args.model)
    out = writable_dir(args.out, "--out")
    model = relaxed_model(named.model) if args.relaxed else named.model
    runner = GraphRunner(fold_pads(as_model_1_3(model)))   # what a prepare compiles
    try:
        with np.errstate(all="ignore"):
            values = runner.trace(_example(named))
    except ExecutionError as e:
        raise CLIError(f"{args.model}: the reference cannot run the model on these inputs: {e}", 1) from e
    segments = trace_segments(runner, values, target, not args.no_fusion)
    ops = runner.model.main.operations
    lines, n = [], 0
    for seg in segments:
        if seg.start:
            lines.append(f"-- from operation {seg.start}: specialised at run time on what earlier results decide")
        for step in seg.steps:
            if isinstance(step, (KernelStep, TemplateStep)):
                names = " + ".join(f"{k}:{ops[k].type.name}" for k in step.ops)
                (out / f"{n:03d}_{step.name}{target.suffix}").write_text(step.source)
                kind = "kernel" if isinstance(step, KernelStep) else "library kernel"
                lines.append(f"step {n:3d} {kind} {step.name} ({step.size} threads): {names}")
            elif isinstance(step, GemmStep):
                names = " + ".join(f"{k}:{ops[k].type.name}" for k in step.ops)
                bt = (" B transposed" if step.b_transposed else "") + (f" ldb={step.ldb}" if step.ldb else "")
                bt += (" + residual" if step.residual else "") + (" A scaled" if step.scale_a else "")
                half_c, half_scale = step.half_storages(seg.tensors)
                bt += " float16 A and B" if step.half else " relaxed" if step.relaxed else ""
                bt += (" float16 C" if half_c else "") + (" + then" if step.then else "")
                # the unit the backend builds for it (the folded kernel's function included)
                source = target.gemm_source and target.gemm_source(step, half_c, half_scale)
                if source is not None:
                    (out / f"{n:03d}_gemm{target.suffix}").write_text(source)
                else:
                    bt += " (a library's call)"
                lines.append(f"step {n:3d} gemm m={step.m} n={step.n} k={step.k}{bt} (tensors {step.args}): {names}")
            elif isinstance(step, HostStep):
                lines.append(f"step {n:3d} host   {step.op}:{ops[step.op].type.name}")
            elif isinstance(step, Transfer):
                lines.append(f"step {n:3d} {'upload' if step.to_device else 'download'} operand {step.tensor}")
            n += 1
    device, host = sum(s.device_ops for s in segments), sum(s.host_ops for s in segments)
    kernels = sum(s.kernel_count for s in segments)
    lines.append(f"{device} operations in {kernels} device kernels, {host} on the host")
    if args.relaxed:
        half = set().union(*(s.known.half for s in segments))
        lines.append(f"relaxed: {len(half)} float32 temporaries stored as float16 on {args.target}")
    (out / "groups.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"written to {out}")
    return 0
