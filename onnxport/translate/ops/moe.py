"""Mixture-of-experts dispatch: grouped matrix multiplication, and the experts of transformers.

Semantics: ``torch._grouped_mm`` / ``torch.nn.functional.grouped_mm`` (PyTorch docs; shapes from
torch's meta kernel) and transformers' ``transformers::grouped_mm_fallback``
(``transformers/integrations/moe.py``), which transformers 5 runs for its experts while
torch.export traces (``grouped_mm_experts_forward``). In the experts' form, ``input[S, K]`` holds
the (token, expert) pairs sorted by expert, ``weight[E, K, N]`` one matrix per expert and
``offs[E]`` the cumulative row counts: row ``r`` is multiplied by ``weight[e]`` for the ``e`` with
``offs[e-1] <= r < offs[e]``. Rows past ``offs[-1]`` are zero (transformers' fallback;
``_grouped_mm`` leaves them unset).

The ONNX form is one ``Slice`` and one ``MatMul`` per expert and a ``Concat`` (the number of experts
is a static size): each row is multiplied by its expert's matrix only, as in eager PyTorch, and no
weight is copied at run time (``weight[e]`` of an initializer becomes its own initializer when the
model is optimized). Selecting a matrix per row at run time (``Gather`` of the weights, or an ONNX
``Loop`` over the experts) copies ``K * N`` weights per selected row or per expert on every run;
``benchmarks/moe_forms.py`` compares the forms (nodes, latency).

Capture: transformers' experts run their grouped implementation while torch.export traces, and
DBRX's experts loop over every expert (``onnxport/library/transformers/moe.py`` and ``dbrx.py``).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate.registry import translates

aten = torch.ops.aten
_I64 = ir.DataType.INT64
_HALF = {ir.DataType.BFLOAT16, ir.DataType.FLOAT16}


def _pieces(ctx, value: ir.Value, count: int) -> list[ir.Value]:
    """``value[count]`` split into ``count`` 1-D values of one element."""
    if count == 1:
        return [value]
    return list(ctx.op.Split(value, axis=0, num_outputs=count, _outputs=count))


def _groups(ctx, offs: ir.Value, count: int) -> tuple[list[ir.Value], list[ir.Value], ir.Value]:
    """Each group's start and end (int64[1] each) from ``offs``, and the end of the last one."""
    ends = ctx.cast(offs, _I64)
    starts = ctx.op.Concat(ctx.const([0]), ctx.op.Slice(ends, ctx.const([0]), ctx.const([-1])), axis=0)
    last = ctx.op.Slice(ends, ctx.const([-1]), ctx.const([count]))
    return _pieces(ctx, starts, count), _pieces(ctx, ends, count), last


def _zero_tail(ctx, y: ir.Value, axis: int, size: ir.Value, last: ir.Value) -> ir.Value:
    """2-D ``y`` padded with zeros along ``axis`` from ``last`` (int64[1]) to ``size`` (0-d int64)."""
    missing = ctx.op.Sub(ctx.op.Unsqueeze(size, ctx.const([0])), last)
    zeros = [ctx.const([0])] * 4
    zeros[2 + axis] = missing
    return ctx.op.Pad(y, ctx.op.Concat(*zeros, axis=0))


def _work(ctx, *values: ir.Value) -> list[ir.Value]:
    """``values`` in the type the products accumulate in: float32 for 16-bit floats (torch's CPU
    and grouped GEMM kernels accumulate them in float32 and round the result once), else their own."""
    return [ctx.cast(v, ir.DataType.FLOAT) if v.dtype in _HALF else v for v in values]


def _rounded(ctx, y: ir.Value) -> ir.Value:
    """The product ``y`` (in the accumulation type) in the result's type."""
    return ctx.op.Cast(y, to=ctx.out_dtype) if ctx.out_dtype in _HALF else y


def _experts(ctx, weight: ir.Value, count: int) -> list[ir.Value]:
    """``weight[g]`` for each group, in the accumulation type (``_work``)."""
    parts = [ctx.op.Gather(weight, ctx.const(np.array(g, dtype=np.int64)), axis=0) for g in range(count)]
    return [ctx.op.Cast(p, to=ir.DataType.FLOAT) for p in parts] if weight.dtype in _HALF else parts


def grouped_rows(ctx, x: ir.Value, weight: ir.Value, offs: ir.Value) -> ir.Value:
    """``x[S, K]`` with rows grouped by ``offs[E]`` times ``weight[E, K, N]`` -> ``[S, N]`` in the
    accumulation type (``_work``)."""
    experts = _static(weight.shape[0], "the number of groups (weight.shape[0])")
    starts, ends, last = _groups(ctx, offs, experts)
    axis0 = ctx.const([0])
    (x,) = _work(ctx, x)
    parts = [ctx.op.MatMul(ctx.op.Slice(x, s, e, axis0), w)
             for s, e, w in zip(starts, ends, _experts(ctx, weight, experts))]
    y = parts[0] if experts == 1 else ctx.op.Concat(*parts, axis=0)
    return _zero_tail(ctx, y, 0, ctx.dim(x, 0), last)


def _static(size, what: str) -> int:
    if not isinstance(size, int):
        raise TranslationError(f"grouped matrix multiplication with a dynamic {what}",
                               hint="the number of experts must be a static size")
    return size


@translates("transformers::grouped_mm_fallback.default")
def grouped_mm_fallback(ctx, input, weight, offs):
    """transformers::grouped_mm_fallback(Tensor input, Tensor weight, Tensor offs) -> Tensor.

    input: float[S, K] rows sorted by expert; weight: float[E, K, N]; offs: int32/int64[E]
    cumulative row counts. Returns float[S, N], zero past ``offs[-1]``."""
    return _rounded(ctx, grouped_rows(ctx, input, weight, offs))


@translates(aten._grouped_mm.default)
def grouped_mm(ctx, self, mat2, offs=None, bias=None, out_dtype=None):
    """_grouped_mm(Tensor self, Tensor mat2, Tensor? offs=None, Tensor? bias=None,
    ScalarType? out_dtype=None) -> Tensor, in its four layouts (offs int32[G] cumulative ends):

    - self[M, K] (rows grouped), mat2[G, K, N] -> [M, N] (the experts' form);
    - self[G, M, K], mat2[G, K, N] -> [G, M, N] (batched, no offs);
    - self[M, K], mat2[K, N] (K grouped) -> [G, M, N]: ``self[:, group] @ mat2[group, :]``;
    - self[G, M, K], mat2[K, N] (columns grouped) -> [M, N]: ``self[g] @ mat2[:, group]``.

    Rows or columns past ``offs[-1]`` are zero. torch traces it for bfloat16 operands only; the
    products accumulate in float32 and the result is rounded once, as its kernels do. Raises
    TranslationError for ``bias`` (which torch does not accept either) and for a dynamic number of
    groups."""
    if bias is not None:
        raise TranslationError("_grouped_mm with a bias", hint="add the bias after the grouped product")
    a2, b2 = ctx.rank(self) == 2, ctx.rank(mat2) == 2
    if not a2 and not b2:
        out = ctx.op.MatMul(*_work(ctx, self, mat2))
    elif a2 and not b2:
        out = grouped_rows(ctx, self, mat2, offs)
    elif a2:
        count = _static(offs.shape[0], "the number of groups (offs.shape[0])")
        starts, ends, _ = _groups(ctx, offs, count)
        self, mat2 = _work(ctx, self, mat2)
        axis0, axis1 = ctx.const([0]), ctx.const([1])
        parts = [ctx.op.Unsqueeze(ctx.op.MatMul(ctx.op.Slice(self, starts[g], ends[g], axis1),
                                                ctx.op.Slice(mat2, starts[g], ends[g], axis0)), axis0)
                 for g in range(count)]
        out = parts[0] if count == 1 else ctx.op.Concat(*parts, axis=0)
    else:
        count = _static(self.shape[0], "the number of groups (self.shape[0])")
        starts, ends, last = _groups(ctx, offs, count)
        (mat2,) = _work(ctx, mat2)
        axis1 = ctx.const([1])
        parts = [ctx.op.MatMul(a, ctx.op.Slice(mat2, s, e, axis1))
                 for s, e, a in zip(starts, ends, _experts(ctx, self, count))]
        y = parts[0] if count == 1 else ctx.op.Concat(*parts, axis=1)
        out = _zero_tail(ctx, y, 1, ctx.dim(mat2, 1), last)
    return _rounded(ctx, out)
