"""Walk an FX graph in order and translate each node with the registry."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import ExportError, TranslationError, UnsupportedOpError, user_source_line
from onnxport.metadata import FX_NODE_KEY
from onnxport.translate import clamped, dtypes, inplace, symbolic
from onnxport.translate.context import TranslationContext




def set_meta_type(value: ir.Value, val: Any, dim_name) -> None:
    """Give ``value`` the dtype and shape of an FX ``meta["val"]`` (FakeTensor or SymInt).

    ``dim_name(expr)`` renders a symbolic dimension (an int or a dim_param string).
    """
    if isinstance(val, torch.Tensor):
        try:
            value.type = ir.TensorType(dtypes.onnx_dtype(val.dtype))
        except KeyError:
            return
        value.shape = ir.Shape([dim_name(symbolic.expr_of(d)) for d in val.shape])
    elif isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
        value.type = ir.TensorType(ir.DataType.INT64)
        value.shape = ir.Shape([])
    elif isinstance(val, (torch.SymBool, bool)):
        value.type = ir.TensorType(ir.DataType.BOOL)
        value.shape = ir.Shape([])
    elif isinstance(val, (torch.SymFloat, float)):
        value.type = ir.TensorType(ir.DataType.DOUBLE)
        value.shape = ir.Shape([])


def graph_output(ctx: TranslationContext, value: Any, seen: set, inputs: set) -> ir.Value:
    """``value`` made fit to be one output of ``ctx``'s graph, and added to ``seen``.

    A Python number becomes a constant; a value already in ``seen`` (an earlier output), in
    ``inputs`` (graph inputs, initializers), with no producer, or made by a ``Constant`` goes
    through an ``Identity``, so that every output is its own node's output and can take its name.
    """
    if not isinstance(value, ir.Value):
        value = ctx.const(np.asarray(value))
    if value in seen or value in inputs or value.producer() is None or value.producer().op_type == "Constant":
        value = ctx.op.Identity(value)
    seen.add(value)
    return value


def _describe(node: torch.fx.Node) -> str:
    target = node.target
    return str(target) if isinstance(target, torch._ops.OpOverload) else getattr(target, "__name__", str(target))


def translate_nodes(ctx: TranslationContext, graph: torch.fx.Graph) -> list[Any]:
    """Translate every ``call_function`` node of ``graph``; placeholders must already be mapped.
    Results are typed from the nodes' ``meta["val"]``, dims rendered by ``ctx.dim_namer``.
    Nodes already in ``ctx.values`` (bound by an earlier translation) are not translated again.

    Returns the translated values of the graph's output arguments (flattened list, None kept).
    Raises ``UnsupportedOpError`` for an overload with no translation and ``TranslationError``
    when a translation fails, both naming the user's source line.
    """
    dim_name = ctx.dim_namer
    outputs: list[Any] = []
    for node in graph.nodes:
        if node.op == "placeholder" or node in ctx.values:
            # placeholders are mapped by the caller; a translation may bind later nodes it folded
            # into its own result (the scan translation binds the flip/movedim of its outputs)
            continue
        if node.op == "output":
            outputs = list(torch.utils._pytree.tree_leaves(ctx.values_of(node.args[0]))) \
                if not isinstance(node.args[0], (list, tuple)) else [ctx.values_of(a) for a in node.args[0]]
            break
        if node.op == "get_attr":  # a body graph, or a tensor constant of a body (a 0-d fill value)
            attr = getattr(graph.owning_module, node.target)
            ctx.values[node] = _tensor_constant(ctx, attr) if isinstance(attr, torch.Tensor) else attr
            continue
        if node.op != "call_function":
            raise TranslationError(f"unsupported FX node kind {node.op!r} ({node.name})", node=node)
        val = node.meta.get("val")
        expr = symbolic.expr_of(val) if isinstance(val, (torch.SymInt, torch.SymBool)) else None
        if expr is not None and expr in ctx.sym_values:
            ctx.values[node] = ctx.sym_values[expr]
            continue
        if isinstance(val, (int, bool)) and node.target is not operator.getitem:
            # a SymInt expression that torch proved constant
            ctx.values[node] = ctx.const(val)
            continue
        first_new = len(ctx.nodes)
        result = _translate_one(ctx, node)
        own = clamped.slice_clamp(node, ctx.size_floors)
        sizes = clamped.clamped_sizes(node, ctx.clamped, own)
        if sizes:
            ctx.clamped[node] = sizes
        type_new_outputs(ctx.nodes[first_new:], ctx.opset, with_data=bool(sizes))
        ctx.values[node] = result
        if isinstance(result, ir.Value):
            if val is not None and result.producer() is not None and result.const_value is None:
                inferred = result.shape  # ONNX inference's, from inputs that carry a clamp (clamped.retype)
                set_meta_type(result, val, dim_name)
                clamped.retype(result, sizes, dim_name, inferred, own)
                result.metadata_props.setdefault(FX_NODE_KEY, node.name)
            if expr is not None and not expr.is_number:
                ctx.sym_values[expr] = result
        elif isinstance(result, (tuple, list)) and isinstance(val, (tuple, list)):
            for r, v in zip(result, val):
                if isinstance(r, ir.Value) and v is not None and r.const_value is None and r.producer() is not None:
                    inferred = r.shape
                    set_meta_type(r, v, dim_name)
                    clamped.retype(r, sizes, dim_name, inferred, own)
    return outputs


def type_new_outputs(nodes: list[ir.Node], opset: int, with_data: bool = False) -> None:
    """Give the untyped outputs of ``nodes`` their element type by ONNX type inference, node by node.

    Intermediate values of a translation then carry a dtype, so an optimization that merges two
    equal values (CSE) keeps a typed one even when it becomes a graph output. The inferred shape
    (possibly with unknown dims) is kept too; a node whose inference fails keeps untyped outputs.
    ``with_data``: small constant inputs (a Slice's ends, a Reshape's shape) given to the inference
    too, which then finds the sizes they set (for the values computed from a clamped slice, whose
    dims ``translate.clamped`` tells apart by it).
    """
    import onnx

    for n in nodes:
        if n.domain not in ("", "ai.onnx") or all(o.type is not None for o in n.outputs):
            continue
        if any(i is not None and i.type is None for i in n.inputs):
            continue
        try:
            schema = onnx.defs.get_schema(n.op_type, opset, "")
            proto = ir.serde.serialize_node(n)
            types = {i.name: ir.serde.serialize_value(i).type for i in n.inputs if i is not None}
            data = {i.name: ir.serde.serialize_tensor(i.const_value) for i in n.inputs
                    if with_data and i is not None and i.const_value is not None and i.const_value.size <= 64}
            inferred = onnx.shape_inference.infer_node_outputs(schema, proto, types, data or None)
        except Exception:  # noqa: BLE001 - typing is best effort; the value stays untyped
            continue
        for o in n.outputs:
            tp = inferred.get(o.name)
            if o.type is None and tp is not None and tp.HasField("tensor_type") and tp.tensor_type.elem_type:
                o.type = ir.TensorType(ir.DataType(tp.tensor_type.elem_type))
                if o.shape is None and tp.tensor_type.HasField("shape"):
                    o.shape = ir.serde.deserialize_type_proto_for_shape(tp)


def _tensor_constant(ctx: TranslationContext, tensor: torch.Tensor) -> ir.Value:
    """A ``Constant`` holding ``tensor``'s values (bfloat16 through float32 and a ``Cast``)."""
    data = tensor.detach().cpu()
    if data.dtype == torch.bfloat16:
        return ctx.cast(ctx.const(data.float().numpy()), ir.DataType.BFLOAT16)
    return ctx.const(data.numpy())


def _in_place(functional, node: torch.fx.Node):
    """The translation of an in-place op from its functional one: the result in ``self``'s dtype,
    and every later read of ``self`` reading it (``translate.inplace``)."""
    def fn(ctx, self, *args, **kwargs):
        out = functional(ctx, self, *args, **kwargs)
        if isinstance(out, ir.Value) and isinstance(self, ir.Value) and self.dtype is not None \
                and out.dtype is not None and out.dtype != self.dtype:
            out = ctx.cast(out, self.dtype)
        for written in inplace.alias_chain(node):
            ctx.values[written] = out
        return out

    return fn


def _in_place_view(ctx: TranslationContext, functional, node: torch.fx.Node):
    """The translation of an in-place op writing through ``select`` / ``slice`` views of an intermediate
    (``inplace.mutates_view_locally``): the views taken anew from the intermediate's current value, the
    functional op on the innermost, the result written back view by view with ``select_scatter`` /
    ``slice_scatter``; later reads of the intermediate and of the views read the new values."""
    base, views = inplace.view_chain(node)

    def args_of(view: torch.fx.Node) -> tuple[list, dict]:
        return ctx.values_of(list(view.args[1:])), ctx.values_of(dict(view.kwargs))

    def typed(value: Any, like: torch.fx.Node) -> Any:
        if isinstance(value, ir.Value) and value.producer() is not None and value.const_value is None:
            set_meta_type(value, like.meta.get("val"), ctx.dim_namer)
            clamped.retype(value, ctx.clamped.get(like, {}), ctx.dim_namer)
        return value

    def fn(ctx, self, *args, **kwargs):
        values = [ctx.values_of(base)]
        for view in views:
            rest, keywords = args_of(view)
            values.append(typed(ctx.registry.lookup(view.target)(ctx, values[-1], *rest, **keywords), view))
        out = typed(functional(ctx, values[-1], *args, **kwargs), views[-1])
        if isinstance(out, ir.Value) and values[-1].dtype is not None and out.dtype is not None \
                and out.dtype != values[-1].dtype:
            out = ctx.cast(out, values[-1].dtype)
        new = out
        for view, parent in zip(reversed(views), reversed(values[:-1])):
            ctx.values[view] = new
            if view.target in inplace.WHOLE_VIEWS:  # the whole tensor: its new value is the one written
                continue
            rest, keywords = args_of(view)
            new = ctx.registry.lookup(inplace.SCATTERS[view.target])(ctx, parent, new, *rest, **keywords)
            new = typed(new, view.args[0])
        ctx.values[base] = new
        return out

    return fn


def _translate_one(ctx: TranslationContext, node: torch.fx.Node) -> Any:
    if node.target is operator.getitem:
        seq = ctx.values_of(node.args[0])
        return seq[node.args[1]]
    fn = ctx.registry.lookup(node.target)
    if fn is None and inplace.mutates_locally(node):
        functional = ctx.registry.lookup(inplace.functional_of(node.target))
        if functional is not None:
            fn = _in_place(functional, node)
    if fn is None and inplace.mutates_view_locally(node):
        functional = ctx.registry.lookup(inplace.functional_of(node.target))
        if functional is not None:
            fn = _in_place_view(ctx, functional, node)
    if fn is None:
        raise UnsupportedOpError(
            f"no ONNX translation for {_describe(node)}",
            node=node,
            hint=(
                "register one with @onnxport.translates(" + _describe(node).replace("aten.", "torch.ops.aten.")
                + ") def fn(ctx, *args): return ctx.op.<OnnxOp>(...)  (see onnxport/translate/ops for examples)"
            ),
        )
    ctx.set_current(node, user_source_line(node))
    args = ctx.values_of(node.args)
    kwargs = ctx.values_of(dict(node.kwargs))
    try:
        return fn(ctx, *args, **kwargs)
    except ExportError as e:
        if e.where is None and e.node_name is None:
            raise type(e)(e.what, node=node, hint=e.hint) from e
        raise
    except Exception as e:  # noqa: BLE001 - every failure names the node and the user's line
        raise TranslationError(
            f"translating {_describe(node)} ({node.name}) failed: {type(e).__name__}: {e}",
            node=node,
            hint="this is a gap in onnxport's translation; report it with this message, or register "
                 "your own translation with @onnxport.translates",
        ) from e
    finally:
        ctx.set_current(None, None)
