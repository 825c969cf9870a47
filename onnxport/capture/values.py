"""What an export takes and gives, checked where torch.export would let it through or fail
without naming the user's value: inputs torch.export cannot take, outputs ONNX cannot hold.

``check_inputs(model, args, kwargs)`` before capture; ``check_outputs(program, model)`` after.
Semantics: torch.export's input rules (pytree containers of tensors and Python constants,
https://pytorch.org/docs/stable/export.html) and ONNX outputs (tensors; a Python number returned by
``forward`` is exported as a constant scalar output).
"""

from __future__ import annotations

import ast
import enum
import inspect
import textwrap
from typing import Any

import torch
from torch.utils import _pytree as pytree

from onnxport.capture.caches import register_caches
from onnxport.errors import CaptureError

_CONSTANTS = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.memory_format, torch.layout,
              enum.Enum, torch.SymInt, torch.SymFloat, torch.SymBool)
_NUMBERS = (int, float, bool)


def check_inputs(model: Any, args: tuple, kwargs: dict) -> None:
    """Raise ``CaptureError`` naming the input when an example input is neither a tensor, a Python
    constant, nor a container torch.export can flatten (``object()``, an unregistered class).
    transformers' caches are registered first (``capture.caches.register_caches``), as capture does."""
    register_caches()
    named = _named_inputs(model, args, kwargs)
    for path, leaf in pytree.tree_flatten_with_path(named)[0]:
        if isinstance(leaf, (torch.Tensor, *_CONSTANTS)) or _registered_constant(type(leaf)):
            continue
        name = _path_text(path)
        raise CaptureError(
            f"input {name} is a {type(leaf).__module__}.{type(leaf).__qualname__}, which torch.export cannot take "
            f"as an input",
            hint="pass tensors, Python numbers or strings, or tuples/lists/dicts of them; register a class of "
                 "your own with torch.export.register_dataclass or torch.utils._pytree.register_pytree_node")


def distinct_tensors(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args`` and ``kwargs`` with every tensor that is the same object as an earlier one, or shares
    its memory, replaced by a copy. torch.export fakes one tensor per object (and per storage), so
    ``model(x, a=y, b=y)`` would be traced with ``a`` and ``b`` as one value: an ONNX model that reads
    ``b`` where the code reads ``a``. The inputs are returned as given when no two share memory.
    """
    seen: set[int] = set()
    repeated = False
    for leaf in pytree.tree_leaves((args, kwargs)):
        key = _memory(leaf)
        if key is not None:
            repeated = repeated or key in seen
            seen.add(key)
    if not repeated:
        return args, kwargs
    seen.clear()

    def copy(leaf: Any) -> Any:
        key = _memory(leaf)
        if key is None:
            return leaf
        if key in seen:
            return leaf.clone()
        seen.add(key)
        return leaf

    return pytree.tree_map(copy, (args, kwargs))


def _memory(leaf: Any) -> int | None:
    """The address of a real tensor's storage (None for other values, meta and empty tensors)."""
    if not isinstance(leaf, torch.Tensor) or leaf.device.type == "meta" or leaf.numel() == 0:
        return None
    try:
        return leaf.untyped_storage().data_ptr() or None
    except (RuntimeError, NotImplementedError):  # fake or functional tensors
        return None


def check_outputs(program: torch.export.ExportedProgram, model: Any) -> None:
    """Raise ``CaptureError`` at the user's ``return`` when ``forward`` returns a value ONNX cannot
    hold as an output (a string, an arbitrary object) or nothing at all (``None``).

    Python numbers (``int``, ``float``, ``bool``) and sizes are kept: they become scalar outputs.
    """
    from torch.export.graph_signature import ConstantArgument, OutputKind

    user = [s for s in program.graph_signature.output_specs if s.kind == OutputKind.USER_OUTPUT]
    names = ["the output"] if len(user) == 1 else [f"output {i}" for i in range(len(user))]
    for i, spec in enumerate(user):
        arg = spec.arg
        if isinstance(arg, ConstantArgument) and arg.value is not None and not isinstance(arg.value, _NUMBERS):
            value = arg.value
            raise CaptureError(
                f"forward returns a {type(value).__name__} ({_short(value)}) as {names[i]}: an ONNX output is a "
                f"tensor or a number", where=return_line(model, value),
                hint="return tensors only (keep strings and other Python objects out of forward's result)")
    if user and all(isinstance(s.arg, ConstantArgument) and s.arg.value is None for s in user):
        raise CaptureError("forward returns None: the ONNX model would have no output",
                           where=return_line(model, None), hint="return the tensor(s) the model computes")


def return_line(model: Any, value: Any) -> str | None:
    """``file:line in forward: code`` of the ``return`` in ``type(model).forward`` that most likely
    returns ``value`` (one holding it as a literal, else the last one; the ``def`` line when
    ``forward`` has no ``return``); None when the source cannot be read."""
    fn = getattr(type(model), "forward", None)
    try:
        lines, start = inspect.getsourcelines(fn)
        path = inspect.getsourcefile(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    returns = [n for n in ast.walk(tree) if isinstance(n, ast.Return)]
    literal = [r for r in returns
               if any(isinstance(c, ast.Constant) and c.value == value and type(c.value) is type(value)
                      for c in ast.walk(r.value or ast.Constant(None)))]
    chosen = (literal or returns or [None])[-1]
    offset = (chosen.lineno - 1) if chosen is not None else 0
    code = lines[offset].strip() if offset < len(lines) else ""
    return f"{path}:{start + offset} in {fn.__name__}: {code}"


def _named_inputs(model: Any, args: tuple, kwargs: dict) -> dict:
    try:
        bound = inspect.signature(model.forward).bind(*args, **kwargs)
        return dict(bound.arguments)
    except (TypeError, ValueError, AttributeError):
        return {**{f"args[{i}]": a for i, a in enumerate(args)}, **kwargs}


def _path_text(path: tuple) -> str:
    head, *rest = path
    key = getattr(head, "key", getattr(head, "idx", head))
    return repr(str(key)) + "".join(str(k) for k in rest)


def _registered_constant(cls: type) -> bool:
    check = getattr(pytree, "is_constant_class", None)
    try:
        return bool(check(cls)) if check is not None else False
    except Exception:  # noqa: BLE001 - an older torch without the registry
        return False


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
