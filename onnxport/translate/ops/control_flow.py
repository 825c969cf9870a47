"""Higher-order control flow: scan -> Scan, cond -> If, while_loop -> Loop, map -> Scan; grad-mode
regions (wrap_with_set_grad_enabled) and disabled autocast regions (wrap_with_autocast) translated
in place.

Each body GraphModule becomes one local function (``translate/bodies.py``); the Scan/If/Loop body
graph calls it, passing the values the body needs from the outer scope (additional inputs, module
parameters, SymInts) by capture. Semantics: torch's higher-order ops
(``torch/_higher_order_ops/{scan,cond,while_loop,map}.py``) and the ONNX ``Scan``, ``If`` and
``Loop`` operator specs (opset 16+ / 11+ / 16+).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import ControlFlowError, UnsupportedOpError, last_user_frame
from onnxport.torch_behaviour import scan_accepts_zero_length
from onnxport.translate import bodies
from onnxport.translate.graph import set_meta_type
from onnxport.translate.registry import translates
from onnxport.translate.ops.pad import full_pads

aten = torch.ops.aten
hop = torch.ops.higher_order


def _val(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else node


def _scan_input_form(ctx, fx_arg: Any, value: ir.Value) -> tuple[ir.Value, int, int]:
    """(value, axis, direction) of one scanned input, folding the ``flip`` (reverse=True) and
    ``movedim`` / ``permute`` (dim != 0) that ``torch._higher_order_ops.scan.scan`` puts before the
    ``scan`` node into ``scan_input_directions`` / ``scan_input_axes``."""
    node, axis, direction = fx_arg, 0, 0
    if not isinstance(node, torch.fx.Node):
        return value, 0, 0
    if node.target is aten.flip.default and list(node.args[1]) == [0]:
        direction, node = 1, node.args[0]
    src = node.args[0] if node.op == "call_function" and node.args else None
    rank = len(_val(node).shape) if isinstance(_val(node), torch.Tensor) else None
    if node.target is aten.movedim.int and rank and node.args[2] % rank == 0:
        axis, node = node.args[1] % rank, src
    elif node.target is aten.permute.default and rank:
        perm = [p % rank for p in node.args[1]]
        d = perm[0]
        if perm == [d] + [i for i in range(rank) if i != d]:
            axis, node = d, src
    if node is fx_arg:
        return value, 0, 0
    try:
        return ctx.lookup(node), axis, direction
    except KeyError:
        return value, 0, 0


def _only_user(node: torch.fx.Node) -> torch.fx.Node | None:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _scan_output_form(getitem: torch.fx.Node) -> tuple[list[torch.fx.Node], int, int]:
    """(chain, axis, direction) of one stacked scan output: the ``flip`` (reverse=True) and
    ``movedim`` / ``permute`` (dim != 0) after it, when they are its only users in turn, folded into
    ``scan_output_directions`` / ``scan_output_axes``; ``chain`` ends with the node whose value the
    Scan output then is."""
    chain, axis, direction = [getitem], 0, 0
    user = _only_user(getitem)
    if user is not None and user.target is aten.flip.default and list(user.args[1]) == [0]:
        chain.append(user)
        direction = 1
        user = _only_user(user)
    val = _val(chain[-1])
    rank = len(val.shape) if isinstance(val, torch.Tensor) else 0
    if user is not None and rank > 1:
        if user.target is aten.movedim.int and user.args[1] % rank == 0 and user.args[2] % rank != 0:
            axis = user.args[2] % rank
        elif user.target is aten.permute.default:
            perm = [p % rank for p in user.args[1]]
            d = perm.index(0)
            if d and perm == list(range(1, d + 1)) + [0] + list(range(d + 1, rank)):
                axis = d
        if axis:
            chain.append(user)
    return chain, axis, direction


def _select(ctx, flag: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    """``a`` where ``flag`` else ``b`` (bools through And/Or: onnxruntime's Where has no bool kernel)."""
    if a.dtype == ir.DataType.BOOL:
        return ctx.op.Or(ctx.op.And(flag, a), ctx.op.And(ctx.op.Not(flag), b))
    return ctx.op.Where(flag, a, b)


def _guard_empty(ctx, init: list, xs: list, axes: list[int], out_axes: list[int], make_scan,
                 traced: Any = None) -> list:
    """``make_scan(ctx, xs)`` (the Scan node's outputs: carries then stacked outputs), made to
    accept a scan length of 0, which onnxruntime's Scan refuses (it cannot slice an empty axis).

    Guarded where PyTorch gives a result at length 0: a scan made from a Python loop by
    ``rewrite_control_flow`` (the loop runs zero times), and every scan where the installed torch's
    ``scan`` returns the initial carries and empty outputs (torch 2.14 and later;
    ``torch_behaviour.scan_accepts_zero_length``). Where it raises (torch 2.13), and for ``map``, which
    raises on every release, a model that raises in onnxruntime as PyTorch does needs no guard. When
    the length ``L`` along ``axes[0]`` of
    ``xs[0]`` is not a static nonzero size, the scanned inputs get one row of ones appended when
    ``L == 0`` (so the Scan runs once), the stacked outputs keep their first ``L`` rows along
    ``out_axes`` and the carries are the initial ones when ``L == 0``: what a loop of no iterations
    gives. ``traced``: the FX fake tensor of the first scanned input (scanned along its axis 0); no
    guard where the export promises ``L >= 1``.
    """
    if not xs or not (ctx.options.get("rewritten_loops") or scan_accepts_zero_length()):
        return make_scan(ctx, xs)
    length = xs[0].shape[axes[0]] if xs[0].shape is not None else None
    if isinstance(length, int) and length > 0:
        return make_scan(ctx, xs)
    if isinstance(traced, torch.Tensor) and traced.dim() > 0 and not ctx.may_be_empty(traced.shape[0]):
        return make_scan(ctx, xs)
    n = len(init)
    steps = ctx.dim(xs[0], axes[0])
    empty = ctx.op.Equal(steps, ctx.const(np.array(0, dtype=np.int64)))
    one_more = ctx.op.Cast(empty, to=ir.DataType.INT64)
    padded = []
    for x, axis in zip(xs, axes):
        pads = full_pads(ctx, ctx.rank(x), [(axis, 0, one_more)])
        out = ctx.op.Pad(x, pads, ctx.const(np.array(1, dtype=x.dtype.numpy())))
        out.type = x.type
        padded.append(out)
    outs = make_scan(ctx, padded)
    carries = [_select(ctx, empty, c, out) for c, out in zip(init, outs[:n])]
    end = ctx.shape_list([steps])
    ys = [ctx.op.Slice(y, ctx.const([0]), end, ctx.const([axis])) for y, axis in zip(outs[n:], out_axes)]
    return carries + ys


@translates(hop.scan)
def scan(ctx, combine_fn, init, xs, additional_inputs=()):
    """scan(combine_fn, init: list[Tensor], xs: list[Tensor], additional_inputs) -> carry + ys.

    ``combine_fn(*carry, *x_slices, *additional_inputs) -> (*next_carry, *y_slices)``. Becomes one
    ONNX ``Scan``: the carries are its state variables, ``xs`` its scan inputs and the ``ys`` its
    scan outputs, with the ``movedim`` and ``flip`` that ``dim`` and ``reverse`` add around the
    scan node folded into ``scan_input_axes`` / ``scan_input_directions`` and
    ``scan_output_axes`` / ``scan_output_directions``; additional inputs are captured by the Scan
    body from the outer graph.

    Raises:
        ControlFlowError: combine_fn returns one of its inputs without ``.clone()``.
    """
    init, xs, extra = list(init), list(xs), list(additional_inputs)
    node = ctx.current_node
    body = bodies.body_function(ctx, combine_fn, "scan_body", node)
    n, m = len(init), len(xs)
    k = len(body.output_vals) - n
    fx_xs = list(node.args[2]) if node is not None else [None] * m
    forms = [_scan_input_form(ctx, a, v) for a, v in zip(fx_xs, xs)]
    xs = [f[0] for f in forms]
    axes, directions = [f[1] for f in forms], [f[2] for f in forms]
    getitems = {u.args[1]: u for u in node.users if u.target is operator.getitem} if node is not None else {}
    out_forms = [_scan_output_form(getitems[n + j]) if n + j in getitems else ([], 0, 0) for j in range(k)]
    out_axes, out_dirs = [f[1] for f in out_forms], [f[2] for f in out_forms]
    def make_scan(c, xs_):
        graph = bodies.subgraph(c, "scan_graph", [p.meta.get("val") for p in body.placeholders[:n + m]],
                                lambda sub, ins: bodies.call_body(sub, body, list(ins) + extra))
        outs = c.op.Scan(*init, *xs_, body=graph, num_scan_inputs=m,
                         scan_input_axes=axes if any(axes) else None,
                         scan_input_directions=directions if any(directions) else None,
                         scan_output_axes=out_axes if any(out_axes) else None,
                         scan_output_directions=out_dirs if any(out_dirs) else None,
                         _outputs=n + k)
        return [outs] if n + k == 1 else list(outs)

    outs = _guard_empty(ctx, init, xs, axes, out_axes, make_scan, _val(fx_xs[0]) if fx_xs else None)
    for j, (chain, axis, direction) in enumerate(out_forms):
        if axis or direction:
            # the Scan output already is the value of the chain's last node: bind the chain to it
            for fx in chain:
                ctx.values[fx] = outs[n + j]
            set_meta_type(outs[n + j], _val(chain[-1]), ctx.dim_namer)
            outs[n + j] = None  # only reachable through the bound chain
    return outs


def _predicate(ctx, pred: Any) -> ir.Value:
    if isinstance(pred, ir.Value):
        return pred if pred.dtype == ir.DataType.BOOL else ctx.cast(pred, ir.DataType.BOOL)
    if isinstance(pred, (bool, int, np.bool_)):
        return ctx.const(np.array(bool(pred)))
    raise ControlFlowError(f"cannot use {type(pred).__name__} {pred!r} as a cond predicate",
                           hint="the predicate must be a bool tensor with one element or a SymBool")


@translates(hop.cond)
def cond(ctx, pred, true_fn, false_fn, operands=()):
    """cond(pred, true_fn, false_fn, operands) -> outputs of the branch taken.

    ``pred`` is a one-element bool tensor or a SymBool (``x.shape[0] > 4``, a 0-d bool value).
    Becomes ONNX ``If``: each branch graph has no inputs, captures the operands from the outer
    scope and calls the branch's function.
    """
    operands = list(operands)
    node = ctx.current_node
    then_body = bodies.body_function(ctx, true_fn, "cond_then", node)
    else_body = bodies.body_function(ctx, false_fn, "cond_else", node)
    k = len(then_body.output_vals)
    then_graph = bodies.subgraph(ctx, "then_graph", [], lambda sub, ins: bodies.call_body(sub, then_body, operands))
    else_graph = bodies.subgraph(ctx, "else_graph", [], lambda sub, ins: bodies.call_body(sub, else_body, operands))
    outs = ctx.op.If(_predicate(ctx, pred), then_branch=then_graph, else_branch=else_graph, _outputs=k)
    return [outs] if k == 1 else list(outs)


def _loop_condition(ctx, value: ir.Value) -> ir.Value:
    value = value if value.dtype == ir.DataType.BOOL else ctx.cast(value, ir.DataType.BOOL)
    if value.shape is not None and len(value.shape) == 0:
        return value
    out = ctx.op.Reshape(value, ctx.const(np.array([], dtype=np.int64)))
    out.type, out.shape = ir.TensorType(ir.DataType.BOOL), ir.Shape([])
    return out


@translates(hop.while_loop)
def while_loop(ctx, cond_fn, body_fn, carried_inputs, additional_inputs=()):
    """while_loop(cond_fn, body_fn, carried_inputs, additional_inputs) -> final carried values.

    ``cond_fn(*carried, *additional) -> bool`` and ``body_fn(*carried, *additional) -> carried``.
    Becomes ONNX ``Loop`` with no trip count: its condition is ``cond_fn`` on the initial values,
    then ``cond_fn`` on the new values at the end of each iteration; zero iterations when the
    condition is false at first.
    """
    extra = list(additional_inputs)
    node = ctx.current_node
    cond_body = bodies.body_function(ctx, cond_fn, "loop_cond", node)
    step_body = bodies.body_function(ctx, body_fn, "loop_body", node)
    carried = [bodies.as_input(ctx, c, p) for c, p in zip(carried_inputs, step_body.placeholders)]
    first = _loop_condition(ctx, bodies.call_body(ctx, cond_body, carried + extra)[0])

    def build(sub, ins):
        new = bodies.call_body(sub, step_body, list(ins[2:]) + extra)
        again = _loop_condition(sub, bodies.call_body(sub, cond_body, new + extra)[0])
        return [again] + new

    vals = [(ir.DataType.INT64, []), (ir.DataType.BOOL, [])] + \
        [p.meta.get("val") for p in step_body.placeholders[:len(carried)]]
    graph = bodies.subgraph(ctx, "loop_graph", vals, build)
    outs = ctx.op.Loop(None, first, *carried, body=graph, _outputs=len(carried))
    return [outs] if len(carried) == 1 else list(outs)


@translates(hop.map_impl)
def map_impl(ctx, f, xs, args=()):
    """map_impl(f, xs: list[Tensor], args) -> stacked outputs of ``f(*x_slices, *args)``.

    Becomes an ONNX ``Scan`` with no state variables: every ``xs`` is a scan input along axis 0 and
    every output a scan output; ``args`` are captured from the outer graph.
    """
    xs, extra = list(xs), list(args)
    body = bodies.body_function(ctx, f, "map_body", ctx.current_node)
    m, k = len(xs), len(body.output_vals)
    def make_scan(c, xs_):
        graph = bodies.subgraph(c, "map_graph", [p.meta.get("val") for p in body.placeholders[:m]],
                                lambda sub, ins: bodies.call_body(sub, body, list(ins) + extra))
        outs = c.op.Scan(*xs_, body=graph, num_scan_inputs=m, _outputs=k)
        return [outs] if k == 1 else list(outs)

    # no guard for a length of 0: PyTorch's map raises there ("Leading dimensions of mapped xs cannot be 0")
    return make_scan(ctx, xs)


@translates(hop.wrap_with_set_grad_enabled)
def wrap_with_set_grad_enabled(ctx, enable, body, *args):
    """wrap_with_set_grad_enabled(bool enable, GraphModule body, *args) -> the body's outputs: a
    ``with torch.no_grad()`` (or ``torch.enable_grad()``) region of ``forward``, which torch.export
    keeps as a body. Grad mode changes no value computed, so the body is translated in place."""
    return bodies.inline(ctx, body, args)


@translates(hop.wrap_with_autocast)
def wrap_with_autocast(ctx, device_type, dtype, enabled, cache_enabled, body, *args):
    """wrap_with_autocast(str device_type, dtype?, bool enabled, bool? cache_enabled, GraphModule
    body, *args) -> the body's outputs: a ``with torch.autocast(...)`` region of ``forward``
    (timm's EfficientViT runs its attention under ``torch.autocast(device_type, enabled=False)``).
    Disabled, or for a device other than the CPU the model runs on, autocast changes no dtype: the
    body is translated in place.

    Raises:
        UnsupportedOpError: autocast enabled on the CPU (eager PyTorch would compute the region's
            matmuls and convolutions in ``dtype``).
    """
    if enabled and str(device_type) == "cpu":
        raise UnsupportedOpError(
            f"torch.autocast('cpu', dtype={dtype}) enabled inside forward: eager PyTorch computes that region "
            f"in {dtype}, which the export does not reproduce",
            hint="disable autocast for the export (torch.autocast(..., enabled=False)), or cast the region's "
                 "inputs and weights to the dtype explicitly", where=_body_line(body))
    return bodies.inline(ctx, body, args)


def _body_line(body: Any) -> str | None:
    """The user's line of the first node of a body GraphModule that has one (a higher-order op's
    own node carries no stack trace)."""
    graph = getattr(body, "graph", None)
    for n in graph.nodes if graph is not None else []:
        if n.meta.get("stack_trace"):
            return last_user_frame(n.meta["stack_trace"])
    return None

