"""Hand-written kernels (kernels/) that a target has for an operation, in place of the generated
one: what the compiler's builder offers device implementations as `OpNode.library`. A template
is specialised per use by #defines put before its text, so every size is a constant to the
device compiler, as in a generated kernel. Which templates a target has is its own to say
(Target.templates, declared in its backend module)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..backends.base import kernel_template
from .target import Target

if TYPE_CHECKING:
    from .steps import TemplateStep


def has_template(target: Target, kind: str) -> bool:
    return kind in target.templates


def specialise(target: Target, kind: str, name: str, defines: dict[str, object]) -> str:
    """The template's text for one use: NAME and `defines` first."""
    lines = "".join(f"#define {key} {value}\n" for key, value in {"NAME": name, **defines}.items())
    return lines + kernel_template(target.templates[kind])


def folded_prefix(target: Target, step: "TemplateStep") -> str:
    """What a template step's source has before its own specialised text: the kernel folded into
    its stores (THEN, compiler/gemm_fold.py), empty where none is."""
    own = specialise(target, step.kind, step.name, step.defines)
    assert step.source.endswith(own)
    return step.source[:-len(own)]
