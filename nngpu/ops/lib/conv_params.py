"""Convolution parameters (input positions per the spec) parsed once, and the model rules of the
convolution family: CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D and TRANSPOSE_CONV_2D."""
from __future__ import annotations

from dataclasses import dataclass

from ..registry import OpContext, OpError
from .conv_common import (
    PC,
    Padding,
    bool_arg,
    check_activation,
    check_explicit_pads,
    check_steps,
    int_arg,
    is_bool_at,
    quant_scale_rule,
    read_padding,
)


@dataclass
class ConvParams:
    pad: Padding
    stride_w: int
    stride_h: int
    activation: int
    nchw: bool
    dil_w: int = 1
    dil_h: int = 1
    groups: int = 1          # GROUPED_CONV_2D
    multiplier: int = 1      # DEPTHWISE_CONV_2D


def checked(p: ConvParams, transpose: bool = False) -> ConvParams:
    """Value rules that need no shapes, so validation can apply them to constant scalars."""
    check_steps(p.stride_h, p.stride_w, p.dil_h, p.dil_w)
    check_explicit_pads(p.pad, allow_negative_tail=transpose)
    return p


def conv_params(ctx: OpContext) -> ConvParams:
    explicit = not (ctx.num_inputs == 7 or is_bool_at(ctx, 7))
    pad, k = read_padding(ctx, 3, explicit)
    return checked(ConvParams(pad, int_arg(ctx, k), int_arg(ctx, k + 1), check_activation(int_arg(ctx, k + 2)),
                               bool_arg(ctx, k + 3), int_arg(ctx, k + 4, 1), int_arg(ctx, k + 5, 1)))


def depthwise_params(ctx: OpContext) -> ConvParams:
    explicit = not (ctx.num_inputs == 8 or is_bool_at(ctx, 8))
    pad, k = read_padding(ctx, 3, explicit)
    p = ConvParams(pad, int_arg(ctx, k), int_arg(ctx, k + 1), check_activation(int_arg(ctx, k + 3)),
                   bool_arg(ctx, k + 4), int_arg(ctx, k + 5, 1), int_arg(ctx, k + 6, 1))
    p.multiplier = int_arg(ctx, k + 2)
    if p.multiplier <= 0:
        raise OpError(f"depth multiplier must be positive, got {p.multiplier}")
    return checked(p)


def grouped_params(ctx: OpContext) -> ConvParams:
    pad, k = read_padding(ctx, 3, ctx.num_inputs != 9)
    p = ConvParams(pad, int_arg(ctx, k), int_arg(ctx, k + 1), check_activation(int_arg(ctx, k + 3)),
                   bool_arg(ctx, k + 4))
    p.groups = int_arg(ctx, k + 2)
    if p.groups <= 0:
        raise OpError(f"number of groups must be positive, got {p.groups}")
    return checked(p)


def transpose_params(ctx: OpContext) -> ConvParams:
    implicit = ctx.num_inputs == 9
    pad, k = read_padding(ctx, 4 if implicit else 3, not implicit)
    return checked(ConvParams(pad, int_arg(ctx, k), int_arg(ctx, k + 1), check_activation(int_arg(ctx, k + 2)),
                               bool_arg(ctx, k + 3)), transpose=True)


def scalars_known(ctx: OpContext, first: int) -> bool:
    return all(ctx.values[i] is not None or ctx.is_omitted(i) for i in range(first, ctx.num_inputs))


def make_validate(parse, channel_dim: int, scale_rule: bool):
    def validate(ctx: OpContext) -> None:
        f_op = ctx.in_operand(1)
        if f_op.type == PC:
            cq = f_op.extraParams.channelQuant if f_op.extraParams else None
            if cq is None or cq.channelDim != channel_dim:
                raise OpError(f"per-channel filter must use channelDim {channel_dim}")
            dims = f_op.dimensions
            if len(dims) == 4 and dims[channel_dim] and len(cq.scales) != dims[channel_dim]:
                raise OpError("per-channel scale count does not match the filter's channels")
        in_rank, f_rank = len(ctx.in_operand(0).dimensions), len(f_op.dimensions)
        if (in_rank and in_rank != 4) or (f_rank and f_rank != 4):
            raise OpError("input and filter must be 4-D")
        if channel_dim == 3 and f_rank == 4 and f_op.dimensions[0] not in (0, 1):
            raise OpError("depthwise filter must have first dimension 1")
        if scale_rule:
            quant_scale_rule(ctx)
        first = 4 if parse is transpose_params and ctx.num_inputs == 9 else 3
        if scalars_known(ctx, first):
            parse(ctx)
    return validate
