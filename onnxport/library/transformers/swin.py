"""transformers' Swin layers clamping their window to the feature map, captured at every image size.

Swin's layers (``SwinLayer``; DonutSwin's and CLAP's audio encoder's copies) call
``set_shift_and_window_size(input_dimensions)`` before each window attention::

    if min(input_resolution) <= self.window_size:
        self.shift_size = torch_int(0)
        self.window_size = min(input_resolution)   # a tensor when torch.jit.is_tracing()

a branch on the stage's feature map size, which fixes an exported model to the example's side of it.
Its two cases, for a map of smallest side ``m`` and a window of ``w``:

* ``m < w``: the window shrinks to ``m``, but the attention's relative position bias stays sized for
  ``w * w`` tokens, and eager PyTorch fails (a broadcast of ``m * m`` against ``w * w`` tokens).
  While traced, ``m >= w`` is stated with ``torch._check``: the model's own minimum image size,
  which onnxport adopts as a constraint (eager PyTorch refuses the sizes it excludes).
* ``m == w``: the window stays ``w`` and the shift becomes 0 (one window along the smaller side).
  While traced, the shift is ``shift * max(0, min(1, m - w))``: the layer's shift where ``m > w``, 0
  where ``m <= w``, one symbolic size. The layer's rolls by it (``if self.shift_size > 0: torch.roll(...)``)
  are the identity at 0 (onnxport's rewrite of control flow runs them at every size: the model's
  padding to whole patches needs it anyway), and its attention mask is computed at every shift:
  ``get_attn_mask`` without its ``if self.shift_size <= 0: return None``, whose region arithmetic
  (``h >= height - shift``) gives every token of a window the same region at shift 0, so the mask
  is all zeros there and the attention adds nothing (transformers' ``None``).

``WINDOW_AT_EVERY_SIZE`` (a registered capture patch) makes both changes while torch.export traces
with symbolic sizes, for the layer classes and their subclasses (onnxport's rewrite of control flow
makes one); each layer's ``forward`` restores its own shift after the call, so nothing symbolic is
left on the model. Eager PyTorch runs transformers' code as it is; a trace at static sizes (a map of
fixed size, only the batch dynamic: CLAP's audio encoder on its fixed spectrogram) takes eager's branch
in Python ints: transformers' own form of it while traced (``torch.jit.is_tracing()``, true for
transformers' code under onnxport's ``JIT_TRACING_PATHS``) makes the window ``torch.min(torch.tensor(
input_resolution))``, a tensor whose value torch.export cannot read back, and every size computed from
it data-dependent (the padding to whole windows: ``was_padded = pad_values[3] > 0``), where eager's
``min(input_resolution)`` is the same number known while traced.

Eager transformers keeps what the branch set: after one call at ``m <= w`` the layer keeps shift 0
(and a smaller window) for every later call. The exported model clamps per call from the shift the
layer has when traced: the layer's own, or 0 where a call before the trace (an example of one window
at the last stage, run by the export's eager checks too) set it, as eager PyTorch computes then.

Semantics: transformers' ``models/swin/modeling_swin.py`` (``SwinLayer``), ``models/donut/
modeling_donut_swin.py``, ``models/clap/modeling_clap.py``; ``torch.roll`` by 0 returns its input.
"""

from __future__ import annotations

import ast
from typing import Callable

import torch

from onnxport.capture.patches import Patch, SetAttribute, always, register
from onnxport.capture.source_variants import replace_statement, source_variant
from onnxport.library.transformers import model_classes

_NO_MASK = "if self.shift_size <= 0:\n    return None"
_OWN_SHIFT = "_onnxport_own_shift"


def _symbolic(*sizes) -> bool:
    return any(isinstance(s, torch.SymInt) for s in sizes)


def _clamped(original: Callable) -> Callable:
    """``set_shift_and_window_size`` while traced (see the module docstring)."""
    def set_shift_and_window_size(self, input_resolution):
        height, width = input_resolution
        window = self.window_size
        if all(type(s) is int for s in (height, width, window)):  # eager's own path, in Python ints
            if min(height, width) <= window:
                self.shift_size, self.window_size = 0, min(height, width)
            return None
        if not (_symbolic(height, width) and isinstance(window, int)):
            return original(self, input_resolution)
        torch._check(height >= window, lambda: f"Swin: a feature map of height below the window {window}")
        torch._check(width >= window, lambda: f"Swin: a feature map of width below the window {window}")
        shift = vars(self).setdefault(_OWN_SHIFT, self.shift_size)
        if isinstance(shift, int) and shift > 0:
            self.shift_size = shift * torch.sym_max(0, torch.sym_min(1, torch.sym_min(height, width) - window))
        return None

    return set_shift_and_window_size


def _restoring(original: Callable) -> Callable:
    """A layer's ``forward`` putting its own shift back after the call."""
    def forward(self, *args, **kwargs):
        try:
            return original(self, *args, **kwargs)
        finally:
            own = vars(self).pop(_OWN_SHIFT, None)
            if own is not None:
                self.shift_size = own

    return forward


def _every_shift(func: ast.FunctionDef) -> bool:
    """``get_attn_mask`` without its early ``return None``, when the rest is the region arithmetic
    (not the older form slicing at ``-self.shift_size``, which is not the same function at 0)."""
    sliced = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "slice"
                 for n in ast.walk(func))
    if func.name != "get_attn_mask" or sliced:
        return False
    return replace_statement(func.body, lambda n: isinstance(n, ast.If) and ast.unparse(n) == _NO_MASK,
                             lambda n: [])


def _masking(base: Callable) -> Callable[[Callable], Callable]:
    """``get_attn_mask`` at every shift while the shift is symbolic, from ``base`` (the layer class's
    own; a subclass made by the rewrite has a rewritten copy of it)."""
    variant = source_variant(base, _every_shift)

    def make(original: Callable) -> Callable:
        def get_attn_mask(self, *args, **kwargs):
            if isinstance(self.shift_size, torch.SymInt):
                return variant(self, *args, **kwargs)
            return original(self, *args, **kwargs)

        return get_attn_mask

    return make


def _subclasses(cls: type) -> list[type]:
    out, todo = [], [cls]
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(c.__subclasses__())
    return out


def _changes() -> list:
    changes = []
    for layer in model_classes(("set_shift_and_window_size", "get_attn_mask", "forward")):
        base_mask = layer.__dict__["get_attn_mask"]
        if source_variant(base_mask, _every_shift) is None:
            continue  # a transformers version whose mask this module does not know: left as it is
        for cls in _subclasses(layer):
            if "set_shift_and_window_size" in cls.__dict__:
                changes.append(SetAttribute(cls, "set_shift_and_window_size", _clamped))
            if "get_attn_mask" in cls.__dict__:
                changes.append(SetAttribute(cls, "get_attn_mask", _masking(base_mask)))
            if "forward" in cls.__dict__:
                changes.append(SetAttribute(cls, "forward", _restoring))
    return changes


WINDOW_AT_EVERY_SIZE = register(Patch(
    "Swin windows at every size", _changes,
    "transformers' Swin layers (SwinLayer, DonutSwinLayer, ClapAudioLayer, and their subclasses): while torch.export "
    "traces at symbolic sizes, set_shift_and_window_size states the model's own minimum (a feature map at least the "
    "window: eager fails below) and gives the layer the shift shift * max(0, min(1, m - window)) for the call (0 "
    "where the map is one window), get_attn_mask computes its mask at every shift (zeros at 0), and forward restores "
    "the layer's own shift; nothing happens where those modules are not imported", when=always, order=370))
