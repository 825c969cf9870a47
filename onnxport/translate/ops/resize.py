"""Interpolation: upsample_nearest / nearest-exact / linear / bilinear / trilinear / bicubic, the
``.vec`` overloads (``output_size`` or ``scale_factors``) and the ``.default`` ones (size plus
optional per-axis scales), i.e. torch.nn.functional.interpolate.

Semantics (PyTorch's source-index rules, ``aten/src/ATen/native/UpSample.h``) on ONNX Resize:

* nearest: ``src = floor(dst * s)`` with ``s = 1 / scale_factor`` when a scale is given, else
  ``in / out``: Resize ``coordinate_transformation_mode="asymmetric"``, ``nearest_mode="floor"``.
* nearest-exact: ``src = floor((dst + 0.5) * s)``: ``"half_pixel"`` + ``"round_prefer_ceil"``.
* Both compute ``s`` and the product in float32; Resize divides by the scale instead, which picks
  another source index at some positions unless the scale factor is an integer. An output size
  that is a whole multiple ``k`` of the input's (as traced) is scale factor ``k`` (``_whole_factors``).
  Other sizes and factors use PyTorch's arithmetic itself (index computation + Gather).
* linear / bilinear / trilinear / bicubic, ``align_corners=False``:
  ``src = (dst + 0.5) * s - 0.5`` (negative clamped to 0 for linear): ``"half_pixel"``;
  ``align_corners=True``: ``src = dst * (in - 1) / (out - 1)``: ``"align_corners"``.
  Bicubic uses PyTorch's ``A = -0.75`` (``cubic_coeff_a``).
* ``antialias=True`` (bilinear, bicubic): Resize ``antialias=1`` with ``exclude_outside=1``,
  bicubic with ``A = -0.5``; with ``align_corners=True`` no ONNX form matches (refused).
  onnxruntime's antialiased Resize differs from PyTorch on an axis whose output size is 1.

Scales, when PyTorch has them, go to Resize as ``scales`` (the output size is then
``floor(in * scale)`` in both); otherwise the output size goes as ``sizes``.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import sympy
import torch

from onnxport.errors import TranslationError, UnsupportedOpError
from onnxport.translate.registry import translates

aten = torch.ops.aten

_MODES = {
    # PyTorch mode -> (ONNX mode, extra attributes for align_corners False, for True)
    "nearest": ("nearest", dict(coordinate_transformation_mode="asymmetric", nearest_mode="floor"), None),
    "nearest-exact": ("nearest", dict(coordinate_transformation_mode="half_pixel",
                                      nearest_mode="round_prefer_ceil"), None),
    "linear": ("linear", dict(coordinate_transformation_mode="half_pixel"),
               dict(coordinate_transformation_mode="align_corners")),
    "cubic": ("cubic", dict(coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.75),
              dict(coordinate_transformation_mode="align_corners", cubic_coeff_a=-0.75)),
    # antialias=True: the kernel widened by the downscale factor, its weights renormalized over the
    # samples inside the input (ONNX Resize antialias + exclude_outside, opset 18); PyTorch's
    # antialiased bicubic uses A = -0.5. No ONNX form matches it with align_corners=True.
    "linear-aa": ("linear", dict(coordinate_transformation_mode="half_pixel", antialias=1, exclude_outside=1), None),
    "cubic-aa": ("cubic", dict(coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.5, antialias=1,
                               exclude_outside=1), None),
}


def resize(ctx, x: ir.Value, mode: str, spatial: int, output_size=None, scales=None,
           align_corners: bool | None = None) -> ir.Value:
    """ONNX Resize of the last ``spatial`` axes of ``x[N, C, *S]``.

    Args:
        mode: "nearest", "nearest-exact", "linear" (also bilinear/trilinear) or "cubic".
        output_size: ints or SymInt values per spatial axis, or None.
        scales: floats per spatial axis (PyTorch's scale factors), or None / Nones.
        align_corners: for linear and cubic modes.

    Raises TranslationError when neither sizes nor complete scales are known.
    """
    onnx_mode, plain, aligned = _MODES[mode]
    if align_corners and aligned is None and mode.endswith("-aa"):
        raise UnsupportedOpError("antialiased interpolation with align_corners=True",
                                 hint="ONNX Resize's antialias has no align_corners form: use align_corners=False "
                                      "or antialias=False")
    attrs = dict(aligned if align_corners and aligned is not None else plain)
    rank = ctx.rank(x)
    if scales is not None and not isinstance(scales, (list, tuple)):
        scales = [scales] * spatial
    if output_size is not None and scales is not None and all(s is not None for s in scales):
        # PyTorch takes the size from output_size and the coordinates from the scales; Resize takes
        # one of them: the scales, refused when they give another static size
        sizes = list(x.shape)[rank - spatial:] if x.shape is not None else []
        outs = [output_size] * spatial if isinstance(output_size, int) else list(output_size)
        if any(isinstance(i, int) and isinstance(o, int) and int(i * s) != o for i, o, s in zip(sizes, outs, scales)):
            raise TranslationError(f"interpolation to size {outs} with scale factors {list(scales)} that give "
                                   "another size", hint="pass either the size or the scale factors")
    if output_size is not None and not align_corners and not mode.endswith("-aa") and \
            (scales is None or any(s is None for s in scales)):
        scales = _whole_factors(ctx, spatial) or scales
    if onnx_mode == "nearest" and not _resize_matches_nearest(scales, spatial):
        return nearest_by_gather(ctx, x, spatial, output_size, scales, exact=mode == "nearest-exact")
    if scales is not None and all(s is not None for s in scales) and len(scales) == spatial:
        if not all(isinstance(s, (int, float)) for s in scales):
            raise TranslationError(f"interpolation scale factors {list(scales)} are not constants",
                                   hint="pass constant scale factors, or an output size")
        scales_v = ctx.const(np.array([1.0] * (rank - spatial) + [float(s) for s in scales], dtype=np.float32))
        return ctx.op.Resize(x, None, scales_v, mode=onnx_mode, **attrs)
    if output_size is None:
        raise TranslationError("interpolation without an output size or scale factors",
                               hint="pass size= or scale_factor= to torch.nn.functional.interpolate")
    if isinstance(output_size, int):
        output_size = [output_size] * spatial
    if len(output_size) != spatial:
        raise TranslationError(f"interpolation output size {list(output_size)} for {spatial} spatial axes")
    lead = ctx.op.Shape(x, start=0, end=rank - spatial)
    sizes = ctx.op.Concat(lead, ctx.shape_list(list(output_size)), axis=0)
    return ctx.op.Resize(x, None, None, sizes, mode=onnx_mode, **attrs)


def _whole_factors(ctx, spatial: int) -> list[int] | None:
    """The scale factors of an interpolation given by its output size, where each spatial output size
    is a whole multiple ``k`` of the input's (as traced: ``2 * h`` from ``h``, a decoder resizing to
    its skip's size), else None. PyTorch's scale ``float32(in) / float32(out)`` is then
    ``float32(1 / k)`` (exact division of sizes below 2**24, correctly rounded) as for
    ``scale_factor=k``, and ``floor(in * k)`` is the output size: Resize takes the constant scales,
    no size computed at run time."""
    node = ctx.current_node
    out = ctx.meta_val
    src = node.args[0].meta.get("val") if node is not None and node.args and hasattr(node.args[0], "meta") else None
    if not isinstance(out, torch.Tensor) or not isinstance(src, torch.Tensor) or src.dim() != out.dim():
        return None
    factors = []
    for i, o in zip(list(src.shape)[-spatial:], list(out.shape)[-spatial:]):
        i_expr = getattr(getattr(i, "node", None), "expr", i)
        o_expr = getattr(getattr(o, "node", None), "expr", o)
        if isinstance(i, int) and i == 0:
            return None
        k = sympy.sympify(o_expr) / sympy.sympify(i_expr)  # 2*s / s is 2 as built
        if not k.is_Integer:  # (2*s + 2) / (s + 1): common factors cancelled, no full simplify on each resize
            k = sympy.cancel(k)
        if not (k.is_Integer and 1 <= int(k) <= 2**10):
            return None
        factors.append(int(k))
    return factors


def _resize_matches_nearest(scales, spatial: int) -> bool:
    """Whether Resize's ``dst / scale`` picks the same source index as PyTorch's float32
    ``floor(dst * float32(1 / scale))``: for integer scale factors whose float32 inverse is not
    below the exact one. Sizes (scale ``in / out``) and other factors can differ by one index."""
    if scales is None or len(scales) != spatial or any(s is None for s in scales):
        return False
    for sf in scales:
        if not isinstance(sf, (int, float)) or sf <= 0 or float(sf) != int(sf):
            return False
        if float(np.float32(1.0 / sf)) < 1.0 / sf:
            return False
    return True


def nearest_by_gather(ctx, x: ir.Value, spatial: int, output_size, scales, exact: bool) -> ir.Value:
    """Nearest interpolation with PyTorch's own arithmetic: per spatial axis, source index
    ``min(floor(float32(dst [+ 0.5]) * s), in - 1)`` with ``s = float32(1 / scale)`` or
    ``float32(in) / out``, then Gather."""
    rank = ctx.rank(x)
    f32, i64 = ir.DataType.FLOAT, ir.DataType.INT64
    have_scales = scales is not None and len(scales) == spatial and all(s is not None for s in scales)
    if not have_scales and output_size is None:
        raise TranslationError("interpolation without an output size or scale factors",
                               hint="pass size= or scale_factor= to torch.nn.functional.interpolate")
    if isinstance(output_size, int):
        output_size = [output_size] * spatial
    y = x
    for i in range(spatial):
        axis = rank - spatial + i
        length = ctx.dim(x, axis)
        if have_scales:
            step = ctx.const(np.array(1.0 / float(scales[i]), dtype=np.float32))
            if output_size is not None:
                out = output_size[i]
            else:  # floor(in * scale) in double, as PyTorch sizes the output
                out = ctx.op.Cast(ctx.op.Floor(ctx.op.Mul(ctx.op.Cast(length, to=ir.DataType.DOUBLE),
                                                          ctx.const(np.array(float(scales[i]))))), to=i64)
        else:
            out = output_size[i]
            out_v = out if isinstance(out, ir.Value) else ctx.const(np.array(out, dtype=np.int64))
            step = ctx.op.Div(ctx.op.Cast(length, to=f32), ctx.op.Cast(out_v, to=f32))
        out_v = out if isinstance(out, ir.Value) else ctx.const(np.array(out, dtype=np.int64))
        dst = ctx.op.Cast(ctx.op.Range(ctx.const(np.array(0, dtype=np.int64)), out_v,
                                       ctx.const(np.array(1, dtype=np.int64))), to=f32)
        if exact:
            dst = ctx.op.Add(dst, ctx.const(np.array(0.5, dtype=np.float32)))
        src = ctx.op.Cast(ctx.op.Floor(ctx.op.Mul(dst, step)), to=i64)
        src = ctx.op.Min(src, ctx.op.Sub(length, ctx.const(np.array(1, dtype=np.int64))))
        y = ctx.op.Gather(y, src, axis=axis)
    return y


def _vec(mode: str, spatial: int, with_align: bool):
    if with_align:
        def fn(ctx, x, output_size, align_corners, scale_factors):
            return resize(ctx, x, mode, spatial, output_size, scale_factors, align_corners)
    else:
        def fn(ctx, x, output_size, scale_factors):
            return resize(ctx, x, mode, spatial, output_size, scale_factors)
    params = ("input, output_size?, align_corners, scale_factors?" if with_align
              else "input, output_size?, scale_factors?")
    fn.__doc__ = f"aten::upsample_* .vec({params}) in {mode} mode."
    fn.__name__ = f"upsample_{mode.replace('-', '_')}{spatial}d_vec"
    return fn


def _default(mode: str, spatial: int, with_align: bool):
    if with_align:
        def fn(ctx, x, output_size, align_corners, *scales):
            return resize(ctx, x, mode, spatial, output_size, _scales(scales, spatial), align_corners)
    else:
        def fn(ctx, x, output_size, *scales):
            return resize(ctx, x, mode, spatial, output_size, _scales(scales, spatial))
    fn.__doc__ = (f"aten::upsample_* .default(input, output_size, {'align_corners, ' if with_align else ''}"
                  f"scales?...) in {mode} mode.")
    fn.__name__ = f"upsample_{mode.replace('-', '_')}{spatial}d"
    return fn


def _scales(scales, spatial: int):
    """Per-axis scales from ``.default`` overloads (``scales_h=None, scales_w=None``); None unless all set.

    The ATen scales are PyTorch's scale factors (output / input)."""
    scales = list(scales)[:spatial]
    return scales if len(scales) == spatial and all(s is not None for s in scales) else None


for _spatial, _name in ((1, "upsample_nearest1d"), (2, "upsample_nearest2d"), (3, "upsample_nearest3d")):
    translates(getattr(aten, _name).vec)(_vec("nearest", _spatial, False))
    translates(getattr(aten, _name).default)(_default("nearest", _spatial, False))
for _spatial, _name in ((1, "_upsample_nearest_exact1d"), (2, "_upsample_nearest_exact2d"),
                        (3, "_upsample_nearest_exact3d")):
    translates(getattr(aten, _name).vec)(_vec("nearest-exact", _spatial, False))
    translates(getattr(aten, _name).default)(_default("nearest-exact", _spatial, False))
for _spatial, _name in ((1, "upsample_linear1d"), (2, "upsample_bilinear2d"), (3, "upsample_trilinear3d")):
    translates(getattr(aten, _name).vec)(_vec("linear", _spatial, True))
    translates(getattr(aten, _name).default)(_default("linear", _spatial, True))
translates(aten.upsample_bicubic2d.vec)(_vec("cubic", 2, True))
translates(aten.upsample_bicubic2d.default)(_default("cubic", 2, True))
translates(aten._upsample_bilinear2d_aa.vec)(_vec("linear-aa", 2, True))
translates(aten._upsample_bilinear2d_aa.default)(_default("linear-aa", 2, True))
translates(aten._upsample_bicubic2d_aa.vec)(_vec("cubic-aa", 2, True))
translates(aten._upsample_bicubic2d_aa.default)(_default("cubic-aa", 2, True))
