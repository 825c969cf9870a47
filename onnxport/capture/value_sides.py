"""A branch on a state tensor's value, captured one side at a time.

A streaming step branches on its state (``if n_processed_blocks == 0:``) and, on one side, returns
outputs of other shapes (ESPnet's contextual-block encoders emit ``offset`` more frames on the first
block): ``torch.cond`` cannot hold such a branch. Each side is then a program of its own: the model
is traced with the Python truth of every tensor its code reads as a bool that torch.export cannot
decide (a data-dependent bool: ``bool(counter == 0)``) given as one side (``SideOf``), and the
condition itself is traced as a program of its own (``ConditionOf``: the model traced on one side,
its one output the tensor of the first such read, the rest of the program dropped): the joined ONNX
model computes it from the inputs and runs the side it chooses (``onnxport.value_sides``).

What the sides assume is checked in eager mode: ``reads`` runs the model once and records the truth
of each tensor it reads as a bool, with its line, so that which side an input set takes is known and
a model whose reads at the lines the side traces answered are not the first one's condition (another
condition on another state) is refused instead of joined wrongly.

Semantics: Python's truth of a one-element tensor (``bool(t)`` is ``t.item() != 0``); torch's
``GuardOnDataDependentSymNode``, raised where torch.export cannot decide such a truth.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Iterator

import torch

from onnxport.capture.guards.record import user_frame
from onnxport.capture.patches import Patch, SetAttribute, installed, register

_NO_LINE = "a line outside the model's code"  # where no frame on the stack is the user's
_MODE: list = []  # the innermost mode: ("side", bool, Answered) while traced, ("read", seen) in eager mode


def _caller() -> str:
    """``file:line in func: code`` of the user's code reading a tensor's truth (``guards.record.user_frame``)."""
    return user_frame() or _NO_LINE


class Answered(list):
    """``(line, tensor)`` of each data-dependent bool a side's trace answered, in order; one list
    however the module holding it is copied (the capture may trace a copy)."""

    def __deepcopy__(self, memo: dict) -> "Answered":
        return self

    def __copy__(self) -> "Answered":
        return self


def _bool_changes() -> list:
    from onnxport.capture.data_dependent import is_data_dependent

    def make(original):
        def __bool__(self):
            if not _MODE:
                return original(self)
            mode = _MODE[-1]
            if mode[0] == "read":  # eager mode: record the truth read and its line
                value = original(self)
                mode[1].append((_caller(), value))
                return value
            try:
                return original(self)
            except Exception as e:
                if not is_data_dependent(e):
                    raise
                mode[2].append((_caller(), self))
                return mode[1]

        return __bool__

    return [SetAttribute(torch.Tensor, "__bool__", make)]


VALUE_SIDE = register(Patch(
    "a data-dependent bool given one side", _bool_changes,
    "torch.Tensor.__bool__: inside a SideOf trace, the truth of a tensor torch.export cannot decide (a branch on a "
    "state's value) given as the side traced, its line and tensor recorded (ConditionOf returns the first "
    "tensor); in eager mode under reads(), each truth read recorded with its line; otherwise torch's own"))


@contextlib.contextmanager
def _mode(mode: tuple) -> Iterator[None]:
    with installed(VALUE_SIDE):
        _MODE.append(mode)
        try:
            yield
        finally:
            _MODE.pop()


def _with_signature(cls: type, model: torch.nn.Module) -> type:
    """A subclass of ``cls`` whose ``forward`` has ``model.forward``'s parameters (the inputs keep
    their names in the export); ``cls`` itself where that signature cannot be read."""
    try:
        sig = inspect.signature(model.forward)
    except (AttributeError, TypeError, ValueError):
        return cls

    def forward(self, *args, **kwargs):
        return cls.forward(self, *args, **kwargs)

    this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    forward.__signature__ = sig.replace(parameters=[this, *sig.parameters.values()])
    return type(cls.__name__, (cls,), {"forward": forward, "__module__": cls.__module__, "__doc__": cls.__doc__})


def side_of(model: torch.nn.Module, side: bool) -> "SideOf":
    """``SideOf(model, side)`` whose forward takes ``model.forward``'s parameters."""
    return _with_signature(SideOf, model)(model, side)


def condition_of(model: torch.nn.Module) -> "ConditionOf":
    """``ConditionOf(model)`` whose forward takes ``model.forward``'s parameters."""
    return _with_signature(ConditionOf, model)(model)


class SideOf(torch.nn.Module):
    """``model`` whose data-dependent bools, while traced, are ``side``; ``answered``: ``(line,
    tensor)`` of each, over every trace (in eager mode, where each truth is known, none)."""

    def __init__(self, model: torch.nn.Module, side: bool):
        super().__init__()
        self.model, self.side, self.answered = model, bool(side), Answered()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        with _mode(("side", self.side, self.answered)):
            return self.model(*args, **kwargs)


class ConditionOf(SideOf):
    """The truth of the first data-dependent bool ``model``'s code reads (which side runs), as a
    bool tensor of shape ``[]``, traced with the model on its ``side`` (the rest of the program,
    which nothing returns, is dropped); ``answered`` as ``SideOf``'s. In eager mode (no such
    read) it raises ``ValueError``: the condition exists only while traced."""

    def __init__(self, model: torch.nn.Module, side: bool = True):
        super().__init__(model, side)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        start = len(self.answered)
        super().forward(*args, **kwargs)
        if len(self.answered) == start:
            raise ValueError("the model reads no data-dependent bool")
        t = self.answered[start][1].reshape(())
        return t if t.dtype == torch.bool else t != 0


def reads(model: Any, args: tuple, kwargs: dict) -> list[tuple[str, bool]]:
    """``(line, truth)`` of each tensor's truth ``model(*args, **kwargs)`` reads in eager mode (the
    model run once, without gradients), in order."""
    seen: list = []
    with torch.no_grad(), _mode(("read", seen)):
        model(*args, **kwargs)
    return seen
