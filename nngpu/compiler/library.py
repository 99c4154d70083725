"""Hand-written kernels (kernels/) that a target has for an operation, in place of the generated
one: what the compiler's builder offers device implementations as `OpNode.library`. A template
is specialised per use by #defines put before its text, so every size is a constant to the
device compiler, as in a generated kernel. Which templates a target has is its own to say
(Target.templates, declared in its backend module)."""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..backends.base import kernel_template
from .target import Target

if TYPE_CHECKING:
    from .steps import TemplateStep


# The #defines a template takes for the element type of each buffer it is given, in its arguments'
# order (its inputs, then its output): "float", or "half" for a float16 temporary
# (compiler/relaxed_storage.py; kernels/vectors.h's VLOAD_AS). None: float32 only (weights,
# tables). A kind not named here reads and writes float32 only.
ELEMENT_TYPES: dict[str, tuple[str | None, ...]] = {
    "depthwise": ("X_T", None, None, "OUT_T"),
    "conv": ("X_T", None, None, "OUT_T"),
    "im2col": ("X_T", "OUT_T"),
    "max_pool": ("X_T", "OUT_T"),
    "resize_bilinear": ("X_T", None, None, None, None, "OUT_T"),
}


def element_types(kind: str, storages: list[str]) -> dict[str, str]:
    """The type #defines of a use of template `kind` on buffers of these storages (its inputs',
    then its output's); ValueError where a float16 buffer is one the template reads as float32."""
    names = ELEMENT_TYPES.get(kind, (None,) * len(storages))
    assert len(names) == len(storages), (kind, storages)
    types = {}
    for name, storage in zip(names, storages):
        if name is not None:
            types[name] = storage
        elif storage == "half":
            raise ValueError(f"the {kind} kernel reads or writes float32 where this buffer is float16")
    return types


def output_type(kind: str) -> str | None:
    """The #define of the element type of the output of template `kind` (None: float32 only)."""
    return ELEMENT_TYPES.get(kind, (None,))[-1]


def has_template(target: Target, kind: str) -> bool:
    return kind in target.templates


def specialise(target: Target, kind: str, name: str, defines: dict[str, object]) -> str:
    """The template's text for one use: NAME and `defines` first."""
    lines = "".join(f"#define {key} {value}\n" for key, value in {"NAME": name, **defines}.items())
    return lines + kernel_template(target.templates[kind])


def respecialise(target: Target, step: "TemplateStep", defines: dict[str, object]) -> "TemplateStep":
    """The template step specialised by `defines` in place of its own, what is folded before its
    text kept."""
    return replace(step, source=folded_prefix(target, step) + specialise(target, step.kind, step.name, defines),
                   defines=defines)


def folded_prefix(target: Target, step: "TemplateStep") -> str:
    """What a template step's source has before its own specialised text: the kernel folded into
    its stores (THEN, compiler/gemm_fold.py), empty where none is."""
    own = specialise(target, step.kind, step.name, step.defines)
    assert step.source.endswith(own)
    return step.source[:-len(own)]
