"""bfloat16 where onnxruntime's CPU provider has no kernel: computed in float32 between Casts.

onnxruntime's CPU provider runs few operators on bfloat16 (Cast, a handful of others; not Gemm,
MatMul, Gelu, Softmax...): a bfloat16 model exported as traced is valid ONNX that it refuses to
load ("Could not find an implementation for Gemm(13)"). Here each node that touches bfloat16 and
has no CPU kernel for its types (asked of onnxruntime itself, one single-node session per
operator and types, once per process) computes in float32: its bfloat16 inputs cast up, its
bfloat16 outputs cast back down. The model's inputs, outputs and weights stay bfloat16, and every
such node's result is rounded to bfloat16 as eager PyTorch rounds each op's result, so the model
computes what eager bfloat16 does, each op at float32 precision inside (as PyTorch's CPU kernels
accumulate bfloat16 in float32).

A node whose output is bfloat16 by an attribute (``Cast(to=bfloat16)``, an ``EyeLike`` of
``dtype=bfloat16``) has nothing to widen: where onnxruntime lacks it, the export is refused naming
its line (``unloadable``).
"""

from __future__ import annotations

import functools

import onnx_ir as ir

from onnxport.metadata import SOURCE_KEY

BF16, FLOAT = ir.DataType.BFLOAT16, ir.DataType.FLOAT
_CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})


def widen_bfloat16(model: ir.Model) -> tuple[list[str], list[str]]:
    """Nodes of ``model`` (every graph, subgraph and function) that touch bfloat16 where
    onnxruntime's CPU provider has no kernel for them, computed in float32 between Casts (in place).

    Returns ``(widened, unloadable)``: the op types widened, and the nodes that stay without a
    kernel (their bfloat16 output set by an attribute), each its op type and the user's line
    (``"EyeLike at model.py:12 in forward: ..."``). Both empty for a model without bfloat16 or
    where onnxruntime is not installed.
    """
    if not _touches_bfloat16(model):
        return [], []
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return [], []
    opset = model.opset_imports.get("", 20)
    widened, unloadable = set(), set()
    ups: dict = {}  # (bfloat16 value, graph) -> its float32 Cast there, shared by the nodes widened
    graphs = [model.graph, *(f.graph for f in model.functions.values())]
    for graph in graphs:
        for node in list(ir.traversal.RecursiveGraphIterator(graph)):
            if node.domain not in ("", "ai.onnx") or node.op_type in _CONTROL_FLOW:
                continue
            ins, outs = _types(node.inputs), _types(node.outputs)
            if BF16 not in ins + outs or None in ins + outs:
                continue
            if _cpu_runs(node.op_type, opset, tuple(ins), tuple(outs), _attributes_key(node)):
                continue
            if BF16 in outs and BF16 not in ins:
                source = node.metadata_props.get(SOURCE_KEY)
                unloadable.add(f"{node.op_type} at {source}" if source else node.op_type)
                continue
            _widen(node, ups)
            widened.add(node.op_type)
    return sorted(widened), sorted(unloadable)


def _touches_bfloat16(model: ir.Model) -> bool:
    graphs = [model.graph, *(f.graph for f in model.functions.values())]
    for graph in graphs:
        if any(v.dtype == BF16 for v in [*graph.inputs, *graph.outputs, *graph.initializers.values()]):
            return True
        for node in ir.traversal.RecursiveGraphIterator(graph):
            if any(v is not None and v.dtype == BF16 for v in [*node.inputs, *node.outputs]):
                return True
    return False


def _types(values) -> list:
    """Each value's element type ("" for an omitted optional input, None where it is unknown)."""
    return ["" if v is None else v.dtype for v in values]


def _attributes_key(node: ir.Node) -> tuple:
    """The node's attributes that a kernel's types may depend on (plain values only)."""
    out = []
    for name, attr in sorted(node.attributes.items()):
        if attr.type in (ir.AttributeType.INT, ir.AttributeType.FLOAT, ir.AttributeType.STRING,
                         ir.AttributeType.INTS, ir.AttributeType.FLOATS, ir.AttributeType.STRINGS):
            value = attr.value
            out.append((name, tuple(value) if isinstance(value, (list, tuple)) else value))
        elif attr.type is ir.AttributeType.TENSOR:
            t = attr.value
            out.append((name, "tensor", int(t.dtype), tuple(t.shape), t.tobytes()))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def _cpu_runs(op_type: str, opset: int, ins: tuple, outs: tuple, attributes: tuple) -> bool:
    """Whether onnxruntime's CPU provider loads one ``op_type`` node with these input and output
    element types and attributes ("" for an omitted input): a session over a one-node model. Only
    a missing kernel (``NOT_IMPLEMENTED``) counts as no; any other failure of the probe says
    nothing, and the node is left as it is."""
    import onnx
    import onnxruntime as ort
    from onnx import helper

    names = [f"in{i}" if t != "" else "" for i, t in enumerate(ins)]
    attrs = {}
    for item in attributes:
        if len(item) == 2:
            attrs[item[0]] = list(item[1]) if isinstance(item[1], tuple) else item[1]
        else:
            name, _, dtype, shape, data = item
            attrs[name] = helper.make_tensor(name, dtype, list(shape), data, raw=True)
    node = helper.make_node(op_type, names, [f"out{i}" for i in range(len(outs))], **attrs)
    graph = helper.make_graph(
        [node], "probe",
        [helper.make_tensor_value_info(n, int(t), None) for n, t in zip(names, ins) if n],
        [helper.make_tensor_value_info(f"out{i}", int(t), None) for i, t in enumerate(outs)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = min(proto.ir_version, onnx.IR_VERSION)
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    try:
        ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - onnxruntime's own error types
        return "NOT_IMPLEMENTED" not in str(e)
    return True


def _widen(node: ir.Node, ups: dict) -> None:
    """``node`` in float32: its bfloat16 inputs through a Cast to float (one per value and graph,
    made before its first reader there: ``ups``), its bfloat16 outputs float and cast back to
    bfloat16 for their readers (a graph output keeps its name and type)."""
    graph = node.graph
    for i, value in enumerate(node.inputs):
        if value is not None and value.dtype == BF16:
            up = ups.get((value, id(graph)))
            if up is None:
                cast = ir.Node("", "Cast", [value], [ir.AttrInt64("to", FLOAT)], name=f"{node.name}_float_in{i}")
                up = ups[(value, id(graph))] = cast.outputs[0]
                up.name = f"{value.name}_float"
                up.type, up.shape = ir.TensorType(FLOAT), value.shape
                graph.insert_before(node, cast)
            node.replace_input_with(i, up)
    for i, value in enumerate(node.outputs):
        if value.dtype != BF16:
            continue
        down = ir.Node("", "Cast", [value], [ir.AttrInt64("to", BF16)], name=f"{node.name}_bfloat16_out{i}")
        result = down.outputs[0]
        result.type, result.shape = ir.TensorType(BF16), value.shape
        graph.insert_after(node, down)
        for user, index in list(value.uses()):
            if user is not down:
                user.replace_input_with(index, result)
        name = value.name
        value.name = f"{name}_float_result"
        value.type = ir.TensorType(FLOAT)
        result.name = name
        for k, out in enumerate(graph.outputs):
            if out is value:
                graph.outputs[k] = result
