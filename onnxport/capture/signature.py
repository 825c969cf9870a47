"""Forward signatures with ``**kwargs``: the keyword inputs a call passes made explicit while
torch.export traces.

Hugging Face models declare ``forward(self, input_ids=None, ..., **kwargs)`` and read further
inputs (``past_key_values``, ``encoder_outputs``...) from ``**kwargs``. torch.export binds the
``dynamic_shapes`` spec to the parameters of the signature, where such inputs are one ``kwargs``
bundle; with the signature made explicit, each keyword input is an input of its own, named as the
call names it.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from onnxport.capture.patches import Patch, SetAttribute, register


def absorbed_keywords(model: Any, kwargs: dict) -> list[str]:
    """The keys of ``kwargs`` that ``model.forward`` takes only through its ``**kwargs``."""
    fn = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return []
    if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return []
    named = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return [k for k in kwargs if k not in named]


def _explicit_forward(original: Any, args: tuple, kwargs: dict) -> Any:
    """``original`` (a bound forward) with a signature of the positional parameters ``args`` fills,
    its ``*args`` where ``args`` reaches past them (``forward(self, x, *rest, **kwargs)``: torch.export
    binds the spec of ``rest`` as one tuple, as it does for the forward itself), and one keyword
    parameter per key of ``kwargs``."""
    params = list(inspect.signature(original).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][:len(args)]
    explicit = [inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in positional]
    rest = next((p for p in params if p.kind == p.VAR_POSITIONAL), None)
    if rest is not None and len(args) > len(positional):  # the positional inputs past the named ones
        explicit.append(inspect.Parameter(rest.name, inspect.Parameter.VAR_POSITIONAL))
    taken = {p.name for p in explicit}
    explicit += [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=None) for k in kwargs if k not in taken]

    def forward(*a: Any, **kw: Any) -> Any:
        return original(*a, **kw)

    forward.__signature__ = inspect.Signature(explicit)
    return forward


def _explicit_signature_changes(model: Any, args: tuple, kwargs: dict) -> list:
    if not isinstance(model, torch.nn.Module) or not absorbed_keywords(model, kwargs):
        return []
    return [SetAttribute(model, "forward", lambda original: _explicit_forward(original, args, kwargs))]


def _absorbing(trace: Any) -> tuple | None:
    """The call's model and inputs where its forward takes keyword inputs through ``**kwargs``."""
    request = trace.request
    return (request.model, request.args, request.kwargs) if absorbed_keywords(request.model, request.kwargs) else None


EXPLICIT_SIGNATURE = register(Patch(
    "explicit signature", _explicit_signature_changes,
    "the user's module's forward (the instance's): while traced, a signature with one parameter per keyword "
    "input it takes through **kwargs; nothing changes otherwise", None, when=_absorbing, order=320))
