"""forward()'s parameters and the top-level inputs each binds: torch.export's ``dynamic_shapes`` forms.

torch.export matches ``dynamic_shapes`` against ``inspect.signature(forward).bind(*args, **kwargs)
.arguments`` (``torch.export.dynamic_shapes._combine_args``): a tuple in the signature's order, or
a dict keyed by parameter names, with ``*args`` given as one tuple and ``**kwargs`` as one dict
(PyTorch docs, "torch.export: Expressing Dynamism"). onnxport names each top-level input on its
own (``past_0``, ``past_1`` for ``*past``; a keyword argument by its key), so the user's spec is
spread over those names here, and gathered back into torch's form for torch.export.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import torch

from onnxport.errors import DynamicShapesError

ONE, VARARGS, VARKW = "one", "varargs", "varkw"


@dataclasses.dataclass(frozen=True)
class Parameter:
    """One parameter of forward() as bound by the call: its name, kind (``one``, ``varargs`` for
    ``*args``, ``varkw`` for ``**kwargs``) and the names of the top-level inputs it binds."""

    name: str
    kind: str
    inputs: tuple[str, ...]


def bound_parameters(model: Any, args: tuple, kwargs: dict, top: list[tuple[str, Any]]) -> list[Parameter]:
    """The parameters of ``model.forward`` the call binds, in the signature's order, each with the
    names ``top`` gives its inputs (``onnxport.capture.dynamic_shapes.signature_names``); one
    parameter per input where the signature cannot be read or bound."""
    fn = model.forward if isinstance(model, torch.nn.Module) else model
    flat = [Parameter(n, ONE, (n,)) for n, _ in top]
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs).arguments
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return flat
    names = [n for n, _ in top]
    out: list[Parameter] = []
    for name, value in bound.items():
        kind = params[name].kind
        if kind == inspect.Parameter.VAR_POSITIONAL:
            out.append(Parameter(name, VARARGS, tuple(f"{name}_{i}" for i in range(len(value)))))
        elif kind == inspect.Parameter.VAR_KEYWORD:
            out.append(Parameter(name, VARKW, tuple(value)))
        else:
            out.append(Parameter(name, ONE, (name,)))
    if sorted(n for p in out for n in p.inputs) != sorted(names):
        return flat
    return out


def spread(spec: Any, top: list[tuple[str, Any]], params: list[Parameter]) -> dict[str, Any]:
    """The spec of each top-level input (name -> spec) from a ``dynamic_shapes`` given in
    torch.export's form (by parameter) or in onnxport's (one entry per top-level input).

    Raises:
        DynamicShapesError: a key that names no input, an entry count that fits neither form, or
            a ``*args`` / ``**kwargs`` entry of another structure than the call's.
    """
    names = [n for n, _ in top]
    by_name = {p.name: p for p in params}
    if isinstance(spec, dict):
        out: dict[str, Any] = {}
        unknown = []
        for key, value in spec.items():
            p = by_name.get(key)
            if p is not None and p.kind != ONE and _by_parameter(p, value):
                out.update(_spread_one(p, value))
            elif p is not None and p.kind != ONE and key not in names:
                form = "a tuple with one entry per argument" if p.kind == VARARGS else "a dict keyed by the keywords"
                raise DynamicShapesError(
                    f"dynamic_shapes gives {'*' if p.kind == VARARGS else '**'}{key} {value!r}; it takes {form}",
                    hint=f"write {key}=({', '.join(['...'] * len(p.inputs))}) for the {len(p.inputs)} arguments passed"
                         if p.kind == VARARGS else f"write {key}={{{', '.join(repr(n) + ': ...' for n in p.inputs)}}}")
            elif key in names:
                out[key] = value
            else:
                unknown.append(key)
        if unknown:
            raise DynamicShapesError(
                f"dynamic_shapes names {unknown} but the model's inputs are {sorted(names)}",
                hint="key dynamic_shapes by the forward() parameter names (a tuple for *args, a dict for "
                     "**kwargs), or pass a tuple in argument order")
        return out
    if isinstance(spec, (list, tuple)):
        if len(spec) == len(params) and all(p.kind == ONE or _by_parameter(p, v) for p, v in zip(params, spec)):
            out = {}
            for p, value in zip(params, spec):
                out.update(_spread_one(p, value) if p.kind != ONE else {p.name: value})
            return out
        if len(spec) == len(top):
            return {n: s for n, s in zip(names, spec)}
        grouped = [p.name if p.kind == ONE else f"{'*' if p.kind == VARARGS else '**'}{p.name}" for p in params]
        forms = (f"{len(params)} ({', '.join(grouped)}) in torch.export's form"
                 if len(params) != len(top) else "")
        raise DynamicShapesError(
            f"dynamic_shapes has {len(spec)} entries but the model takes {len(top)} inputs "
            f"({', '.join(names)})" + (f"; {forms}" if forms else ""),
            hint="give one entry per input (None for an input with no dynamic dimension)"
                 + (", or one per forward() parameter with *args as a tuple and **kwargs as a dict" if forms else ""))
    raise DynamicShapesError(f"dynamic_shapes must be a dict, tuple or list, not {type(spec).__name__}")


def gather(per_input: dict[str, Any], params: list[Parameter]) -> dict[str, Any]:
    """The spec by parameter, as torch.export takes it: ``*args`` as a tuple; the keyword inputs of
    ``**kwargs`` each by its key, as the signature capture gives forward() while it traces has them
    (``onnxport.capture.signature``)."""
    out: dict[str, Any] = {}
    for p in params:
        if p.kind == VARARGS:
            out[p.name] = tuple(per_input.get(n) for n in p.inputs)
        elif p.kind == VARKW:
            out.update({n: per_input.get(n) for n in p.inputs})
        else:
            out[p.name] = per_input.get(p.name)
    return out


def has_variadic(params: list[Parameter]) -> bool:
    return any(p.kind != ONE for p in params)


def _by_parameter(p: Parameter, value: Any) -> bool:
    """``value`` is the spec of the whole ``*args`` tuple / ``**kwargs`` dict (torch.export's form),
    not of one tensor: a tuple of per-input specs, a dict keyed by the keyword names, or None."""
    if value is None:
        return True
    if p.kind == VARARGS:
        return isinstance(value, (list, tuple)) and all(v is None or isinstance(v, (dict, list, tuple)) for v in value)
    return isinstance(value, dict) and all(isinstance(k, str) for k in value)


def _spread_one(p: Parameter, value: Any) -> dict[str, Any]:
    if value is None:
        return {n: None for n in p.inputs}
    if p.kind == VARARGS:
        if len(value) != len(p.inputs):
            raise DynamicShapesError(
                f"dynamic_shapes gives *{p.name} {len(value)} entries but the call passes {len(p.inputs)}",
                hint=f"give *{p.name} one entry per argument it receives (None for a static one)")
        return dict(zip(p.inputs, value))
    extra = sorted(set(value) - set(p.inputs))
    if extra:
        raise DynamicShapesError(
            f"dynamic_shapes gives **{p.name} the keys {extra}, which the call does not pass "
            f"(it passes {sorted(p.inputs)})", hint="key **kwargs' spec by the keyword arguments of the call")
    return {n: value.get(n) for n in p.inputs}


def torch_form(spec: Any, model: Any, args: tuple, kwargs: dict) -> Any:
    """``spec`` with torch.export's builders resolved: a ``torch.export.ShapesCollection`` (specs keyed
    by tensor) or ``torch.export.AdditionalInputs`` (dynamism inferred from other example inputs)
    becomes the nested spec it stands for (their ``dynamic_shapes(model, args, kwargs)``); any
    other spec is returned as given.

    Raises:
        DynamicShapesError: the builder cannot make a spec for this call (torch's message kept).
    """
    builders = tuple(c for c in (getattr(torch.export, "ShapesCollection", None),
                                 getattr(torch.export, "AdditionalInputs", None)) if c is not None)
    if not builders or not isinstance(spec, builders):
        return spec
    try:
        return spec.dynamic_shapes(model, args, kwargs)
    except Exception as e:  # torch's own checks of the collection against the call
        raise DynamicShapesError(f"{type(spec).__name__} does not fit the call: {e}",
                                 hint="give it the tensors passed to the model (the same objects)") from e
