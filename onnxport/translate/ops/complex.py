"""Complex tensors inside a model whose inputs and outputs are real.

ONNX has no complex arithmetic and onnxruntime runs few operators on complex types, so a complex
tensor ``[*shape]`` is carried as the real ONNX value ``[*shape, 2]`` (real, imaginary), PyTorch's
``view_as_real`` layout, wrapped in ``ComplexAsReal`` (``translate/complex_values.py``) so that no
ONNX value is typed complex.

Made here: ``view_as_complex``, ``complex``, ``polar``, a cast of a real tensor to a complex dtype,
and complex parameters, buffers and tensor constants (initializers of their real pairs).
Read here: ``view_as_real``, ``real``, ``imag``, ``abs``, ``angle``, conjugation, ``clone``, casts
between complex dtypes and ``to`` (Llama 4's rotary table moved to the inputs' device), ``slice``,
``unsqueeze``, ``squeeze``, ``view`` / ``reshape``, ``expand``, ``permute``, ``transpose``, ``sym_size``,
``constant_pad_nd`` and ``add`` / ``sub`` / ``mul`` with complex or real operands. The FFT family
(``fft.py``) and ``stft`` (``spectral.py``) make and read them too.
Any other reader of a complex value, or a model returning one, is a TranslationError raised at the
node that made it, naming the reader. Semantics: PyTorch's complex numbers
(https://pytorch.org/docs/stable/complex_numbers.html).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import TranslationError, UnsupportedOpError
from onnxport.translate import dtypes, registry, symbolic
from onnxport.translate.complex_values import COMPLEX_READERS, ComplexAsReal, check_readers
# the real-valued translations wrapped below are registered by these modules first
from onnxport.translate.ops import elementwise, indexing, misc, pad, shape, symints  # noqa: F401
from onnxport.translate.ops._common import axes_const, norm_axis
from onnxport.translate.registry import translates

aten = torch.ops.aten
COMPLEX_TO_REAL = {torch.complex64: torch.float32, torch.complex128: torch.float64, torch.complex32: torch.float16}


def _is_complex(val: Any) -> bool:
    return isinstance(val, torch.Tensor) and val.is_complex()


def as_complex(ctx, value: ir.Value, val: Any = None) -> ComplexAsReal:
    """``value`` (real ``[..., 2]``) as the complex result of the node being translated, typed
    from its FX value (``val`` for one output of several); its readers checked."""
    val = ctx.meta_val if val is None else val
    if isinstance(val, (tuple, list)):
        val = val[0]
    if _is_complex(val):
        value.type = ir.TensorType(dtypes.onnx_dtype(COMPLEX_TO_REAL[val.dtype]))
        value.shape = ir.Shape([ctx.dim_namer(symbolic.expr_of(d)) for d in val.shape] + [2])
    check_readers(ctx)
    return ComplexAsReal(value)


def real_dtype(ctx) -> ir.DataType:
    """ONNX element type of the real parts of the (complex) result being translated."""
    val = ctx.meta_val
    if isinstance(val, (tuple, list)):
        val = val[0]
    return dtypes.onnx_dtype(COMPLEX_TO_REAL.get(val.dtype, val.dtype))


def _dispatcher(fn: Callable, real: Callable | None, target: Any) -> Callable:
    """``fn`` on complex values (a ``ComplexAsReal`` argument or a complex result), ``real``
    otherwise."""

    def dispatch(ctx, *args, **kwargs):
        flat = list(args) + list(kwargs.values())
        if any(isinstance(a, ComplexAsReal) for a in flat) or _is_complex(ctx.meta_val):
            return fn(ctx, *args, **kwargs)
        if real is None:
            raise UnsupportedOpError(f"no ONNX translation for {target} on real tensors")
        return real(ctx, *args, **kwargs)

    dispatch.__name__ = dispatch.__qualname__ = f"{fn.__name__}_complex_aware"
    dispatch.__doc__ = fn.__doc__
    return dispatch


def complex_aware(*targets) -> Callable[[Callable], Callable]:
    """Register ``fn`` for ``targets`` on complex values: it runs when an argument is a
    ``ComplexAsReal`` or the result is complex; otherwise the translation registered before (the
    real-valued one) for the export's opset runs. One dispatcher per opset range of the real-valued
    translations, so the opset still chooses among them."""

    def deco(fn: Callable) -> Callable:
        for target in targets:
            earlier = registry.builtin_translations(target) or [registry.Translation(None)]
            for real in reversed(earlier):  # the oldest first: the registry keeps the latest first
                translates(target, opset=real.opsets)(_dispatcher(fn, real.fn, target))
            COMPLEX_READERS.add(target)
        return fn

    return deco


def part(ctx, z: ir.Value, index: int) -> ir.Value:
    """Real (0) or imaginary (1) part of the carried value ``z``."""
    return ctx.op.Gather(z, ctx.const(np.array(index, dtype=np.int64)), axis=-1)


def pair(ctx, re: ir.Value, im: ir.Value) -> ir.Value:
    """``[..., 2]`` from real and imaginary parts of one shape."""
    last = axes_const(ctx, [-1])
    return ctx.op.Concat(ctx.op.Unsqueeze(re, last), ctx.op.Unsqueeze(im, last), axis=-1)


def conjugate(ctx, z: ir.Value) -> ir.Value:
    """Complex conjugate of the carried value ``z`` (imaginary parts negated)."""
    dtype = z.dtype if z.dtype is not None else real_dtype(ctx)
    out = ctx.op.Mul(z, ctx.const(np.array([1, -1], dtype=dtype.numpy())))
    out.type = ir.TensorType(dtype)
    return out


# ------------------------------------------------------------------------------ makers
@translates(aten.view_as_complex.default)
def view_as_complex(ctx, x):
    """view_as_complex(Tensor(a) self) -> Tensor(a): ``[..., 2]`` real pairs as a complex tensor."""
    return as_complex(ctx, ctx.op.Identity(x))


def _broadcast_pair(ctx, re: ir.Value, im: ir.Value) -> ir.Value:
    shape = ctx.op.Shape(ctx.op.Add(re, im))
    return pair(ctx, ctx.op.Expand(re, shape), ctx.op.Expand(im, shape))


@translates(aten.complex.default)
def complex_(ctx, real, imag):
    """complex(Tensor real, Tensor imag) -> real + i imag, broadcast together."""
    to = real_dtype(ctx)
    return as_complex(ctx, _broadcast_pair(ctx, ctx.cast(real, to), ctx.cast(imag, to)))


@translates(aten.polar.default)
def polar(ctx, abs, angle):
    """polar(Tensor abs, Tensor angle) -> abs * (cos(angle) + i sin(angle))."""
    to = real_dtype(ctx)
    r, t = ctx.cast(abs, to), ctx.cast(angle, to)
    return as_complex(ctx, _broadcast_pair(ctx, ctx.op.Mul(r, ctx.op.Cos(t)), ctx.op.Mul(r, ctx.op.Sin(t))))


# ------------------------------------------------------------------------------ on real tensors
@translates(aten.real.default)
def real_of_real(ctx, x):
    """real(Tensor(a) self) of a real tensor: the tensor itself."""
    return x


@translates(aten.angle.default)
def angle_of_real(ctx, x):
    """angle(Tensor self) of a real tensor: pi where x < 0, else 0 (NaN stays NaN), in the
    result's float type."""
    to = ctx.out_dtype
    x = ctx.cast(x, to)
    out = ctx.op.Where(ctx.op.Less(x, ctx.scalar(0, to)), ctx.scalar(np.pi, to), ctx.scalar(0, to))
    return ctx.op.Where(ctx.op.IsNaN(x), x, out)


@translates(aten._conj.default, aten.conj_physical.default, aten._conj_physical.default, aten.conj.default,
            aten.resolve_conj.default, aten.resolve_neg.default)
def conj_of_real(ctx, x):
    """conj / conj_physical / resolve_conj / resolve_neg(Tensor self) of a real tensor: itself."""
    return x


# ------------------------------------------------------------------------------ readers
@complex_aware(aten.view_as_real.default)
def view_as_real(ctx, z):
    """view_as_real(Tensor(a) self) -> Tensor(a): the carried ``[..., 2]`` value itself."""
    return ctx.op.Identity(z.value)


@complex_aware(aten.real.default)
def real(ctx, z):
    """real(Tensor(a) self): the real parts."""
    return part(ctx, z.value, 0)


@complex_aware(aten.imag.default)
def imag(ctx, z):
    """imag(Tensor(a) self): the imaginary parts."""
    return part(ctx, z.value, 1)


@complex_aware(aten.abs.default)
def abs_(ctx, z):
    """abs(Tensor self) of a complex tensor: sqrt(re^2 + im^2), a real tensor."""
    v = z.value
    return ctx.op.Sqrt(ctx.op.ReduceSum(ctx.op.Mul(v, v), axes_const(ctx, [-1]), keepdims=0))


@complex_aware(aten.angle.default)
def angle(ctx, z):
    """angle(Tensor self) of a complex tensor: atan2(im, re), a real tensor."""
    return elementwise.atan2(ctx, part(ctx, z.value, 1), part(ctx, z.value, 0))


@complex_aware(aten._conj.default, aten.conj_physical.default, aten._conj_physical.default, aten.conj.default,
               aten.resolve_conj.default)
def conj(ctx, z):
    """_conj / conj_physical / conj(Tensor self): the complex conjugate (resolve_conj: a copy)."""
    if ctx.current_node.target is aten.resolve_conj.default:
        return as_complex(ctx, ctx.op.Identity(z.value))
    return as_complex(ctx, conjugate(ctx, z.value))


@complex_aware(aten.clone.default, aten.alias.default, aten.detach.default, aten.resolve_neg.default)
def clone(ctx, z, *args, **kwargs):
    """clone / alias / detach(Tensor self): the same carried value."""
    return as_complex(ctx, ctx.op.Identity(z.value))


@complex_aware(aten.sym_size.int)
def sym_size(ctx, z, dim):
    """sym_size.int(Tensor self, int dim) of a complex tensor: the carried value's size there (a
    decomposition reads the sizes of the spectrum it transforms)."""
    return symints.sym_size(ctx, z.value, norm_axis(dim, z.rank))


@complex_aware(aten._to_copy.default, aten.to.dtype, aten.to.dtype_layout, aten.to.device, aten.to.other)
def to_copy(ctx, z, *args, **kwargs):
    """_to_copy(Tensor self, *, dtype...) and the ``to`` overloads (dtype, dtype_layout, device,
    other; the result's dtype read from the node) to or from a complex dtype: a real tensor gets
    zero imaginary parts, a complex one changes precision (or stays: a move to a device); complex
    to real keeps the real parts (as PyTorch does, with a warning)."""
    if not isinstance(z, ComplexAsReal):
        x = ctx.cast(z, real_dtype(ctx))
        return as_complex(ctx, pair(ctx, x, ctx.op.Mul(x, ctx.scalar(0, x.dtype))))
    if _is_complex(ctx.meta_val):
        return as_complex(ctx, ctx.cast(z.value, real_dtype(ctx)))
    return ctx.cast(part(ctx, z.value, 0), ctx.out_dtype)


@complex_aware(aten.unsqueeze.default)
def unsqueeze(ctx, z, dim):
    """unsqueeze(Tensor self, int dim) of a complex tensor: the carried value's axis inserted there."""
    return as_complex(ctx, shape.unsqueeze(ctx, z.value, norm_axis(dim, z.rank + 1)))


@complex_aware(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims)
def squeeze(ctx, z, dim=None):
    """squeeze(self) / squeeze.dim / squeeze.dims of a complex tensor: the carried value's axes of
    size 1 among those listed (all of the complex tensor's when none is), never its pair axis."""
    dims = range(z.rank) if dim is None else [dim] if isinstance(dim, int) else dim
    return as_complex(ctx, shape.squeeze(ctx, z.value, [norm_axis(d, z.rank) for d in dims]))


@complex_aware(aten.view.default, aten.reshape.default, aten._unsafe_view.default)
def reshape(ctx, z, size):
    """view / reshape(Tensor self, SymInt[] size) of a complex tensor: the carried value reshaped to
    ``size + [2]``."""
    return as_complex(ctx, shape.reshape(ctx, z.value, list(size) + [2]))


@complex_aware(aten.expand.default)
def expand(ctx, z, size, implicit=False):
    """expand(Tensor self, SymInt[] size) of a complex tensor: the carried value expanded to ``size + [2]``."""
    return as_complex(ctx, shape.expand(ctx, z.value, list(size) + [2]))


@complex_aware(aten.permute.default)
def permute(ctx, z, dims):
    """permute(Tensor self, int[] dims) of a complex tensor: its axes permuted, the pair axis last."""
    return as_complex(ctx, shape.permute(ctx, z.value, [norm_axis(d, z.rank) for d in dims] + [z.rank]))


@complex_aware(aten.transpose.int)
def transpose(ctx, z, dim0, dim1):
    """transpose.int(Tensor self, int dim0, int dim1) of a complex tensor: two of its axes swapped."""
    return as_complex(ctx, shape.transpose(ctx, z.value, norm_axis(dim0, z.rank), norm_axis(dim1, z.rank)))


@complex_aware(aten.slice.Tensor)
def slice_(ctx, z, dim=0, start=None, end=None, step=1):
    """slice.Tensor of a complex tensor: the same slice of the carried value."""
    return as_complex(ctx, indexing.slice_(ctx, z.value, norm_axis(dim, z.rank), start, end, step))


@complex_aware(aten.constant_pad_nd.default, aten.pad.default)
def constant_pad(ctx, z, padding, *args, **kwargs):
    """constant_pad_nd(input, pad, value=0) / pad(input, pad, mode="constant", value=None) of a
    complex tensor with zeros: the carried value padded, its pair axis not; other modes
    and values are refused."""
    if ctx.current_node.target is aten.pad.default:
        mode = args[0] if args else kwargs.get("mode", "constant")
        value = args[1] if len(args) > 1 else kwargs.get("value")
    else:
        mode, value = "constant", args[0] if args else kwargs.get("value", 0)
    if mode != "constant" or value not in (0, 0.0, None):
        raise TranslationError(f"padding a complex tensor with mode={mode!r}, value={value!r}",
                               hint="pad complex tensors with zeros, or pad their real and imaginary parts")
    return as_complex(ctx, pad.pad_nd(ctx, z.value, [0, 0] + list(padding), "constant", 0))


def _with_zero_imaginary(ctx, real: ir.Value, to: ir.DataType) -> ir.Value:
    """``[..., 1]`` real parts -> ``[..., 2]`` with zero imaginary parts (any rank)."""
    zeros = ctx.op.ConstantOfShape(ctx.op.Shape(real), value=ir.tensor(np.zeros(1, dtype=to.numpy())))
    return ctx.op.Concat(real, zeros, axis=-1)


def _operand(ctx, x: Any, to: ir.DataType) -> tuple[ir.Value, bool]:
    """(carried ``[..., 2]`` value or real value ``[..., 1]``, is complex)."""
    if isinstance(x, ComplexAsReal):
        return x.value, True
    if isinstance(x, complex):
        return ctx.const(np.array([x.real, x.imag], dtype=to.numpy())), True
    if not isinstance(x, ir.Value):
        x = ctx.scalar(x, to)
    return ctx.op.Unsqueeze(ctx.cast(x, to), axes_const(ctx, [-1])), False


def _add_sub(ctx, a, b, alpha, onnx_op: str):
    to = real_dtype(ctx)
    (av, ac), (bv, bc) = _operand(ctx, a, to), _operand(ctx, b, to)
    if alpha != 1:
        bv = ctx.op.Mul(bv, ctx.scalar(alpha, to))
    # a real operand adds to the real parts only: padded with a zero imaginary part
    if not ac:
        av = _with_zero_imaginary(ctx, av, to)
    if not bc:
        bv = _with_zero_imaginary(ctx, bv, to)
    return as_complex(ctx, getattr(ctx.op, onnx_op)(av, bv))


@complex_aware(aten.add.Tensor, aten.add.Scalar)
def add(ctx, a, b, alpha=1):
    """add(Tensor self, Tensor other, *, Scalar alpha=1) with complex operands."""
    return _add_sub(ctx, a, b, alpha, "Add")


@complex_aware(aten.sub.Tensor, aten.sub.Scalar)
def sub(ctx, a, b, alpha=1):
    """sub(Tensor self, Tensor other, *, Scalar alpha=1) with complex operands."""
    return _add_sub(ctx, a, b, alpha, "Sub")


@complex_aware(aten.mul.Tensor, aten.mul.Scalar)
def mul(ctx, a, b):
    """mul(Tensor self, Tensor other) with complex operands: (a + ib)(c + id) = (ac - bd) + i(ad + bc);
    a real operand scales both parts."""
    to = real_dtype(ctx)
    (av, ac), (bv, bc) = _operand(ctx, a, to), _operand(ctx, b, to)
    if not (ac and bc):
        return as_complex(ctx, ctx.op.Mul(av, bv))
    ar, ai, br, bi = part(ctx, av, 0), part(ctx, av, 1), part(ctx, bv, 0), part(ctx, bv, 1)
    re = ctx.op.Sub(ctx.op.Mul(ar, br), ctx.op.Mul(ai, bi))
    im = ctx.op.Add(ctx.op.Mul(ar, bi), ctx.op.Mul(ai, br))
    return as_complex(ctx, pair(ctx, re, im))
