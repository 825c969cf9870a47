"""The smallest sizes, run in eager PyTorch: does the model take size 1 where the export would
promise it?

torch.export traces a model assuming every dynamic size is at least 2: a check the model makes of
size 1 (a pooling window that would not fit, a reshape that needs two frames) is decided by that
assumption and never recorded as a guard. For every dimension the export would promise from size 1
on, the model runs once in eager PyTorch at size 1 (the other dimensions at the example's sizes,
inputs made like the example's, ``capture.inputs``): when PyTorch itself refuses, the dimension
starts at 2 (adopted with a warning naming the error and the user's line, or refused for an
explicit range), so the export never promises sizes the model does not take. A refusal eager PyTorch
also makes on the made-up inputs at the example's own sizes (same line, same exception type) is of
their values, not of size 1 (a count of special tokens in random ids), and excludes nothing.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import traceback
from typing import Any, Iterator

import sympy
import torch

from onnxport.capture.captured import Captured
from onnxport.capture.guards.conditions import Guard, GuardStatus, range_error
from onnxport.capture.inputs import dim_examples, dim_names, inputs_like_example
from onnxport.capture.relations import evaluate
from onnxport.errors import last_user_frame


REFUSES = "PyTorch refuses"  # how a guard adopted because eager PyTorch refused its excluded size is decided


def probe_size_one(model: Any, captured: Captured) -> tuple[list[Guard], dict]:
    """Run ``model`` at size 1 of each dimension ``captured`` would promise from 1 on.

    Returns the guards adopted (``name >= 2``) and the variables with their minimum raised.

    Raises:
        DynamicShapesError: PyTorch refuses size 1 of a dimension whose explicit range includes it.
    """
    variables = dict(captured.variables)
    related = captured.relations
    small = [s for s, v in variables.items() if v.lo <= 1 and (v.hi is None or v.hi >= 2) and v.name not in related]
    if not small or not isinstance(model, torch.nn.Module):
        return [], variables
    names = dim_names(captured)
    examples, _ = dim_examples(captured, names)
    guards = []
    errors = {}
    adopted = [g for g in captured.guards if g.adopted]

    def at_one(*symbols) -> dict[str, int] | None:  # related dims (total = past + seq) follow their terms
        ones = {variables[s].name: 1 for s in symbols}
        sizes = evaluate(related, {**examples, **ones}) if related else {**examples, **ones}
        return satisfying(sizes, adopted, set(ones))

    def runs(*symbols):
        sizes = at_one(*symbols)
        return None if sizes is None else eager_refusal(model, captured, names, sizes)

    if runs(*small) is not None:
        errors = {s: runs(s) for s in small}
    control = eager_refusal(model, captured, names, examples) if any(errors.values()) else None
    for symbol, error in errors.items():
        if error is None or same_refusal(error, control):
            continue
        var = variables[symbol]
        where, message = error
        text = f"{var.name} >= 2"
        if not var.adoptable:
            raise range_error(text, ({var.name: 1},), where, [var])
        guards.append(Guard(text, GuardStatus.ADOPTED, where, ({var.name: 1},), ({var.name: 2},),
                            f"{REFUSES} {var.name} = 1: {message}", text, (var.name,)))
        variables[symbol] = dataclasses.replace(var, lo=2)
    return guards, variables


def same_refusal(error: tuple[str | None, str], control: tuple[str | None, str] | None) -> bool:
    """Whether eager PyTorch refused the made-up inputs at the example's sizes (``control``) where and as
    it refused them at size 1 (``error``): the same line and exception type. Such a refusal is of the
    inputs' values (``len(image_features) != (input_ids == image_token).sum()``: a count in random token
    ids), not of size 1, so it excludes nothing."""
    if control is None:
        return False
    return control[0] == error[0] and control[1].split(":")[0] == error[1].split(":")[0]


def satisfying(sizes: dict[str, int], adopted: list[Guard], fixed: set[str]) -> dict[str, int] | None:
    """``sizes`` with the dims outside ``fixed`` moved to meet the adopted equalities
    (``(p + s) == t``: ``t`` follows ``p`` and ``s``), or None when an adopted constraint still
    fails: the export does not promise those sizes, so eager PyTorch refusing them says nothing."""
    sizes = dict(sizes)
    for g in adopted:
        sides = None if g.holds(sizes) else g.equality()
        if sides is None:
            continue
        lhs, rhs = sides
        for name in sorted(set(g.names) - fixed):
            try:
                solved = sympy.solve(sympy.Eq(lhs, rhs), sympy.Symbol(name, integer=True))
            except (NotImplementedError, TypeError, ValueError):  # sympy cannot solve it for this name
                continue
            known = {sympy.Symbol(n, integer=True): v for n, v in sizes.items() if n != name}
            values = [v.subs(known) for v in solved]
            if len(values) == 1 and values[0].is_Integer and int(values[0]) >= 1:
                sizes[name] = int(values[0])
                break
    return sizes if all(g.holds(sizes) for g in adopted) else None


def eager_refusal(model: torch.nn.Module, captured: Captured, names: dict,
                  sizes: dict) -> tuple[str | None, str] | None:
    """None when eager PyTorch runs the model at ``sizes``; else (the user's line, the error)."""
    try:
        args, kwargs = inputs_like_example(captured, names, sizes, seed=0)
    except Exception:  # noqa: BLE001 - inputs cannot be made at these sizes: nothing to learn
        return None
    return eager_refusal_on(model, captured, args, kwargs)


def eager_refusal_on(model: torch.nn.Module, captured: Captured, args: tuple,
                     kwargs: dict) -> tuple[str | None, str] | None:
    """None when eager PyTorch runs ``model(*args, **kwargs)``; else (the user's line, the error). The run
    is on a copy where ``captured``'s program writes into buffers or inputs: the model is left as it was."""
    try:
        with torch.no_grad(), attributes_kept(model):
            _runner(model, captured)(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the model refuses these inputs
        return _refusal(e)
    return None


FAKE_LIMITS = ("FakeTensor", "fake tensor", "data pointer", "meta tensor", "data-dependent", "DataDependent",
               "Dynamic", "Unsupported")  # failures of fake tensors themselves, not of the model
FAKE_LOGGER = "torch._subclasses.fake_tensor"  # logs every exception a fake run raises as an error


def shapes_refusal(model: torch.nn.Module, captured: Captured, names: dict,
                   sizes: dict) -> tuple[str | None, str] | None | bool:
    """``eager_refusal`` on fake tensors (torch's ``FakeTensorMode``: shapes and dtypes propagated,
    no arithmetic; much faster than eager for a large model): None when the model runs at
    ``sizes``, ``(line, error)`` when a shape check refuses them, False when fake tensors cannot
    tell (an op they cannot run, a value read from data). torch's fake-tensor log stays quiet."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils import _pytree as pytree

    try:
        args, kwargs = inputs_like_example(captured, names, sizes, seed=0)
    except Exception:  # noqa: BLE001 - inputs cannot be made at these sizes
        return False
    logger = logging.getLogger(FAKE_LOGGER)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with attributes_kept(model), FakeTensorMode(allow_non_fake_inputs=True) as mode, torch.no_grad():
            fake_args, fake_kwargs = pytree.tree_map_only(torch.Tensor, mode.from_tensor, (args, kwargs))
            _runner(model, captured)(*fake_args, **fake_kwargs)
    except Exception as e:  # noqa: BLE001 - a refusal, or an op fake tensors cannot run
        text = f"{type(e).__name__}: {e}"
        if not isinstance(e, (RuntimeError, ValueError)) or any(k in text for k in FAKE_LIMITS):
            return False
        return _refusal(e)
    finally:
        logger.setLevel(level)
    return None


EAGER_GROWTH = 16  # eager PyTorch is asked only up to this many times a dim's example size (memory)


def refusal_at(model: torch.nn.Module, captured: Captured, names: dict, examples: dict[str, int],
               sizes: dict[str, int], confirm: bool = False) -> tuple[str | None, str] | None:
    """``(line, error)`` of the model's refusal at ``sizes`` (the other dims at ``examples``), or None
    where it runs or cannot be asked. Fake tensors first (``shapes_refusal``: shapes only, no memory);
    eager PyTorch (``eager_refusal``) where fake tensors cannot tell, and, with ``confirm``, to confirm
    their refusal; eager only up to ``EAGER_GROWTH`` times the example's size of each dim in ``sizes``
    (beyond, fake tensors' refusal stands and their "cannot tell" is None)."""
    at = {**examples, **sizes}
    verdict = shapes_refusal(model, captured, names, at)
    if verdict is None or (verdict and not confirm):
        return verdict
    if any(size > EAGER_GROWTH * max(examples.get(name, 1), 1) for name, size in sizes.items()):
        return verdict or None
    return eager_refusal(model, captured, names, at)


@contextlib.contextmanager
def attributes_kept(model: torch.nn.Module) -> Iterator[None]:
    """Every submodule of ``model`` left with the attributes, buffers, parameters and submodules it had
    before the block (each restored as the same object, one the block added removed): a run at
    another size that assigns ``self.pe = ...`` (a table extended for a longer input) leaves the
    user's model as it was, and a run on fake tensors leaves no fake tensor in it. Writes into a
    tensor in place are not undone (``_runner`` copies a model whose program writes into buffers)."""
    saved = []
    for module in model.modules():
        attrs = dict(vars(module))
        inner = {k: type(v)(v) for k, v in attrs.items() if k in _REGISTRIES and isinstance(v, (dict, set))}
        saved.append((module, attrs, inner))
    try:
        yield
    finally:
        for module, attrs, inner in saved:
            now = vars(module)
            for key in [k for k in now if k not in attrs]:
                del now[key]
            for key, value in attrs.items():
                if now.get(key, _MISSING) is not value:
                    now[key] = value
            for key, content in inner.items():
                live = now[key]
                if isinstance(live, set) or live.keys() != content.keys() or \
                        any(live[k] is not v for k, v in content.items()):
                    live.clear()
                    live.update(content)


_REGISTRIES = ("_parameters", "_buffers", "_modules", "_non_persistent_buffers_set")
_MISSING = object()


def _runner(model: torch.nn.Module, captured: Captured) -> torch.nn.Module:
    """``model``, or a copy of it when its program writes into buffers or inputs (a run leaves it as it was)."""
    mutates = any(s.kind.name != "USER_OUTPUT" for s in captured.program.graph_signature.output_specs)
    return copy.deepcopy(model) if mutates else model


def _refusal(e: BaseException) -> tuple[str | None, str]:
    """(the user's line, ``Type: first line``) of the error a run raised."""
    frames = "".join(traceback.format_list(traceback.extract_tb(e.__traceback__)))
    first = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
    return last_user_frame(frames), f"{type(e).__name__}: {first}"
