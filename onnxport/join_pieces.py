"""ONNX models of one signature, each exported for an interval of one dim, joined under ``If`` nodes.

``join(models, dim, uppers)``: ``models[i]`` holds for sizes of ``dim`` up to ``uppers[i]`` (above
the previous one; the last model for the rest). The joined graph reads the dim's size from the first
input carrying it (``Shape`` of that axis), and runs ``If(size <= uppers[0])`` with the first model
as its ``then_branch`` and, as its ``else_branch``, the next ``If`` (ONNX ``If``: a branch is a graph
without inputs that reads the outer scope's values; both branches give outputs of one type, their
shapes may differ).

Each model becomes a branch: its inputs are the joined graph's inputs (same names), its
initializers move to the joined graph (one tensor where the models share a name and its values;
otherwise renamed), every value it computes is prefixed (``p1/...``, the models are traced apart and
reuse names), and its local functions are kept (renamed where another model has a different
function of the same name). An output keeps a dim where every model names it alike.

``join_on(condition, then_model, else_model)``: the same join on a condition computed from the inputs
(a branch on a state's value, ``onnxport.value_sides``): ``condition`` is an ONNX model of the same
inputs whose one output is the branch's truth; its nodes compute it in the joined graph, and one
``If`` runs ``then_model`` where it is true, ``else_model`` where it is not. The sides' outputs may
differ in shape (a dim neither names alike is left without a name or size).
"""

from __future__ import annotations

import onnx
import onnx_ir as ir
from onnx import helper

_OPSET_DOMAINS = ("", "ai.onnx")


def join(models: list[onnx.ModelProto], dim: str, uppers: list[int]) -> onnx.ModelProto:
    """One model running ``models[i]`` where ``dim <= uppers[i]`` (and above ``uppers[i-1]``).

    Args:
        models: two or more models of one signature (input and output names, dtypes, ranks), the
            first carrying ``dim`` as the dim_param of an input axis.
        dim: the dim_param the pieces split.
        uppers: ``len(models) - 1`` increasing sizes.

    Raises:
        ValueError: the models' inputs or outputs differ in name, or no input carries ``dim``.
    """
    if len(uppers) != len(models) - 1:
        raise ValueError(f"{len(models)} models take {len(models) - 1} bounds, not {len(uppers)}")
    base = models[0]
    names = [i.name for i in base.graph.input]
    outputs = [o.name for o in base.graph.output]
    _check_signature(models)
    # the inputs as a piece that keeps the dim declares them (a piece of one size has it static)
    outer, source = next(((m, s) for m in models if (s := _dim_source(m, dim)) is not None), (base, None))
    if source is None:
        raise ValueError(f"no input of the model has a dim named {dim!r}")
    initializers: dict[str, onnx.TensorProto] = {}
    functions: dict[tuple, onnx.FunctionProto] = {}
    branches = [_branch(m, i, set(names), set(outputs), initializers, functions) for i, m in enumerate(models)]

    size = f"{dim}/size"
    nodes = [helper.make_node("Shape", [source[0]], [f"{dim}/shape"], start=source[1], end=source[1] + 1),
             helper.make_node("Squeeze", [f"{dim}/shape"], [size])]
    current = branches[-1]
    for i in reversed(range(len(uppers))):
        bound = f"{dim}/upper{i}"
        cond = f"{dim}/le{i}"
        outs = outputs if i == 0 else [f"{dim}/join{i}/{k}" for k in range(len(outputs))]
        step = [helper.make_node("Constant", [], [bound], value=helper.make_tensor(bound, onnx.TensorProto.INT64, [],
                                                                                      [uppers[i]])),
                helper.make_node("LessOrEqual", [size, bound], [cond]),
                helper.make_node("If", [cond], outs, then_branch=branches[i], else_branch=current)]
        if i == 0:
            nodes += step
        else:
            current = helper.make_graph(step, f"{dim}_pieces_from_{i}", [],
                                        [_output_like(o, n) for o, n in zip(base.graph.output, outs)])
    graph = helper.make_graph(nodes, base.graph.name, list(outer.graph.input),
                              [_merged_output(k, models) for k in range(len(outputs))],
                              initializer=list(initializers.values()))
    graph.doc_string = base.graph.doc_string
    return _model(graph, models, functions)


def join_on(condition: onnx.ModelProto, then_model: onnx.ModelProto, else_model: onnx.ModelProto) -> onnx.ModelProto:
    """One model running ``then_model`` where ``condition``'s output is true, ``else_model`` elsewhere.

    Args:
        condition: a model of the sides' inputs (the same names; it may read fewer) with one output,
            a bool tensor of one element, computed from the inputs.
        then_model, else_model: models of one signature (input and output names, dtypes, ranks);
            an output's dims may differ between them.

    Raises:
        ValueError: the models' inputs or outputs differ in name, dtype or rank, or ``condition``
            reads an input the sides do not have or has other than one output.
    """
    models = [then_model, else_model]
    _check_signature(models)
    base = then_model
    names = [i.name for i in base.graph.input]
    outputs = [o.name for o in base.graph.output]
    if len(condition.graph.output) != 1:
        raise ValueError(f"the condition has {len(condition.graph.output)} outputs, not one")
    unknown = [i.name for i in condition.graph.input if i.name not in names]
    if unknown:
        raise ValueError(f"the condition reads {', '.join(unknown)}, which the sides do not take")
    initializers: dict[str, onnx.TensorProto] = {}
    functions: dict[tuple, onnx.FunctionProto] = {}
    branches = [_branch(m, i, set(names), set(outputs), initializers, functions) for i, m in enumerate(models)]
    head = _branch(condition, len(models), set(names), set(outputs), initializers, functions)
    truth = "condition/truth"
    nodes = list(head.node) + [
        helper.make_node("Constant", [], ["condition/scalar"], value=helper.make_tensor(
            "condition/scalar", onnx.TensorProto.INT64, [0], [])),
        helper.make_node("Reshape", [head.output[0].name, "condition/scalar"], ["condition/shaped"]),
        helper.make_node("Cast", ["condition/shaped"], [truth], to=onnx.TensorProto.BOOL),
        helper.make_node("If", [truth], outputs, then_branch=branches[0], else_branch=branches[1])]
    graph = helper.make_graph(nodes, base.graph.name, list(base.graph.input),
                              [_merged_output(k, models) for k in range(len(outputs))],
                              initializer=list(initializers.values()))
    graph.doc_string = base.graph.doc_string
    return _model(graph, [*models, condition], functions)


def joined_model(proto: onnx.ModelProto, dim_names: dict) -> ir.Model:
    """``proto`` (a model ``join`` or ``join_on`` made) as the ``onnx_ir`` model an ``ExportResult`` holds,
    ``dim_names`` (the base export's: dim_param -> the user's name) in its ``meta``."""
    model = ir.serde.deserialize_model(proto)
    model.meta["dim_names"] = dict(dim_names)
    return model


def _check_signature(models: list[onnx.ModelProto]) -> None:
    """Raise ``ValueError`` where the models' inputs or outputs differ in name, or an output in dtype
    or rank (ONNX ``If`` gives one type per output)."""
    base = models[0]
    names = [i.name for i in base.graph.input]
    outputs = [o.name for o in base.graph.output]
    for m in models[1:]:
        if [i.name for i in m.graph.input] != names or [o.name for o in m.graph.output] != outputs:
            raise ValueError(f"the sides return other outputs ({', '.join(outputs)} on one, "
                             f"{', '.join(o.name for o in m.graph.output)} on the other)")
        for a, b in zip(base.graph.output, m.graph.output):
            ta, tb = a.type.tensor_type, b.type.tensor_type
            if ta.elem_type != tb.elem_type or len(ta.shape.dim) != len(tb.shape.dim):
                raise ValueError(f"output {a.name!r} differs in dtype or rank between the sides (ONNX If "
                                 f"gives one type per output)")


def _model(graph: onnx.GraphProto, models: list[onnx.ModelProto], functions: dict) -> onnx.ModelProto:
    """The joined model of ``graph``: the opsets every model imports (a domain only one uses, its
    control-flow bodies' functions, included), ``functions``, the first model's producer and metadata."""
    base = models[0]
    opsets = {}
    for m in models:
        for o in m.opset_import:
            opsets[o.domain] = max(opsets.get(o.domain, o.version), o.version)
    joined = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()],
                               functions=list(functions.values()),
                               producer_name=base.producer_name, producer_version=base.producer_version)
    joined.ir_version = base.ir_version
    joined.doc_string = base.doc_string
    joined.metadata_props.extend(base.metadata_props)
    return joined


def _dim_source(model: onnx.ModelProto, dim: str) -> tuple[str, int] | None:
    """``(input name, axis)`` of the first input axis named ``dim``; None where none is (a piece of
    one size has the dim static)."""
    for inp in model.graph.input:
        for axis, d in enumerate(inp.type.tensor_type.shape.dim):
            if d.dim_param == dim:
                return inp.name, axis
    return None


def _output_like(value: onnx.ValueInfoProto, name: str) -> onnx.ValueInfoProto:
    out = onnx.ValueInfoProto()
    out.CopyFrom(value)
    out.name = name
    return out


def _merged_output(k: int, models: list[onnx.ModelProto]) -> onnx.ValueInfoProto:
    """The ``k``-th output as every model declares it, a dim kept where all agree (a named dim where
    the pieces that name it agree and the others, pieces of one size, give it a size)."""
    shapes = [m.graph.output[k].type.tensor_type.shape for m in models]
    out = onnx.ValueInfoProto()
    out.CopyFrom(models[0].graph.output[k])
    if not out.type.HasField("tensor_type") or any(len(s.dim) != len(shapes[0].dim) for s in shapes):
        out.type.tensor_type.ClearField("shape")
        return out
    for axis, d in enumerate(out.type.tensor_type.shape.dim):
        named = {s.dim[axis].dim_param for s in shapes if s.dim[axis].dim_param}
        if len(named) == 1 and all(s.dim[axis].dim_param or s.dim[axis].HasField("dim_value") for s in shapes):
            d.Clear()
            d.dim_param = named.pop()  # the pieces that name it agree; the others, of one size, give it a size
        elif any(s.dim[axis] != d for s in shapes):
            d.Clear()
    return out


def _branch(model: onnx.ModelProto, index: int, inputs: set[str], outputs: set[str], initializers: dict,
            functions: dict) -> onnx.GraphProto:
    """``model``'s graph as a branch: no inputs, initializers moved to ``initializers`` (renamed
    when the name is taken by other values or is an output's, which the joined graph's ``If``
    makes), local functions into ``functions`` (renamed likewise), every other name prefixed."""
    prefix = f"p{index}/"
    renamed_functions = {}
    for f in model.functions:
        key = (f.domain, f.name, f.overload)
        if key in functions and functions[key].SerializeToString() != f.SerializeToString():
            renamed_functions[(f.domain, f.name)] = f"{f.name}_p{index}"
    names = {n: n for n in inputs}
    for init in model.graph.initializer:
        same = init.name in initializers and _same_tensor(initializers[init.name], init)
        taken = init.name in outputs or (init.name in initializers and not same)
        names[init.name] = prefix + init.name if taken else init.name
        if not same or taken:
            moved = onnx.TensorProto()
            moved.CopyFrom(init)
            moved.name = names[init.name]
            initializers.setdefault(moved.name, moved)
    graph = onnx.GraphProto()
    graph.CopyFrom(model.graph)
    graph.ClearField("input")
    graph.ClearField("initializer")
    _rename_graph(graph, names, prefix)
    for node in graph.node:
        _rename_calls(node, renamed_functions)
    # each output made by a node of the branch (an input or initializer of the outer scope is not
    # one ONNX lets a branch return as it is)
    outs = []
    for k, o in enumerate(graph.output):
        made = f"{prefix}output{k}"
        graph.node.append(helper.make_node("Identity", [o.name], [made]))
        outs.append(_output_like(o, made))
    graph.ClearField("output")
    graph.output.extend(outs)
    graph.name = f"{model.graph.name}_piece{index}"
    for f in model.functions:
        g = onnx.FunctionProto()
        g.CopyFrom(f)
        g.name = renamed_functions.get((f.domain, f.name), f.name)
        for node in g.node:
            _rename_calls(node, renamed_functions)
        functions.setdefault((g.domain, g.name, g.overload), g)
    return graph


def _same_tensor(a: onnx.TensorProto, b: onnx.TensorProto) -> bool:
    return a.data_type == b.data_type and list(a.dims) == list(b.dims) and \
        a.SerializeToString() == b.SerializeToString()


def _rename_graph(graph: onnx.GraphProto, names: dict, prefix: str) -> None:
    """Rename, in place, what ``graph`` defines (its inputs, initializers, node outputs: prefixed) and
    what it reads (through ``names``, the enclosing scopes' renames), subgraphs included."""
    scope = dict(names)
    for value in list(graph.input) + list(graph.initializer):
        scope[value.name] = prefix + value.name
        value.name = scope[value.name]
    for node in graph.node:
        for out in node.output:
            if out:
                scope[out] = prefix + out
    for node in graph.node:
        node.input[:] = [scope.get(n, n) if n else n for n in node.input]
        node.output[:] = [scope[n] if n else n for n in node.output]
        if node.name:
            node.name = prefix + node.name
        for attr in node.attribute:
            for sub in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)):
                _rename_graph(sub, scope, prefix)
    for value in list(graph.output) + list(graph.value_info):
        value.name = scope.get(value.name, value.name)


def _rename_calls(node: onnx.NodeProto, functions: dict) -> None:
    """Point a call of a renamed local function (and those in its subgraphs) at the new name."""
    if (node.domain, node.op_type) in functions:
        node.op_type = functions[(node.domain, node.op_type)]
    for attr in node.attribute:
        for sub in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)):
            for inner in sub.node:
                _rename_calls(inner, functions)
