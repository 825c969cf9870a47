"""The state the capture steps (``capture.steps``) hand each other.

``Request``: what the user asked, normalized once (the call torch.export traces, the declared
dims, the relations). ``Traced``: what one torch.export call gave (a program or a failure) and what
was recorded while it traced. ``CaptureState``: the request, what the steps have learned so far
(ranges to give torch, ranges the export promises, relations torch derived, narrowings, size-
oblivious reasoning, extra patches), the last trace, the decisions, and the attempts made.

A state is never changed: a step returns a new one (``state.but(why, field=value, ...)``, or
``state.retrace(why, ...)`` to have torch.export called again with what changed).
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, Callable, Mapping, Protocol

import sympy
import torch
from torch.export import Dim
from torch.utils import _pytree as pytree

from onnxport.capture.dynamic_shapes import (DeclaredDim, declared_dims, expand_caches, flat_names, other_axes_auto,
                                             positive_axes, one_dim_per_name, signature_names, spec_for, string_names,
                                             to_dims, without_dims)
from onnxport.capture.cache_relations import implied_relations
from onnxport.capture.caches import is_cache
from onnxport.capture.values import distinct_tensors
from onnxport.capture.parameters import bound_parameters, gather, has_variadic, torch_form
from onnxport.capture.guards import Guard, GuardEvent, SizeVar, Specialization, Unbacked
from onnxport.capture.patches import Patch
from onnxport.capture.relations import broken, parse_relations, pinned_relations
from onnxport.errors import DynamicShapesError, ExportError

FROZEN: Mapping = MappingProxyType({})  # an empty mapping no step can change


class OpSupport(Protocol):
    """What capture needs of the translations an export uses (``translate.registry.Translations``):
    the patches their families need while torch.export traces, and which ops translate as they are."""

    capture_patches: tuple[Patch, ...]

    def lookup(self, target: Any) -> Callable | None: ...

    def translatable(self, node: torch.fx.Node) -> bool: ...


@dataclasses.dataclass(frozen=True)
class Request:
    """What the user asked, normalized once.

    ``top``: forward's parameters and the values given; ``strings``: dim names given as plain
    strings (no range of the user's own); ``declared``: the axes declared dynamic; ``names``: flat
    input names; ``leaves``: flat name -> example value; ``related``: the user's relations (dim
    name -> sympy expression); ``small``: a declared axis has size 0 or 1 in the example.
    """

    model: torch.nn.Module
    args: tuple
    kwargs: dict
    dynamic_shapes: Any
    strict: bool = False
    rewritten: bool = False
    remainders: bool = False  # a branch on a remainder of sizes adopted on trial (``steps.remainder_branch``)
    rewrite_later: bool = False  # the control flow is rewritten after a failed capture (``steps._remainder_left``)
    other_axes: str = "static"
    ops: OpSupport | None = None
    hooks: tuple[Patch, ...] = ()
    top: list = dataclasses.field(default_factory=list)
    params: list = dataclasses.field(default_factory=list)
    strings: frozenset = frozenset()
    declared: list[DeclaredDim] = dataclasses.field(default_factory=list)
    names: list[str] = dataclasses.field(default_factory=list)
    leaves: Mapping[str, Any] = dataclasses.field(default_factory=lambda: FROZEN)
    related: Mapping[str, sympy.Expr] = dataclasses.field(default_factory=lambda: FROZEN)
    static: frozenset = frozenset()  # (input name, axis) of Dim.AUTO axes the model fixes: traced static
    given: tuple | None = None  # the user's (args, kwargs) when a larger example is traced (``enlarged``)
    traced_at: tuple = ()  # ((dim name, size), ...) the example was enlarged to, in order (``enlarged``)
    enlarged_after: Exception | None = None  # an earlier capture's failure that enlarged it (``capture``)
    within: Mapping[str, tuple] = dataclasses.field(default_factory=lambda: FROZEN)  # dim -> (min, max): one piece
    fallback_seconds: float | None = None  # the time bound of a fallback's torch.export call (None: none)
    fallback: bool = False  # the capture is itself a fallback: its first trace is bounded too

    @classmethod
    def make(cls, model: torch.nn.Module, args: tuple, kwargs: dict, dynamic_shapes: Any, *, relations: dict | None,
             **options: Any) -> "Request":
        """Normalize the spec, name the inputs and their declared dims, parse the relations.

        Raises:
            DynamicShapesError: a malformed spec, unknown ``other_axes``, or a relation that names
                unknown dims or does not hold at the example.
        """
        if options.get("other_axes", "static") not in ("static", "auto"):
            raise DynamicShapesError(f"other_axes must be 'static' or 'auto', not {options['other_axes']!r}")
        top = signature_names(model, args, kwargs)
        dynamic_shapes = one_dim_per_name(torch_form(dynamic_shapes, model, args, kwargs))
        within = dict(options.pop("within", None) or {})
        single = {n for n, (lo, hi) in within.items() if lo == hi}  # a piece of one size: the dim static there
        if single:
            dynamic_shapes = without_dims(dynamic_shapes, single)
            relations = pinned_relations(relations, {n: within[n][0] for n in single})
        options["within"] = {n: r for n, r in within.items() if n not in single}
        args, kwargs = distinct_tensors(args, kwargs)
        request = cls(model, args, kwargs, dynamic_shapes, top=top, params=bound_parameters(model, args, kwargs, top),
                      strings=frozenset(string_names(dynamic_shapes)),
                      **options)
        declared = declared_dims(top, request.per_input(to_dims(dynamic_shapes, {})), set(request.strings))
        flat = flat_names(top)
        leaves = MappingProxyType({f: leaf for f, leaf, _ in flat})
        relations = {**implied_relations(top, declared, relations), **(relations or {})}
        related = _relations(relations, declared, leaves)
        return dataclasses.replace(request, declared=declared, names=[f for f, _, _ in flat], leaves=leaves,
                                   related=MappingProxyType(related))

    def per_input(self, spec: Any) -> dict[str, Any]:
        """``spec`` (Dims) per top-level input, caches expanded, axes positive, ``other_axes`` applied."""
        per = expand_caches(self.top, spec_for(spec, self.top, self.params))
        normalized = {n: positive_axes(v, per.get(n)) for n, v in self.top}
        if self.other_axes == "auto":
            normalized = {n: other_axes_auto(v, normalized[n]) for n, v in self.top}
        return normalized

    def torch_spec(self, ranges: Mapping[str, tuple], derived: Mapping[str, tuple]) -> Any:
        """The ``dynamic_shapes`` torch.export is given: the user's, with ``ranges`` and ``derived``."""
        spec = to_dims(self.dynamic_shapes, {}, dict(ranges), dict(derived))
        normalized = self.per_input(spec)
        for name, axis in self.static:
            normalized[name] = _static_axis(normalized.get(name), axis)
        normalized = {n: _nones_like(v) if normalized.get(n) is None else normalized[n] for n, v in self.top}
        if has_variadic(self.params):
            return gather(normalized, self.params)
        if isinstance(spec, (list, tuple)):
            return type(spec)(normalized[n] for n, _ in self.top)
        if isinstance(spec, dict) or self.other_axes == "auto":
            return {n: normalized[n] for n, _ in self.top}
        return spec

    def enlarged(self, name: str, size: int) -> "Request":
        """This request with the example tiled along every axis declared ``name`` to ``size`` (its
        values repeated from the start, so token ids, masks and features stay values the model
        takes); the user's example is kept as ``given`` (what capture hands forward)."""
        replaced = {}
        for d in self.declared:
            leaf = self.leaves.get(d.input_name)
            if d.name != name or not isinstance(leaf, torch.Tensor) or leaf.shape[d.axis] == 0:
                continue
            t = replaced.get(id(leaf), leaf)
            reps = -(-size // t.shape[d.axis])
            replaced[id(leaf)] = torch.cat([t] * reps, dim=d.axis).narrow(d.axis, 0, size)
        args = pytree.tree_map(lambda v: replaced.get(id(v), v), self.args)
        kwargs = pytree.tree_map(lambda v: replaced.get(id(v), v), self.kwargs)
        top = signature_names(self.model, args, kwargs)
        leaves = MappingProxyType({f: leaf for f, leaf, _ in flat_names(top)})
        return dataclasses.replace(self, args=args, kwargs=kwargs, top=top, leaves=leaves,
                                   params=bound_parameters(self.model, args, kwargs, top),
                                   given=self.given or (self.args, self.kwargs),
                                   traced_at=self.traced_at + ((name, size),))

    def example_size(self, d: DeclaredDim) -> int | None:
        leaf = self.leaves.get(d.input_name)
        return int(leaf.shape[d.axis]) if isinstance(leaf, torch.Tensor) else None

    @property
    def small(self) -> bool:
        """A declared axis has size 0 or 1 in the example inputs."""
        return any(self.example_size(d) in (0, 1) for d in self.declared)


def _nones_like(value: Any) -> Any:
    """The spec of an input without dynamic dims in torch.export's by-name form: None for a tensor,
    the container's structure of Nones for a tuple, list or dict of them (torch refuses a plain
    None there: ``inputs['pair']`` is a tuple, but ``dynamic_shapes['pair']`` is not)."""
    if isinstance(value, (list, tuple)) and not is_cache(value) and not hasattr(value, "_fields"):
        return type(value)(_nones_like(v) for v in value)
    if isinstance(value, dict) and type(value) is dict:
        return {k: _nones_like(v) for k, v in value.items()}
    return None


def _static_axis(spec: Any, axis: int) -> Any:
    """One input's spec with ``axis`` static (``Dim.STATIC``)."""
    if isinstance(spec, dict):
        return {**spec, axis: Dim.STATIC}
    if isinstance(spec, (list, tuple)) and axis < len(spec):
        return type(spec)(Dim.STATIC if i == axis else v for i, v in enumerate(spec))
    return spec


def _relations(relations: dict | None, declared: list[DeclaredDim], leaves: Mapping[str, Any]) -> dict:
    """The user's relations parsed, checked against the declared dims and the example's sizes."""
    if not relations:
        return {}
    related = parse_relations(relations, {d.name for d in declared})
    example = {d.name: int(leaves[d.input_name].shape[d.axis]) for d in declared
               if isinstance(leaves.get(d.input_name), torch.Tensor)}
    wrong = broken(related, example)
    if wrong:
        sizes = ", ".join(f"{n}={v}" for n, v in example.items())
        raise DynamicShapesError(f"the example inputs do not satisfy the relation {'; '.join(wrong)} ({sizes})",
                                 hint="give example inputs whose sizes satisfy the relations, or correct the relation")
    return related


@dataclasses.dataclass(frozen=True)
class Traced:
    """What one torch.export call gave, and what was recorded while it traced.

    ``program`` or ``exception`` (torch's) and ``error`` (the ``ExportError`` it means for the
    user, ``capture.classify``); ``violation``: a range violation torch found after tracing
    (deferred: the program is kept); ``output``: what was printed while it traced (torch's graph
    dumps on a failure), kept for the error's detail."""

    program: torch.export.ExportedProgram | None = None
    exception: BaseException | None = None
    error: ExportError | None = None
    violation: Exception | None = None
    records: tuple[Specialization, ...] = ()
    events: tuple[GuardEvent, ...] = ()
    unbacked: tuple[Unbacked, ...] = ()
    output: str = ""

    @property
    def text(self) -> str:
        return str(self.exception) if self.exception is not None else ""


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One step as the capture loop ran it: whether it applied (returned a new state), and what it
    did or why it did not apply."""

    step: str
    applied: bool
    why: str

    def __str__(self) -> str:
        return f"{self.step}: {'' if self.applied else 'skipped: '}{self.why}"


@dataclasses.dataclass(frozen=True)
class CaptureState:
    """The request and what the steps have learned and decided so far.

    Attributes:
        request: what the user asked (``Request``); a step may replace its ``model``.
        ranges: dim name -> (min, max) torch.export is given for it (narrowed from the declared one).
        promised: dim name -> (min, max) the export holds for (torch's 0/1 specializations kept).
        derived: dim name -> (base, k, c): torch relates it to another, ``k*base + c``.
        narrowed: dim name -> the guards its narrowing became (adopted, kept).
        related: dim name -> its expression over other dims: the user's relations, and those torch
            derived once adopted.
        implied: dim name -> the range torch is given for a related dim (``past + seq`` -> 4), or for
            the dim of a piece (``Request.within``): given, not adopted.
        oblivious: torch reasons size-obliviously (``backed_size_oblivious``) about sizes 0 and 1.
        patches: patches steps added, installed by every later trace.
        trace: the last torch.export call (None: it is to be called).
        traces: how many times torch.export was called.
        first_failure: the first failure no step could resolve by a relation or a range decision
            (the error raised when no step resolves the last one).
        guards, variables: the decisions once a program was captured (None before).
        attempts: the steps as they ran.
        answered: the last failed trace a fallback retraced after (what a retrace stopped at its time
            bound says it answered: ``capture.tracing.stopped``).
    """

    request: Request
    ranges: Mapping[str, tuple] = dataclasses.field(default_factory=lambda: FROZEN)
    promised: Mapping[str, tuple] = dataclasses.field(default_factory=lambda: FROZEN)
    derived: Mapping[str, tuple] = dataclasses.field(default_factory=lambda: FROZEN)
    narrowed: Mapping[str, tuple[Guard, ...]] = dataclasses.field(default_factory=lambda: FROZEN)
    related: Mapping[str, sympy.Expr] = dataclasses.field(default_factory=lambda: FROZEN)
    implied: Mapping[str, tuple] = dataclasses.field(default_factory=lambda: FROZEN)
    oblivious: bool = False
    patches: tuple[Patch, ...] = ()
    trace: Traced | None = None
    traces: int = 0
    first_failure: Traced | None = None
    guards: tuple[Guard, ...] | None = None
    variables: Mapping[Any, SizeVar] | None = None
    attempts: tuple[Attempt, ...] = ()
    why: str = ""
    answered: Traced | None = None

    @property
    def program(self) -> torch.export.ExportedProgram | None:
        return self.trace.program if self.trace is not None else None

    @property
    def failed(self) -> bool:
        """The last trace failed (torch.export raised, or a deferred violation could not be decided)."""
        return self.trace is not None and self.trace.program is None

    def but(self, why: str, **changes: Any) -> "CaptureState":
        """A new state with ``changes`` (mappings frozen), saying ``why`` it changed."""
        frozen = {k: MappingProxyType(dict(v)) if isinstance(v, Mapping) else v for k, v in changes.items()}
        return dataclasses.replace(self, why=why, **frozen)

    def retrace(self, why: str, **changes: Any) -> "CaptureState":
        """``but(...)``, with torch.export to be called again (the loop goes back to ``Trace``)."""
        answered = self.trace if self.failed else self.answered
        return self.but(why, trace=None, answered=answered, **changes)

    def after(self, step: str, outcome: "CaptureState | str") -> "CaptureState":
        """The state after the step named ``step`` ran: its new state, or this one with the reason
        it did not apply."""
        if isinstance(outcome, CaptureState):
            return dataclasses.replace(outcome, attempts=self.attempts + (Attempt(step, True, outcome.why),))
        return dataclasses.replace(self, attempts=self.attempts + (Attempt(step, False, outcome),))
