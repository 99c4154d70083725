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


def has_template(dialect: str, kind: str) -> bool:
    return kind in TEMPLATES.get(dialect, {})


def specialise(dialect: str, kind: str, name: str, defines: dict[str, object]) -> str:
    """The template's text for one use: NAME and `defines` first."""
    lines = "".join(f"#define {key} {value}\n" for key, value in {"NAME": name, **defines}.items())
    return lines + kernel_template(TEMPLATES[dialect][kind])
