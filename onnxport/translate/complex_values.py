"""Complex tensors carried as real ONNX values: ``ComplexAsReal``, the set of FX targets translated on
them, the check of a complex value's readers, and complex initializers.

A complex tensor ``[*shape]`` is the real ONNX value ``[*shape, 2]`` (real, imaginary), PyTorch's
``view_as_real`` layout. The translations that make and read complex values are in ``ops/complex.py``,
``ops/fft.py`` and ``ops/spectral.py``; they add their targets to ``COMPLEX_READERS``. Semantics:
PyTorch's complex numbers (https://pytorch.org/docs/stable/complex_numbers.html).
"""

from __future__ import annotations

import dataclasses
import operator

import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.weights.binding import ir_tensor


@dataclasses.dataclass(frozen=True)
class ComplexAsReal:
    """A complex tensor ``[*shape]`` carried as the real ONNX value ``[*shape, 2]``."""

    value: ir.Value

    @property
    def rank(self) -> int:
        """Rank of the complex tensor (one less than the carried value's)."""
        return len(self.value.shape) - 1


# FX targets translated on ComplexAsReal inputs (ops/complex.py, fft.py, spectral.py add to them)
COMPLEX_READERS: set = {operator.getitem, torch.ops.aten._assert_tensor_metadata.default}  # the assert emits nothing


def check_readers(ctx, node: torch.fx.Node | None = None) -> None:
    """Every reader of ``node`` (by default the node being translated), whose result is complex, must
    translate complex values, and the model must not return it."""
    node = ctx.current_node if node is None else node
    for user in node.users:
        at = node if node.op == "call_function" else user  # a constant has no line of its own: its reader's
        if user.op == "output":
            raise TranslationError(
                f"the model returns the complex tensor made by {node.target}; ONNX models made here carry "
                "no complex tensors (onnxruntime runs few operators on them)",
                node=at, hint="return torch.view_as_real(z) (or z.real, z.imag, z.abs()) instead and rebuild "
                              "the complex tensor with torch.view_as_complex after running the ONNX model")
        if user.target not in COMPLEX_READERS:
            raise TranslationError(
                f"the complex result of {node.target} is read by {user.target}, which onnxport does not translate "
                "on complex values (they are carried as real [..., 2] pairs)",
                node=at, hint="compute from torch.view_as_real(z), z.real, z.imag or z.abs() instead; complex "
                              "values are read by " + ", ".join(sorted(str(t) for t in COMPLEX_READERS
                                                                       if t is not operator.getitem)))


def complex_constant(ctx, node: torch.fx.Node, tensor: torch.Tensor, name: str) -> ComplexAsReal:
    """A complex parameter, buffer or tensor constant (``tensor``, complex64 / complex128 ``[*shape]``,
    read by the FX placeholder ``node``) carried as the real initializer ``[*shape, 2]`` named ``name``
    (as ``torch.view_as_real`` lays it out). Its readers are checked as a complex result's are
    (``TranslationError`` naming the reader that cannot take it).

    A complex initializer would reach the real-valued translations as if it were real: a ``to`` of
    Llama 4's rotary table ``freqs_ci`` would keep only its real parts."""
    const = ir_tensor(torch.view_as_real(tensor.detach().resolve_conj()), name)
    value = ir.Value(name=name, const_value=const)
    value.type = ir.TensorType(const.dtype)
    value.shape = ir.Shape(list(const.shape))
    check_readers(ctx, node)
    return ComplexAsReal(value)
