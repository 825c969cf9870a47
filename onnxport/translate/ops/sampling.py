"""Sampling grids: grid_sampler_2d / grid_sampler_3d (torch.nn.functional.grid_sample) and
affine_grid_generator (torch.nn.functional.affine_grid).

Semantics: torch.nn.functional.grid_sample on ONNX GridSample (opset 16; modes "linear" / "cubic"
and 5-D inputs from opset 20), whose grid's last axis holds (x, y[, z]) in [-1, 1] with the same
``align_corners`` meaning. torch.nn.functional.affine_grid as PyTorch computes it (base grid
times theta^T, with MatMul), its output size taken at run time: ``affine_grid_generator`` is
kept whole during capture so that dynamic sizes stay dynamic.
"""

from __future__ import annotations


import onnx_ir as ir
import torch

from onnxport.errors import UnsupportedOpError
from onnxport.capture.patches import Patch, SetKernel, register
from onnxport.capture.tracing import translating
from onnxport.translate.registry import translates

aten = torch.ops.aten
I64 = ir.DataType.INT64

_INTERPOLATION_16 = {0: "bilinear", 1: "nearest", 2: "bicubic"}  # GridSample's mode names, opset 16
_INTERPOLATION_20 = {0: "linear", 1: "nearest", 2: "cubic"}  # renamed in opset 20
_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


def _grid_sample(ctx, x, grid, mode: str, padding_mode: int, align_corners: bool):
    """ONNX GridSample of ``x[N, C, *S]`` at ``grid[N, *S_out, spatial]``."""
    return ctx.op.GridSample(x, ctx.cast(grid, x.dtype), mode=mode, padding_mode=_PADDING[int(padding_mode)],
                             align_corners=int(bool(align_corners)))


@translates(aten.grid_sampler_2d.default, aten.grid_sampler.default, opset=(None, 19))
def grid_sampler_2d(ctx, x, grid, interpolation_mode, padding_mode, align_corners):
    """grid_sampler_2d(Tensor input, Tensor grid, int interpolation_mode (0 bilinear, 1 nearest,
    2 bicubic), int padding_mode (0 zeros, 1 border, 2 reflection), bool align_corners): ONNX
    GridSample with opset 16's mode names (4-D inputs only)."""
    if ctx.rank(x) != 4:
        return grid_sampler_3d(ctx, x, grid, interpolation_mode, padding_mode, align_corners)
    return _grid_sample(ctx, x, grid, _INTERPOLATION_16[int(interpolation_mode)], padding_mode, align_corners)


@translates(aten.grid_sampler_2d.default, aten.grid_sampler.default, aten.grid_sampler_3d.default, opset=(20, None))
def grid_sampler_20(ctx, x, grid, interpolation_mode, padding_mode, align_corners):
    """grid_sampler_2d / grid_sampler_3d(Tensor input, Tensor grid, int interpolation_mode,
    int padding_mode, bool align_corners): ONNX GridSample of opset 20, which takes 4-D and 5-D
    inputs (bicubic is not defined in 3-d by PyTorch)."""
    return _grid_sample(ctx, x, grid, _INTERPOLATION_20[int(interpolation_mode)], padding_mode, align_corners)


@translates(aten.grid_sampler_3d.default, opset=(None, 19))
def grid_sampler_3d(ctx, x, grid, interpolation_mode, padding_mode, align_corners):
    """grid_sampler_3d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode,
    bool align_corners) below opset 20: refused, GridSample takes 4-D inputs only there."""
    raise UnsupportedOpError("grid_sample of a 5-D input below opset 20",
                             hint="export with opset=20 or newer (ONNX GridSample takes 5-D inputs from opset 20)")


def _linspace(ctx, n: ir.Value, align_corners: bool, dtype: ir.DataType) -> ir.Value:
    """PyTorch's base-grid coordinates along an axis of size ``n`` (0-d int64): ``align_corners``:
    -1 + 2 i / (n - 1) (0 when n is 1); else (2 i + 1) / n - 1."""
    i = ctx.cast(ctx.op.Range(ctx.scalar(0, I64), n, ctx.scalar(1, I64)), dtype)
    nf = ctx.cast(n, dtype)
    one, two = ctx.scalar(1, dtype), ctx.scalar(2, dtype)
    if align_corners:
        steps = ctx.op.Max(ctx.op.Sub(nf, one), one)
        v = ctx.op.Sub(ctx.op.Div(ctx.op.Mul(two, i), steps), one)
        return ctx.op.Where(ctx.op.Equal(n, ctx.scalar(1, I64)), ctx.scalar(0, dtype), v)
    return ctx.op.Sub(ctx.op.Div(ctx.op.Add(ctx.op.Mul(two, i), one), nf), one)


@translates(aten.affine_grid_generator.default)
def affine_grid_generator(ctx, theta, size, align_corners):
    """affine_grid_generator(Tensor theta, SymInt[] size, bool align_corners) -> grid
    ``[N, H, W, 2]`` (or ``[N, D, H, W, 3]``): the base grid (x, y[, z], 1) of every output
    position, PyTorch's coordinates (``linspace_from_neg_one``), times theta^T. ONNX AffineGrid
    gives another base coordinate for an axis of size 1 with ``align_corners=True``, so the grid
    is built here."""
    k = len(size) - 2
    dtype = theta.dtype
    sizes = [ctx.shape_list([d]) for d in size[2:]]  # 1-D [1] each
    full = ctx.op.Concat(*sizes, axis=0)
    coords = []
    for axis, d in enumerate(sizes):
        line = _linspace(ctx, ctx.op.Squeeze(d, ctx.const([0])), bool(align_corners), dtype)
        shape = [1] * k
        shape[axis] = -1
        coords.append(ctx.op.Expand(ctx.op.Reshape(line, ctx.const(shape)), full))
    ones = ctx.op.Expand(ctx.scalar(1, dtype), full)
    last = ctx.const([-1])
    base = ctx.op.Concat(*[ctx.op.Unsqueeze(c, last) for c in coords[::-1] + [ones]], axis=-1)  # [*S, k + 1]
    flat = ctx.op.Reshape(base, ctx.const([1, -1, k + 1]))
    grid = ctx.op.MatMul(flat, ctx.op.Transpose(theta, perm=[0, 2, 1]))  # [N, prod(S), k]
    out_shape = ctx.op.Concat(ctx.shape_list([size[0]]), full, ctx.const([k]), axis=0)
    return ctx.op.Reshape(grid, out_shape)


# --------------------------------------------------------------------------- capture
def _affine_grid_shape(theta, size, align_corners):
    return theta.new_empty((size[0], *size[2:], len(size) - 2))


KEEP_AFFINE_GRID = register(Patch(
    "affine_grid_generator kept whole", lambda: [SetKernel(aten.affine_grid_generator.default, _affine_grid_shape)],
    "aten.affine_grid_generator kept whole while torch.export traces: its Python decomposition builds the base "
    "grid with linspace over the output size, which pins dynamic sizes to the example's; the kernel used instead "
    "only gives the output shape. Eager execution does not use it (it is consulted only by torch's Python "
    "dispatcher)", when=translating, order=28))
