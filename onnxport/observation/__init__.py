"""Dynamic shapes written from observed calls: call the model as it is used, get what ``to_onnx`` takes.

```python
with onnxport.observe(model) as seen:
    model(**first_call)
    model(**second_call)          # other batch, sequence, cache lengths...
result = onnxport.to_onnx(model, seen.args, kwargs=seen.kwargs, dynamic_shapes=seen.dynamic_shapes,
                          relations=seen.relations)
```

The calls' inputs are flattened as torch.export flattens them (``torch.utils._pytree``: tuples,
lists, dicts, registered dataclasses, transformers' caches as ``onnxport.capture.caches`` registers
them); the axes that varied are dynamic, named by their role (``onnxport.observation.names``), those of
one size in every call share a name, and a dimension that is the sum of two others in every call is
a relation (``onnxport.observation.axes``). An axis that kept its size stays static.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from typing import Any, Iterator

import torch
from torch.utils import _pytree as pytree

from onnxport.capture.caches import cache_input_name, cache_leaves, is_cache, register_caches
from onnxport.capture.dynamic_shapes import key_str, leaf_name, signature_names
from onnxport.errors import DynamicShapesError
from onnxport.observation.axes import Calls, Decision, Shapes, decide
from onnxport.observation.names import config_sizes

__all__ = ["Call", "Observed", "observe"]


@dataclasses.dataclass(frozen=True)
class Call:
    """One observed call: its inputs as they were when the call began (tensors copied, so that a cache
    the call grows in place is seen at its size then; ``None`` but for the call taken as the example,
    the best when it was made and not bettered since), and each input tensor's flat name, key and shape."""

    args: tuple | None
    kwargs: dict | None
    shapes: Shapes


class Observed:
    """The calls ``observe`` recorded and what they decide: ``args``, ``kwargs`` (the example call),
    ``dynamic_shapes`` and ``relations``, in the forms ``onnxport.to_onnx`` takes them.

    Attributes:
        calls: every recorded call (``Call``), in order.
        where: the line that started the observation (``file:line``), for errors.
    """

    def __init__(self, model: torch.nn.Module, where: str | None):
        self.model = model
        self.calls: list[Call] = []
        self.where = where
        self._decided: tuple[int, Decision] | None = None
        self._held: int | None = None  # the index of the one call whose inputs are kept
        self._axes = Calls()  # the calls' axes so far, to compare the held call with each new one

    # ------------------------------------------------------------------ recording
    def record(self, args: tuple, kwargs: dict) -> None:
        """Record one call of the model with these inputs: their shapes, and a copy of them when the
        call is the best example so far (``axes.Calls.better``), which drops the copy of the one it
        replaces. One copy is held at a time: ``generate``'s steps, each with a longer cache, cost one
        copy; comparing the two costs the calls' axes, not the calls so far."""
        register_caches()
        shapes = self._shapes(args, kwargs)
        self.calls.append(Call(None, None, shapes))
        new = self._axes.add(shapes)
        held = self._held
        if held is not None and self._axes.better(held, new) == held:
            self._axes.forget(new)
            return
        copy = pytree.tree_map(lambda x: x.detach().clone() if isinstance(x, torch.Tensor) else x, (args, kwargs))
        if held is not None:
            self.calls[held] = Call(None, None, self.calls[held].shapes)
            self._axes.forget(held)
        self.calls[new] = Call(tuple(copy[0]), dict(copy[1]), shapes)
        self._held = new

    def _shapes(self, args: tuple, kwargs: dict) -> Shapes:
        out: Shapes = {}
        for name, value in signature_names(self.model, args, kwargs):
            leaves, _ = pytree.tree_flatten_with_path(value)
            for path, leaf in leaves:
                if isinstance(leaf, torch.Tensor):
                    out[leaf_name(name, path)] = (key_str(path[-1]) if path else name, tuple(leaf.shape))
        return out

    # ------------------------------------------------------------------ what the calls decide
    @property
    def decision(self) -> Decision:
        """The dynamic axes, their names and relations and the example (``axes.Decision``).

        Raises:
            DynamicShapesError: no call was recorded.
        """
        if not self.calls:
            raise DynamicShapesError("onnxport.observe(model) recorded no call of the model", where=self.where,
                                     hint="call the model inside the `with` block, several times with the sizes "
                                          "that vary (batch, sequence, image sizes)")
        if self._decided is None or self._decided[0] != len(self.calls):
            kept = [i for i, c in enumerate(self.calls) if c.args is not None]
            self._decided = (len(self.calls), decide([c.shapes for c in self.calls], kept, config_sizes(self.model)))
        return self._decided[1]

    @property
    def example(self) -> Call:
        """The call taken as the example: the least degenerate (no size 0 or 1 where a dim varies,
        when a call has none) when it was made, and not bettered by a later call."""
        return self.calls[self.decision.example]

    @property
    def args(self) -> tuple:
        """The example call's positional inputs (``to_onnx``'s ``args``)."""
        return self.example.args

    @property
    def kwargs(self) -> dict:
        """The example call's keyword inputs (``to_onnx``'s ``kwargs``)."""
        return self.example.kwargs

    @property
    def relations(self) -> dict[str, str]:
        """Dimension name -> the sum of two others it equals in every call (``{"total": "past +
        seq"}``: ``to_onnx``'s ``relations``); empty when there is none."""
        return dict(self.decision.relations)

    @property
    def sizes(self) -> dict[str, tuple[int | None, ...]]:
        """Dimension name -> its size in each call (None where a call had no such axis)."""
        return dict(self.decision.sizes)

    @property
    def dynamic_shapes(self) -> dict[str, Any]:
        """The example's dynamic axes by forward() parameter (or keyword) name, as ``to_onnx`` takes
        them: ``{axis: name}`` per tensor, containers in their own structure, a registered class
        (dataclass) as the list of its flattened children, a transformers cache as one spec for all
        its tensors (a list, one per tensor, where they differ). Inputs with no dynamic axis are left
        out (static)."""
        dims = self.decision.dims
        out = {}
        for name, value in signature_names(self.model, self.args, self.kwargs):
            spec = _spec(name, value, dims, top=True)
            if spec is not None:
                out[name] = spec
        return out

    @property
    def arguments(self) -> dict[str, Any]:
        """``args``, ``kwargs``, ``dynamic_shapes`` and ``relations`` as keywords of
        ``onnxport.to_onnx(model, **seen.arguments)``."""
        return {"args": self.args, "kwargs": self.kwargs, "dynamic_shapes": self.dynamic_shapes,
                "relations": self.relations or None}

    def __repr__(self) -> str:
        if not self.calls:
            return "Observed(no calls)"
        d = self.decision
        dims = ", ".join(f"{n}={'/'.join('-' if s is None else str(s) for s in v)}" for n, v in d.sizes.items())
        rel = "".join(f", {k} = {v}" for k, v in d.relations.items())
        return f"Observed({len(self.calls)} calls, example #{d.example}, dynamic: {dims or 'none'}{rel})"


def _spec(name: str, value: Any, dims: dict[str, dict[int, str]], top: bool = False) -> Any:
    """The dynamic-shapes spec of one input ``value`` whose flat name is ``name``: None where none
    of its tensors has a dynamic axis."""
    if isinstance(value, torch.Tensor):
        return dict(dims[name]) if name in dims else None
    if is_cache(value):
        base = cache_input_name(name) if top else name
        specs = [dims.get(f"{base}.{leaf}") for leaf, _ in cache_leaves(value)]
        if all(s is None for s in specs):
            return None
        return specs[0] if all(s == specs[0] for s in specs) else specs
    if isinstance(value, dict):
        specs = {k: _spec(f"{name}_{k}", v, dims) for k, v in value.items()}
        return specs if any(s is not None for s in specs.values()) else None
    if isinstance(value, (list, tuple)):
        specs = [_spec(f"{name}_{i}", v, dims) for i, v in enumerate(value)]
        if all(s is None for s in specs):
            return None
        return type(value)(specs) if type(value) in (list, tuple) else tuple(specs)
    node = pytree.SUPPORTED_NODES.get(type(value))
    if node is None:
        return None
    if node.flatten_with_keys_fn is not None:
        children = node.flatten_with_keys_fn(value)[0]
    else:
        children = [(pytree.SequenceKey(i), c) for i, c in enumerate(node.flatten_fn(value)[0])]
    specs = [_spec(leaf_name(name, (k,)), c, dims) for k, c in children]
    return specs if any(s is not None for s in specs) else None


@contextlib.contextmanager
def observe(model: torch.nn.Module) -> Iterator[Observed]:
    """Record the calls made to ``model`` inside the ``with`` block; the ``Observed`` it gives holds
    ``args``, ``kwargs``, ``dynamic_shapes`` and ``relations`` for ``onnxport.to_onnx``.

    Every top-level call is recorded (``model(...)``, and each step of ``model.generate(...)``);
    calls the model makes to itself are not. The example's inputs are copied as its call begins
    (one copy is held: a later call that is better replaces it).
    After the block:

    * an axis is dynamic when the calls gave it more than one size, static otherwise (vary every
      size that should stay dynamic: the batch too);
    * axes of one size in every call are one dimension (vary dimensions independently, or they are
      taken to be one);
    * names come from each axis's role: ``batch``, ``seq``, ``past`` (a cache's length), ``total``
      (the attention mask over cached and new tokens), ``channels``, ``height``, ``width``,
      ``time``, ``features``... from the input's name, the axis's position, the tensor's rank, the
      image layout (NCHW, or NHWC where the last axis is the constant channel count) and the
      model's ``config`` (``num_channels``, ``num_mel_bins``); ``<input>_dim<axis>`` where no role
      is known;
    * a dimension equal to the sum of two others in every call is stated as a relation
      (``seen.relations``, ``{"total": "past + seq"}``);
    * the example is the call with the most input tensors and the fewest dynamic sizes of 0 or 1,
      judged as each call comes (a later call replaces it when the calls so far say it is better).

    Args:
        model: a ``torch.nn.Module``, called in the block as it is used (eval mode is the caller's).

    Returns:
        A context manager yielding ``Observed``; its attributes can be read once a call is recorded.

    Raises:
        DynamicShapesError: ``model`` is not a ``torch.nn.Module``; reading what the calls decide
            when no call was recorded.
    """
    where = _caller()
    if not isinstance(model, torch.nn.Module):
        raise DynamicShapesError(f"onnxport.observe takes a torch.nn.Module, not {type(model).__name__}",
                                 where=where, hint="wrap the function in a torch.nn.Module whose forward calls it")
    seen = Observed(model, where)
    depth = [0]

    def before(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        if depth[0] == 0:
            seen.record(args, kwargs)
        depth[0] += 1

    def after(module: torch.nn.Module, args: tuple, output: Any) -> None:
        depth[0] -= 1

    hooks = [model.register_forward_pre_hook(before, with_kwargs=True),
             model.register_forward_hook(after, always_call=True)]
    try:
        yield seen
    finally:
        for hook in hooks:
            hook.remove()


def _caller() -> str | None:
    """``file:line`` of the code that called ``observe`` (outside contextlib and this module)."""
    frame = inspect.currentframe()
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.endswith(("contextlib.py", "observation/__init__.py")):
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back
    return None
