"""Building blocks of the fusion rules, written on onnxscript's pattern rewriter.

A fusion module states its rules as ``onnxscript.rewriter.pattern`` rewrite rules (target pattern,
check, replacement) and exposes them through a :class:`FusionPass`. The helpers here spell the
variations a formula takes once written by hand: both operand orders of a commutative operator,
a scaling written as a product or a division, a number held by a 0-d or one-element constant.

Reference: onnxscript rewriter documentation
(https://microsoft.github.io/onnxscript/tutorial/rewriter/rewrite_patterns.html).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import onnxscript.optimizer
from onnxscript.rewriter import RewritePass, pattern

from onnxport.optimize._scopes import const_array

FLOAT_TYPES = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE})

_REL_TOL = 1e-3  # a formula's constants written with four significant digits still match


# ------------------------------------------------------------------------------- pattern pieces
def number(value: float):
    """A pattern matching a constant holding ``value`` (relative tolerance 1e-3), as a 0-d tensor
    or a one-element 1-D tensor."""
    return pattern.OrValue([pattern.Constant(value, rel_tol=_REL_TOL),
                            pattern.Constant([value], rel_tol=_REL_TOL)])


def either(op, op_type: str, a, b):
    """``op_type(a, b)`` or ``op_type(b, a)``: a commutative operator in either operand order."""
    build = getattr(op, op_type)
    return pattern.OrValue([build(a, b), build(b, a)])


def scaled(op, value, factor: float):
    """``value * factor`` in either order, or ``value / (1 / factor)``."""
    return pattern.OrValue([op.Mul(value, number(factor)), op.Mul(number(factor), value),
                            op.Div(value, number(1.0 / factor))])


def normalized(op, t, std, form: str):
    """``t / std`` (form ``"div"``), ``t * Reciprocal(std)`` (``"mul"``) or ``Reciprocal(std) * t``
    (``"rmul"``): the three ways a normalization divides by a standard deviation."""
    if form == "div":
        return op.Div(t, std)
    r = op.Reciprocal(std)
    return op.Mul(t, r) if form == "mul" else op.Mul(r, t)


NORMALIZED_FORMS = ("div", "mul", "rmul")


# ------------------------------------------------------------------------------- checks
def rank(value: ir.Value | None) -> int | None:
    """The rank of ``value`` when its shape is known, else None."""
    return None if value is None or value.shape is None else len(value.shape)


def keeps_rank(context, x: ir.Value) -> bool:
    """The value the match replaces has ``x``'s rank (when both are known): a one-element constant
    of a higher rank in the formula would have broadcast ``x`` to more axes."""
    out = context.output_values[0]
    return rank(out) is None or rank(x) is None or rank(out) == rank(x)


def reads_overridable_constant(context) -> bool:
    """A matched node reads an initializer that is also a graph input (the user may override it at
    run time: it is not a constant, though the pattern matcher sees its value)."""
    return any(v is not None and v.is_graph_input() and v.const_value is not None
               for node in context.nodes for v in node.inputs)


def trailing_axes(axes: ir.Value | None, x: ir.Value) -> int | None:
    """k when the constant ``axes`` of a reduction of ``x`` are its last k axes (any order,
    negative or not), else None."""
    arr = const_array(axes)
    r = rank(x)
    if arr is None or arr.dtype.kind not in "iu" or arr.size == 0 or r is None:
        return None
    norm = sorted(int(a) + r if a < 0 else int(a) for a in arr.reshape(-1))
    return len(norm) if norm == list(range(r - len(norm), r)) else None


def keeps_dims(node: ir.Node) -> bool:
    """A Reduce* node keeps the reduced axes (``keepdims`` defaults to 1)."""
    return node.attributes.get_int("keepdims", 1) == 1


def static_tail(value: ir.Value, k: int) -> list[int] | None:
    """The last ``k`` dims of ``value`` when they are all static ints."""
    r = rank(value)
    if r is None or r < k:
        return None
    tail = list(value.shape)[r - k:]
    return [int(d) for d in tail] if all(isinstance(d, int) for d in tail) else None


def shaped(value: ir.Value | None, dims: list[int]) -> bool:
    """``value``'s shape is exactly ``dims`` (static ints)."""
    return value is not None and value.shape is not None and list(value.shape) == dims


def ones(op, shape: list[int], dtype: ir.DataType) -> ir.Value:
    """A ``Constant`` of ones (a node, not an initializer: rules apply inside local functions)."""
    return op.Constant(value=ir.tensor(np.ones(shape, dtype=dtype.numpy())))


def all_ones(value: ir.Value | None) -> bool:
    """``value`` is a constant whose elements are all 1."""
    arr = const_array(value)
    return arr is not None and arr.size > 0 and bool(np.all(arr == 1))


# ------------------------------------------------------------------------------- rules and the pass
class Rule(pattern.RewriteRuleClassBase):
    """A fusion rule: ``pattern``, ``check`` and ``rewrite`` as in onnxscript's
    ``RewriteRuleClassBase``, plus ``root_op``, the operator type of the node the pattern ends with."""

    root_op: str = ""
    _built: pattern.RewriteRule | None = None

    def as_rule(self) -> pattern.RewriteRule:
        """This rule as a ``RewriteRule`` tried only at ``root_op`` nodes (built once: the pattern is
        compiled on construction)."""
        if self._built is None:
            self._built = _RootedRule(self.pattern, self.rewrite, self.check, name=self.name,
                                      remove_nodes=self.remove_nodes)
            self._built.root_op = self.root_op
        return self._built


class _RootedRule(pattern.RewriteRule):
    """A ``RewriteRule`` tried only at nodes of type ``root_op``: a rule set tries each of its rules
    at each node, and a failed match costs the matcher far more than this comparison."""

    root_op: str = ""

    def try_rewrite(self, model, graph_or_function, node, *args, **kwargs):
        """The replacement of the match ending at ``node``, or None (see ``RewriteRule.try_rewrite``)."""
        if node.op_type != self.root_op or node.domain != "":
            return None
        return super().try_rewrite(model, graph_or_function, node, *args, **kwargs)


class FusionPass(RewritePass):
    """Apply rewrite rules to the main graph, every subgraph (If/Loop/Scan bodies) and every local
    function (onnxscript's ``RewriteRuleSet.apply_to_model`` visits all three).

    The rules are tried only when the model holds one of the ``anchors`` operators (a rule set
    visits every node: a model without them is left at once). Constant nodes inside subgraphs
    are given their ``const_value`` first, so that constant patterns match there as in the main
    graph and functions.

    Args:
        rules: the fusion rules, tried in order at each node.
        anchors: ONNX-domain operator types of which every match holds at least one.
    """

    def __init__(self, rules: list[Rule], anchors: frozenset[str]):
        super().__init__([r.as_rule() for r in rules])
        self.anchors = anchors

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        """Rewrite every match in ``model``; ``modified`` when any rule applied."""
        graphs = [model.graph, *model.functions.values()]
        if not any(node.op_type in self.anchors and node.domain == ""
                   for graph in graphs for node in graph.all_nodes()):
            return ir.passes.PassResult(model, False)
        for graph in graphs:
            for subgraph in graph.subgraphs():
                onnxscript.optimizer.basic_constant_propagation(subgraph)
        return super().call(model)
