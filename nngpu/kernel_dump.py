"""`nngpu kernels MODEL`: write the generated kernels of a model and its fusion groups."""
from __future__ import annotations

from pathlib import Path

from .compiler.interpreter import GraphRunner
from .modelutil import as_model_1_3
from .compiler.lower import HostStep, KernelStep, LibraryStep, lower


def _load(path: Path):
    if path.suffix == ".tflite":
        from .tflite import load_tflite

        return load_tflite(str(path)).model
    from .cts.loader import build_model, load_file

    return build_model(load_file(path)[0])


def dump_kernels(model_path: str, out_dir: str, dialect: str = "opencl", fuse: bool = True) -> int:
    model = as_model_1_3(_load(Path(model_path)))
    runner = GraphRunner(model)
    spec = lower(runner, dialect, fuse)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ops = model.main.operations
    lines = []
    if spec is None:
        lines.append("no device plan: the model runs on the host reference (shapes are not static)")
    else:
        ext = ".cl" if dialect == "opencl" else ".cu"
        for n, step in enumerate(spec.steps):
            if isinstance(step, KernelStep):
                names = " + ".join(f"{k}:{ops[k].type.name}" for k in step.ops)
                (out / f"{n:03d}_{step.name}{ext}").write_text(step.source)
                lines.append(f"step {n:3d} kernel {step.name} [{step.kind}] ({step.global_size} threads): {names}")
            elif isinstance(step, LibraryStep):
                lines.append(f"step {n:3d} {step.kind} m={step.m} n={step.n} k={step.k}: operands {step.args}")
            else:
                assert isinstance(step, HostStep)
                lines.append(f"step {n:3d} host   {step.op}:{ops[step.op].type.name}")
        device, host = spec.counts()
        lines.append(f"{device} operations in {len(spec.kernels)} device kernels, {host} on the host")
    (out / "groups.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"written to {out}")
    return 0
