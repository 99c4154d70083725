"""Hand-written kernels (kernels/) that a dialect has for an operation, in place of the generated
one: what the compiler's builder offers device implementations as `OpNode.library`. A template
is specialised per use by #defines put before its text, so every size is a constant to the
device compiler, as in a generated kernel."""
from __future__ import annotations

from ..backends.base import kernel_template

# dialect → operation kind → template file
TEMPLATES: dict[str, dict[str, str]] = {
    "opencl": {"depthwise": "depthwise.cl"},
}


# dialects whose GEMM adds a bias and clamps in its epilogue (kernels/gemm.cl's EPILOGUE)
GEMM_EPILOGUE = frozenset({"opencl"})
# Multiply-adds from which a float convolution is a GEMM rather than a generated kernel, by
# dialect. OpenCL's GEMM kernels are explicit-vector micro-kernels, the generated convolution a
# scalar loop per output: on PoCL the face detector's 1x1 convolutions of about 2^20 run 2.5x
# faster as GEMMs, even with the launch their fused PAD+ADD+RELU then needs of its own; below
# 2^16 that launch costs more than it saves. cuBLAS is a call with an epilogue kernel after it.
GEMM_MIN_WORK = {"opencl": 1 << 16, "cuda": 1 << 21}


def has_template(dialect: str, kind: str) -> bool:
    return kind in TEMPLATES.get(dialect, {})


def specialise(dialect: str, kind: str, name: str, defines: dict[str, object]) -> str:
    """The template's text for one use: NAME and `defines` first."""
    lines = "".join(f"#define {key} {value}\n" for key, value in {"NAME": name, **defines}.items())
    return lines + kernel_template(TEMPLATES[dialect][kind])
