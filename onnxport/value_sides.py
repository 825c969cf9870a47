"""A model whose code branches on a state tensor's value, exported one side at a time and joined
under ONNX ``If`` on the condition, computed from the inputs.

A streaming step reads a counter or a flag from its state and branches on it (ESPnet's
contextual-block encoders: ``if n_processed_blocks == 0: y_length += offset``, the first step
emitting more frames). torch.export cannot decide such a branch; the rewrite into ``torch.cond``
cannot hold it where the sides return outputs of other shapes or structures, or write into tensors
made before the branch. Yet each side is a program (``pieces.py`` does the same for a branch on a
size):

- the condition is traced on its own (``capture.value_sides.ConditionOf``: the tensor of the first
  data-dependent bool the model reads), and must read one-element integer or bool inputs only (a
  counter, a flag: the state), else the branch is refused as before, naming its line;
- the example's side is found by running the model in eager mode; an input set of the other side is
  the example with one state input given its other truth value (``rewrite.state_branches.
  state_variants``: a flag negated, a counter set to 0, or to 1 where it was 0);
- each side is exported at its inputs with every data-dependent bool answered as that side
  (``capture.value_sides.SideOf``), through the same stages (``stages.export``);
- every line the sides answered must read the condition's truth in eager mode at both input sets
  (``capture.value_sides.reads``): a second condition on other data is refused, not joined wrongly;
- the models are joined by ``join_pieces.join_on``: the condition's nodes, then one ``If``.

The result's ``pieces`` are the two sides (``ValueSide``), each validated at its own example
through the joined model (``verify.pieces``), so that validation compares both sides.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import onnx
import torch

from onnxport.errors import DataDependentError, ExportError
from onnxport.rewrite.state_branches import is_state, state_variants


@dataclasses.dataclass(frozen=True)
class ValueSide:
    """One side of a branch on a state's value: where ``condition`` (the ``if``'s line) is ``holds``;
    ``own``: the user's example takes it."""

    condition: str
    holds: bool
    own: bool

    def sizes_of(self, sizes: list[dict]) -> list[dict]:
        """The size sets (``{dim: size}``) of ``sizes`` this side is validated at (``verify.pieces``):
        all of them on the example's side, none on the other (no size tells which side runs)."""
        return list(sizes) if self.own else []

    def __str__(self) -> str:
        return f"where the condition at {_said(self.condition)} is {self.holds}"


def applies(error: ExportError, args: tuple, kwargs: dict) -> bool:
    """Whether ``error`` refuses a branch on a bool read from the inputs' data (a tensor's truth) of a
    model given a state input (a one-element integer or bool tensor) the branch may read."""
    import torch.utils._pytree as pytree


    return isinstance(error, DataDependentError) and bool(error.bool_of_data) and \
        any(is_state(t) for t in pytree.tree_leaves((args, kwargs)))


def refused(error: ExportError, why: str) -> ExportError:
    """``error`` with its fix saying why exporting each side of the branch on its own did not help."""
    tried = f"exporting each side of the branch on its own did not help ({why})"
    return error.with_hint(f"{error.hint}; {tried}" if error.hint else tried)


def _truth(seen: list[tuple[str, bool]], where: str) -> bool | None:
    """The truth first read at the line ``where`` among ``seen`` (``capture.value_sides.reads``), or
    None where none is."""
    return next((truth for line, truth in seen if line == where), None)


def inputs_read(graph: onnx.GraphProto) -> list[str]:
    """The names of ``graph``'s inputs its outputs depend on, in the inputs' order: read by a node
    that makes an output, or by a node within one of its subgraphs at any depth (an ``If`` within an
    ``If`` reads the outer graph's values by name)."""
    made = {o: n for n in graph.node for o in n.output}
    needed, todo = set(), [o.name for o in graph.output]
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo += _node_reads(made[name]) if name in made else []
    return [i.name for i in graph.input if i.name in needed]


def _node_reads(node: onnx.NodeProto) -> list[str]:
    """The names ``node`` reads: its inputs, and those its subgraphs' nodes read, at any depth."""
    names = [i for i in node.input if i]
    for attr in node.attribute:
        for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
            names += [r for inner in sub.node for r in _node_reads(inner)]
    return names


def _states_read(condition: Any) -> tuple[list[str], list[str]]:
    """The inputs the condition's ONNX model reads (``inputs_read``): ``(state inputs, others)``; a
    state is a one-element integer or bool tensor in the example (``state_branches.is_state``)."""
    examples = {inp.name: inp.example for inp in condition.captured.inputs}
    read = inputs_read(condition.model_proto.graph)
    return [n for n in read if is_state(examples.get(n))], [n for n in read if not is_state(examples.get(n))]


def export_by_value(error: ExportError, module: torch.nn.Module, args: tuple, kwargs: dict,
                    condition_of: Callable[[torch.nn.Module, tuple, dict], Any],
                    export_side: Callable[[torch.nn.Module, tuple, dict], Any]) -> tuple[Any, list]:
    """The condition's export and each side's, ``(condition, [(ValueSide, result), ...])`` (the side
    that holds first).

    ``condition_of(model, args, kwargs)``: the stages up to finalize on ``model`` (a
    ``capture.value_sides.ConditionOf``); ``export_side(model, args, kwargs)``: the whole export of one
    side (a ``capture.value_sides.SideOf``).

    Raises ``error``, its fix saying why, when the condition reads other than state inputs, no input
    set reaches the other side, a side fails to export, or a line a side answered reads another
    condition than the first."""
    from onnxport.capture.value_sides import condition_of as traced_condition, reads, side_of

    probe = traced_condition(module)
    try:
        condition = condition_of(probe, args, kwargs)
    except ExportError as failed:
        raise refused(error, f"the condition alone failed to export: {failed.summary}") from None
    where = probe.answered[0][0]
    said = _said(where)
    states, others = _states_read(condition)
    if others or not states:
        raise refused(error, f"the condition at {said} reads {', '.join(others) or 'no input'}, not only one-element "
                      f"integer or bool inputs (a counter or a flag of the state)") from None
    example = reads(module, args, kwargs)  # each input set runs once in eager mode: its reads serve both checks
    own = _truth(example, where)
    if own is None:
        raise refused(error, f"eager PyTorch does not read the condition at {said} on the example") from None
    variants = ((a, kw, reads(module, a, kw)) for _, a, kw in state_variants(args, kwargs))
    other = next(((a, kw, seen) for a, kw, seen in variants if _truth(seen, where) is (not own)), None)
    if other is None:
        raise refused(error, f"no state input given its other value (a counter set to 0, or to 1 where it was 0, a "
                      f"flag negated) makes the condition at {said} {not own}: give an example whose state makes it "
                      f"{not own}, from which those values may reach the side where it is {own}") from None
    inputs = {own: (args, kwargs, example), not own: other}
    sides = []
    for holds in (True, False):
        model = side_of(module, holds)
        try:
            sides.append((ValueSide(where, holds, holds == own), export_side(model, *inputs[holds][:2]), model))
        except ExportError as failed:
            raise refused(error, f"the side where the condition at {said} is {holds} failed: {failed.summary}") \
                from None
    lines = {w for _, _, m in sides for w, _ in m.answered}
    for holds in (True, False):  # every line a side answered reads the condition's truth there
        wrong = next(((w, t) for w, t in inputs[holds][2] if w in lines and t != holds), None)
        if wrong is not None:
            raise refused(error, f"the model reads another condition at {_said(wrong[0])} ({wrong[1]} where the "
                          f"one at {said} is {holds}): each side assumes one condition") from None
    return condition, [(side, result) for side, result, _ in sides]


def joined(module: torch.nn.Module, condition: Any, sides: list) -> Any:
    """One ``ExportResult``: the sides' models joined under ``If`` on the condition
    (``join_pieces.join_on``), the example's side as its base, ``module`` the eager model, each
    side kept in ``pieces`` with the joined model (validated at its own example); its guards those
    of both sides (a condition one side adopts is stated for the joined model: no size can tell
    which side runs), its rewrite notes those of both sides, each once."""
    from onnxport.join_pieces import join_on, joined_model

    (_, then), (_, other) = sides
    base = next(r for s, r in sides if s.own)
    model = joined_model(join_on(condition.model_proto, then.model_proto, other.model_proto), base.dim_names)
    kept = tuple((side, r.replace(model=model)) for side, r in sides)
    guards = list(base.captured.guards)
    guards += [g for _, r in sides if r is not base for g in r.captured.guards
               if all(g.text != h.text for h in base.captured.guards)]
    captured = dataclasses.replace(base.captured, guards=guards)
    notes = [n for _, r in sides for n in r.rewrite_notes]  # the sides rewrite the same code: each note once
    return base.replace(model=model, module=module, captured=captured, pieces=kept,
                        rewrite_notes=[n for k, n in enumerate(notes) if n not in notes[:k]])


def _said(where: str) -> str:
    """``file:line in func (`code`)`` of a ``file:line in func: code`` line."""
    place, _, code = where.partition(": ")
    return f"{place} (`{code}`)" if code else place


def notice(sides: list) -> str:
    """The warning saying the model was exported one side at a time."""
    where = _said(sides[0][0].condition)
    return (f"the model branches on a state's value at {where}, which torch.cond cannot hold: onnxport exported "
            f"each side on its own and joined them with ONNX If on the condition, computed from the inputs; "
            f"ExportResult.pieces lists them, validate() compares both")
