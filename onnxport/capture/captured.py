"""What capture hands forward: the program, its user inputs with their examples and declared
dynamic dimensions, and the decisions on its shape guards.

``Captured.inputs`` is the one walk over the program's user inputs (placeholder, flat name, example
value) that translation and verification read.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch.utils import _pytree as pytree

from onnxport.capture.caches import may_be_empty
from onnxport.capture.dynamic_shapes import DeclaredDim
from onnxport.capture.guards.conditions import Guard, SizeVar, adopted_of


@dataclasses.dataclass(frozen=True)
class UserInput:
    """One user input of the captured program.

    ``name`` is the flat input name (``x``, ``batch_input_ids``), ``node`` the program's
    placeholder (``node.meta["val"]``: a fake tensor with symbolic sizes, or a Python constant),
    ``example`` the value the export was given."""

    name: str
    node: torch.fx.Node
    example: Any

    @property
    def value(self) -> Any:
        """The placeholder's traced value: a fake tensor with symbolic sizes, or a Python constant."""
        return self.node.meta.get("val")


@dataclasses.dataclass(frozen=True)
class Captured:
    """What capture hands to translation (a new ``Captured`` by ``dataclasses.replace``).

    Attributes:
        program: the ``torch.export.ExportedProgram``.
        input_names: flat names of the user inputs, in placeholder order (tensors and constants).
        declared: the axes the user declared dynamic.
        example: ``(args, kwargs)`` the export was given.
        guards: every condition on sizes the trace relies on, decided (``capture.guards``).
        variables: torch's symbol -> ``SizeVar``: the sizes the export holds for.
        relations: dim name -> its sympy expression over other dim names (``total = past + seq``),
            as the user declared them or torch derived them (``onnxport.capture.relations``).
        attempts: the capture steps as they ran (``capture.state.Attempt``: step, applied, why),
            printed by ``onnxport export --debug``.
        enlarged_from: the error of the trace at the user's example, where the program was traced at
            a larger one (``steps.TraceLargerExample``), or of the earlier capture that found the larger
            one (``capture.capture``'s ``enlarged_after``); None otherwise.
        strategy: how the program was captured: ``"non-strict"``, ``"strict"`` (torch.export's strict
            mode), ``"rewritten"`` (the model's control flow rewritten, ``onnxport.rewrite``) or
            ``"rewritten, strict"``; on request or after the model as given failed (``onnxport.stages.STRATEGIES``).
    """

    program: torch.export.ExportedProgram
    input_names: list[str]
    declared: list[DeclaredDim]
    example: tuple = ((), {})
    guards: list[Guard] = dataclasses.field(default_factory=list)
    variables: dict[Any, SizeVar] = dataclasses.field(default_factory=dict)
    relations: dict[str, Any] = dataclasses.field(default_factory=dict)
    attempts: tuple = ()
    enlarged_from: Exception | None = None
    strategy: str = "non-strict"

    @property
    def inputs(self) -> list[UserInput]:
        """The user inputs: flat name, placeholder and example value, in placeholder order."""
        nodes = user_placeholders(self.program)
        names = list(self.input_names) if len(self.input_names) == len(nodes) else program_input_names(self.program)
        leaves = pytree.tree_leaves(self.example)
        leaves = leaves + [None] * (len(nodes) - len(leaves))
        return [UserInput(n, node, leaf) for n, node, leaf in zip(names, nodes, leaves)]

    @property
    def empty_dims(self) -> set[str]:
        """Names of the dims that may be 0: the cached length of a key/value cache input
        (``onnxport.capture.caches.may_be_empty``), 0 at the first step of decoding."""
        ranks = {inp.name: inp.example.dim() for inp in self.inputs if isinstance(inp.example, torch.Tensor)}
        return {d.name for d in self.declared
                if may_be_empty(d.input_name) and d.input_name in ranks and d.axis == ranks[d.input_name] - 2}

    def adopted(self) -> list[Guard]:
        """The conditions adopted as constraints of the export (``time % 4 == 0``)."""
        return adopted_of(self.guards)


def user_placeholders(program: torch.export.ExportedProgram) -> list[torch.fx.Node]:
    """The placeholders of the program's user inputs, in order."""
    by_name = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    return [by_name.get(getattr(spec.arg, "name", None)) for spec in program.graph_signature.input_specs
            if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT]


def program_input_names(program: torch.export.ExportedProgram) -> list[str]:
    """The user inputs' placeholder names (``x``, ``lengths``), in order."""
    return [getattr(s.arg, "name", f"input_{i}") for i, s in enumerate(program.graph_signature.input_specs)
            if s.kind == torch.export.graph_signature.InputKind.USER_INPUT]


def expr_of(val: Any) -> Any:
    """The sympy expression behind a SymInt/SymBool/SymFloat (or the Python value itself)."""
    if isinstance(val, (torch.SymInt, torch.SymBool, torch.SymFloat)):
        return val.node.expr
    return val
