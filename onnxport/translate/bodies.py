"""Control-flow bodies: an FX body GraphModule becomes one ONNX local function, called from the
``Scan`` / ``If`` / ``Loop`` subgraph (or, for a body that runs once as it is, its nodes are
translated in place: ``inline``).

A body (the ``combine_fn`` of a scan, a cond branch, a while_loop condition or body, a map body) is
translated once into an ``onnx_ir.Function`` of the ``onnxport`` domain, named after its kind and a
structural hash of its graph: two identical bodies (the same Python function used twice, at the same
dtypes and dims) are one function. Every function input and output is typed (dtype and dims, with
the user's dimension names) from the FX placeholders' and outputs' ``meta["val"]``.

A function cannot see values of the graph calling it, so everything a body uses (additional inputs,
module parameters, SymInts) is a function input; the Scan/If/Loop subgraph passes those values,
which it captures from the outer scope. ``to_onnx(inline=True)`` inlines the functions into the
subgraphs afterwards (``finalize.py`` runs onnx-ir's ``InlinePass``, which descends into subgraphs).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Any, Sequence

import numpy as np
import onnx_ir as ir
import sympy
import torch

from onnxport.errors import ControlFlowError, user_source_line
from onnxport.translate import dtypes, symbolic
from onnxport.translate.context import TranslationContext
from onnxport.translate.graph import graph_output, set_meta_type, translate_nodes
from onnxport.translate.program import DOMAIN


@dataclasses.dataclass
class Body:
    """A translated body: the function and which of the body's placeholders are its inputs.

    ``takes[i]`` is True when placeholder ``i`` is a function input (a tensor or a SymInt); False
    for a Python constant (int, float, bool, None) the function holds as a constant.
    """

    function: ir.Function
    takes: list[bool]
    placeholders: list[torch.fx.Node]
    output_vals: list[Any]  # meta["val"] of each body output

    @property
    def name(self) -> str:
        return self.function.name


def placeholders(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The placeholder nodes of a body graph, in order."""
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def output_args(gm: torch.fx.GraphModule) -> list[Any]:
    """The flat output arguments of a body graph (FX nodes or Python constants)."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    args = out.args[0]
    return list(args) if isinstance(args, (list, tuple)) else [args]


# ------------------------------------------------------------------------------ structural hash
def _expr_key(val: Any) -> str:
    """A size's expression with the shape environment's replacements applied: two axes the
    capture tied (one declared name) read as one symbol."""
    expr = symbolic.expr_of(val)
    env = getattr(getattr(val, "node", None), "shape_env", None)
    return str(env.replace(expr) if env is not None and isinstance(expr, sympy.Basic) else expr)


def _meta_key(val: Any) -> Any:
    if isinstance(val, torch.Tensor):
        return ("T", str(val.dtype), tuple(_expr_key(d) for d in val.shape))
    if isinstance(val, (list, tuple)):
        return tuple(_meta_key(v) for v in val)
    if isinstance(val, (torch.SymInt, torch.SymBool, torch.SymFloat)):
        return ("S", type(val).__name__, _expr_key(val))
    return ("C", repr(val))


def _target_key(target: Any) -> str:
    if isinstance(target, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)):
        return str(target)
    mod = getattr(target, "__module__", None) or ""
    return f"{mod}.{getattr(target, '__qualname__', getattr(target, '__name__', repr(target)))}"


def _runtime_checks(gm: torch.fx.GraphModule) -> set:
    """The nodes that only compute torch's deferred runtime assertions (``_assert_scalar`` of an
    equality of sizes, and the sizes and comparisons only it reads): a body that holds them computes
    what one without them does."""
    out: set = set()
    for node in reversed(list(gm.graph.nodes)):
        if node.op == "call_function" and node.target in (torch.ops.aten._assert_scalar.default,
                                                           torch.ops.aten.sym_constrain_range_for_size.default):
            out.add(node)
        elif node.op == "call_function" and node.users and all(u in out for u in node.users):
            out.add(node)
    return out


def structural_key(gm: torch.fx.GraphModule) -> str:
    """A hash of a body graph's structure: ops, argument wiring, constants, nested bodies, and the
    dtype and dims of every value. Equal graphs (up to node names) give equal keys."""
    index: dict[torch.fx.Node, int] = {}
    parts: list[Any] = []

    def arg_key(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return ("N", index[a])
        if isinstance(a, (list, tuple)):
            return (type(a).__name__, tuple(arg_key(x) for x in a))
        if isinstance(a, dict):
            return ("D", tuple(sorted((str(k), arg_key(v)) for k, v in a.items())))
        if isinstance(a, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
            return ("E", str(a))
        return ("V", type(a).__name__, repr(a))

    checks = _runtime_checks(gm)
    for i, node in enumerate(n for n in gm.graph.nodes if n not in checks):
        index[node] = i
        if node.op == "get_attr":
            attr = getattr(gm, node.target)
            if isinstance(attr, torch.fx.GraphModule):
                parts.append(("get_attr", structural_key(attr)))
            elif isinstance(attr, torch.Tensor):
                data = attr.detach().cpu().contiguous().reshape(-1)  # a 0-d tensor has no byte view
                digest = hashlib.sha256(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"").hexdigest()
                parts.append(("get_attr", str(attr.dtype), tuple(attr.shape), digest))
            else:
                parts.append(("get_attr", repr(attr)))
            continue
        parts.append((node.op, _target_key(node.target) if node.op == "call_function" else "",
                      arg_key(node.args), arg_key(dict(node.kwargs)), _meta_key(node.meta.get("val"))))
    return hashlib.sha256(repr(parts).encode()).hexdigest()


# ------------------------------------------------------------------------------ functions
def _is_input_val(val: Any) -> bool:
    return isinstance(val, (torch.Tensor, torch.SymInt, torch.SymBool, torch.SymFloat))


def _typed_input(name: str, val: Any, namer) -> ir.Value:
    value = ir.Value(name=name)
    set_meta_type(value, val, namer)
    return value


def _register_symbols(ctx: TranslationContext, value: ir.Value, val: Any) -> None:
    """Let the body reuse its inputs for the symbols they carry (``sym_size`` of an input axis, a
    SymInt passed in) instead of recomputing them."""
    if isinstance(val, torch.Tensor):
        for axis, d in enumerate(val.shape):
            expr = symbolic.expr_of(d)
            if not isinstance(expr, int) and getattr(expr, "is_Symbol", False) and expr not in ctx.sym_sources:
                ctx.sym_sources[expr] = (value, axis)
    elif isinstance(val, torch.SymInt):
        expr = symbolic.expr_of(val)
        if not getattr(expr, "is_number", True):
            ctx.sym_values.setdefault(expr, value)


def body_function(ctx: TranslationContext, gm: torch.fx.GraphModule, kind: str, hop_node: Any = None) -> Body:
    """Translate ``gm`` into a local function (once per distinct body) and return it.

    Args:
        ctx: the context of the graph where the control-flow node stands.
        gm: the body GraphModule (a ``get_attr`` of the exported program).
        kind: ``scan_body``, ``cond_then``, ``cond_else``, ``loop_cond``, ``loop_body``, ``map_body``.
        hop_node: the FX node of the higher-order op (for error messages).

    Raises:
        ControlFlowError: the body returns one of its inputs unchanged (ONNX needs a new value;
            torch needs a ``.clone()`` there too), with the user's source line.
    """
    phs = placeholders(gm)
    outs_fx = output_args(gm)
    _check_aliasing(phs, outs_fx, kind, hop_node)
    name = f"{kind}_{structural_key(gm)[:12]}"
    takes = [_is_input_val(p.meta.get("val")) for p in phs]
    out_vals = [o.meta.get("val") if isinstance(o, torch.fx.Node) else o for o in outs_fx]
    hit = ctx.functions.get((DOMAIN, name))
    if hit is not None:
        return Body(hit, takes, phs, out_vals)

    namer = ctx.dim_namer
    child = TranslationContext(ctx.opset, functions=ctx.functions, options=ctx.options, name=name,
                               dim_namer=namer, registry=ctx.registry)
    inputs: list[ir.Value] = []
    for ph, take in zip(phs, takes):
        val = ph.meta.get("val")
        if not take:
            child.values[ph] = val
            continue
        value = _typed_input(ph.name, val, namer)
        inputs.append(value)
        child.values[ph] = value
        _register_symbols(child, value, val)
    results = translate_nodes(child, gm.graph)
    outputs: list[ir.Value] = []
    seen: set[ir.Value] = set()
    input_set = set(inputs)
    for value, val in zip(results, out_vals):
        value = graph_output(child, value, seen, input_set)
        set_meta_type(value, val, namer)
        outputs.append(value)
    graph = ir.Graph(inputs, outputs, nodes=child.nodes, opset_imports={"": ctx.opset}, name=name)
    if any(n.domain == DOMAIN for n in ir.traversal.RecursiveGraphIterator(graph)):
        graph.opset_imports[DOMAIN] = 1
    function = ir.Function(DOMAIN, name, graph=graph, attributes=[])
    ctx.functions[(DOMAIN, name)] = function
    return Body(function, takes, phs, out_vals)


def _check_aliasing(phs: list[torch.fx.Node], outs: list[Any], kind: str, hop_node: Any) -> None:
    ph_set = set(phs)
    for i, o in enumerate(outs):
        if isinstance(o, torch.fx.Node) and o in ph_set:
            base = re.sub(r"_\d+$", "", o.name)
            what = {"scan_body": "scan's combine_fn", "cond_then": "cond's true_fn", "cond_else": "cond's false_fn",
                    "loop_cond": "while_loop's cond_fn", "loop_body": "while_loop's body_fn",
                    "map_body": "map's function"}.get(kind, kind)
            raise ControlFlowError(
                f"the {what} returns its input {phs.index(o)} ({o.name!r}) unchanged as output {i}: "
                "a control-flow body must return new tensors, not alias its inputs",
                where=user_source_line(hop_node) if hop_node is not None else None,
                hint=f"return {base}.clone() instead of {base} in the body",
            )


def call_body(ctx: TranslationContext, body: Body, args: Sequence[Any]) -> list[ir.Value]:
    """Emit a call of ``body``'s function in ``ctx``; ``args`` has one item per body placeholder
    (values for the function inputs; items of constant placeholders are ignored). Returns the
    outputs, typed from the body's output metadata."""
    if len(args) != len(body.takes):
        raise ControlFlowError(f"{body.name} takes {len(body.takes)} inputs, {len(args)} given",
                               hint="this is a gap in onnxport's control-flow translation; report it")
    ins = [as_input(ctx, a, ph) for a, ph, take in zip(args, body.placeholders, body.takes) if take]
    n = len(body.output_vals)
    outs = ctx.emit(body.name, ins, num_outputs=n, domain=DOMAIN)
    outs = [outs] if n == 1 else list(outs)
    for o, val in zip(outs, body.output_vals):
        set_meta_type(o, val, ctx.dim_namer)
    return outs


def inline(ctx: TranslationContext, gm: torch.fx.GraphModule, args: Sequence[Any]) -> list[Any]:
    """Translate the nodes of ``gm`` into ``ctx`` itself, its placeholders bound to ``args``, and
    return its outputs. The body's nodes are unbound afterwards, so a body inlined twice is
    translated twice."""
    for ph, a in zip(placeholders(gm), args):
        ctx.values[ph] = a
    try:
        return translate_nodes(ctx, gm.graph)
    finally:
        for node in gm.graph.nodes:
            ctx.values.pop(node, None)


def as_input(ctx: TranslationContext, a: Any, ph: torch.fx.Node) -> ir.Value:
    """``a`` as a value for the body input ``ph``: a Python number (an int carry of a while_loop)
    becomes a constant of the placeholder's dtype."""
    if isinstance(a, ir.Value):
        return a
    val = ph.meta.get("val")
    if isinstance(val, torch.Tensor):
        return ctx.const(np.asarray(a, dtype=dtypes.onnx_dtype(val.dtype).numpy()))
    return ctx.const(np.asarray(a, dtype=np.bool_ if isinstance(a, bool) else np.int64))


def subgraph(ctx: TranslationContext, name: str, input_vals: Sequence[Any], build) -> ir.Graph:
    """Build a Scan/If/Loop body graph: typed inputs from ``input_vals`` (``meta["val"]``s or
    ``(dtype, dims)`` pairs), nodes emitted by ``build(sub_ctx, inputs) -> outputs``.

    The subgraph's context has ``ctx`` as parent: outer values are captured by reference.
    """
    sub = TranslationContext(ctx.opset, parent=ctx, functions=ctx.functions, options=ctx.options,
                             name=ctx.fresh_name(name))
    inputs = []
    for i, val in enumerate(input_vals):
        v = ir.Value(name=f"{sub.name}_in{i}")
        if isinstance(val, tuple) and len(val) == 2 and isinstance(val[0], ir.DataType):
            v.type = ir.TensorType(val[0])
            v.shape = ir.Shape(list(val[1]))
        else:
            set_meta_type(v, val, ctx.dim_namer)
        inputs.append(v)
    outputs = list(build(sub, inputs))
    seen: set[ir.Value] = set()
    fixed = []
    input_set = set(inputs)
    for o in outputs:
        if o in seen or o in input_set or o.producer() is None or o.producer() not in sub.nodes:
            typ, shape = o.type, o.shape
            o = sub.op.Identity(o)
            o.type, o.shape = typ, shape
        seen.add(o)
        fixed.append(o)
    return ir.Graph(inputs, fixed, nodes=sub.nodes, name=sub.name)
