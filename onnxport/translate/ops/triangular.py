"""Triangular solves: linalg_solve_triangular (torch.linalg.solve_triangular).

Semantics: torch.linalg.solve_triangular(A, B, *, upper, left=True, unitriangular=False)
(https://pytorch.org/docs/stable/generated/torch.linalg.solve_triangular.html): ``X`` with
``A X = B`` (``X A = B`` where ``left`` is False) for ``A [..., n, n]`` triangular (only its ``upper``
or lower triangle read; its diagonal taken as ones where ``unitriangular``), batch dims broadcast.

ONNX has no triangular solve. ``A^-1`` is built by doubling (``n`` static): the inverses of the
diagonal blocks of size ``b`` give those of size ``2b``, ``[[P, 0], [C, Q]]^-1 = [[P^-1, 0],
[-Q^-1 C P^-1, Q^-1]]``, starting from ``1 / A_ii`` (ones where unit); ``ceil(log2 n)`` steps of
two batched MatMuls, each block below a diagonal pair read by one Gather of constant positions.
On ordinary matrices its error is that of a triangular solve (within an order of eager's; a power
series would lose much more); an explicit inverse can overflow in float32 where substitution stays
finite (a badly scaled or exponentially ill-conditioned ``A``, entries of ``A^-1`` beyond 3e38).
An upper ``A`` is inverted as the lower ``J A J`` (``J`` reversing rows and columns); ``left=False``
solves the transposed system.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import UnsupportedOpError
from onnxport.translate.ops._common import promote
from onnxport.translate.ops.shape import INT64_MIN
from onnxport.translate.registry import translates

aten = torch.ops.aten


def _reversed(ctx, x: ir.Value) -> ir.Value:
    """``x`` with its last two axes reversed (``J x J``), as ``flip`` slices (its rank need not be known)."""
    return ctx.op.Slice(x, [-1, -1], [INT64_MIN, INT64_MIN], [-2, -1], [-1, -1])


def _transposed(ctx, x: ir.Value, rank: int) -> ir.Value:
    return ctx.op.Transpose(x, perm=[*range(rank - 2), rank - 1, rank - 2])


def lower_inverse(ctx, a: ir.Value, n: int, rank: int, unit: bool, dtype: ir.DataType) -> ir.Value:
    """``A^-1`` (``[..., n, n]``, ``a``'s dtype) of the lower triangular ``A`` whose lower triangle is
    ``a``'s (``rank`` dims of ``dtype``; its diagonal ones where ``unit``); the strictly upper triangle of ``a`` is
    not read."""
    size = 1 << max(n - 1, 0).bit_length()
    np_type = dtype.numpy()
    if size != n:  # blockdiag(A, I): its inverse is blockdiag(A^-1, I)
        pads = np.zeros(2 * rank, np.int64)
        pads[[rank - 2, rank - 1, 2 * rank - 2, 2 * rank - 1]] = [0, 0, size - n, size - n]
        a = ctx.op.Pad(a, pads)
        if not unit:
            eye = np.zeros((size, size), np_type)
            eye[range(n, size), range(n, size)] = 1
            a = ctx.op.Add(a, ctx.const(eye))
    flat = ctx.op.Reshape(a, [0] * (rank - 2) + [size * size])
    if unit:
        blocks = ctx.const(np.ones((size, 1, 1), np_type))
    else:
        diagonal = ctx.op.Gather(flat, np.arange(size, dtype=np.int64) * (size + 1), axis=-1)
        blocks = ctx.op.Unsqueeze(ctx.op.Reciprocal(diagonal), [-1, -2])
    b = 1
    while b < size:
        m = size // (2 * b)
        start = np.arange(m, dtype=np.int64)[:, None, None] * 2 * b
        step = np.arange(b, dtype=np.int64)
        positions = (start + b + step[:, None]) * size + start + step[None, :]  # [m, b, b]: below each pair's first
        lower = ctx.op.Gather(flat, positions, axis=-1)  # [..., m, b, b]
        halves = [ctx.op.Slice(blocks, [k], [size], [-3], [2]) for k in (0, 1)]
        corner = ctx.op.Neg(ctx.op.MatMul(ctx.op.MatMul(halves[1], lower), halves[0]))
        shape = ctx.op.Shape(corner)
        first, second = (ctx.op.Expand(h, shape) for h in halves)
        zeros = ctx.op.ConstantOfShape(shape, value=ir.tensor(np.zeros(1, np_type)))
        blocks = ctx.op.Concat(ctx.op.Concat(first, zeros, axis=-1), ctx.op.Concat(corner, second, axis=-1), axis=-2)
        b *= 2
    whole = ctx.op.Squeeze(blocks, [-3])
    if unit and size == 1:  # the constant [1, 1]: A's batch dims from A
        whole = ctx.op.Expand(whole, ctx.op.Shape(a))
    if size == n:
        return whole
    return ctx.op.Slice(whole, [0, 0], [n, n], [-2, -1])


@translates(aten.linalg_solve_triangular.default)
def linalg_solve_triangular(ctx, a, b, *, upper, left=True, unitriangular=False):
    """linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool left=True, bool unitriangular=False):
    ``A^-1 B`` (``B A^-1`` where not ``left``), ``A^-1`` by doubling inverted diagonal blocks.

    Raises:
        UnsupportedOpError: ``A``'s size ``n`` is not static (the doubling's steps and gathered
            positions are fixed by it).
    """
    a_val, b_val = (node.meta.get("val") for node in ctx.current_node.args[:2])
    a_rank, b_rank = a_val.dim(), b_val.dim()  # shapes as captured (also in bodies)
    # torch checked A square and matching B when tracing: a static one of these sizes is the size (a
    # traced size may be an expression torch did not reduce, P // (P // 64) of a length padded to 64)
    sizes = (a_val.shape[-1], a_val.shape[-2], b_val.shape[-2] if left else b_val.shape[-1])
    n = next((d for d in sizes if isinstance(d, int)), sizes[0])
    if not isinstance(n, int):
        raise UnsupportedOpError(f"torch.linalg.solve_triangular of a matrix whose size is dynamic ({n}): ONNX "
                                 "has no triangular solve, and its inverse is built for a size known when exporting",
                                 hint="keep the triangular matrix's size static (a fixed chunk or block size)")
    a, b = promote(ctx, a, b, to=ctx.out_dtype)  # torch gives A's dtype (a float64 B is cast down)
    if not left:  # X A = B  <=>  A^T X^T = B^T, A^T triangular the other way
        a, b, upper = _transposed(ctx, a, a_rank), _transposed(ctx, b, b_rank), not upper
    if upper:
        inverse = _reversed(ctx, lower_inverse(ctx, _reversed(ctx, a), n, a_rank, unitriangular, ctx.out_dtype))
    else:
        inverse = lower_inverse(ctx, a, n, a_rank, unitriangular, ctx.out_dtype)
    out = ctx.op.MatMul(inverse, b)  # both at least 2-D
    return _transposed(ctx, out, ctx.out_rank) if not left else out
