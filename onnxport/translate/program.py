"""ExportedProgram -> onnx_ir.Model: inputs, initializers, the main graph, outputs, dim names."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir
import sympy
import torch
from torch.export.graph_signature import InputKind, OutputKind
from torch.utils import _pytree as pytree

from onnxport.capture.caches import OUTPUT_PREFIX, CacheKey, is_cache_leaf
from onnxport.capture.captured import Captured, expr_of
from onnxport.capture.dynamic_shapes import key_str
from onnxport.errors import CheckpointError, ExportError, TranslationError
from onnxport.translate import clamped, symbolic
from onnxport.translate.complex_values import complex_constant
from onnxport.translate.context import TranslationContext
from onnxport.translate.equal_counts import equal_counts
from onnxport.translate.graph import graph_output, set_meta_type, translate_nodes
from onnxport.translate.registry import Translations
from onnxport.weights.binding import Weights, ir_tensor

DOMAIN = "onnxport"  # domain of the local functions onnxport emits


class DimNamer:
    """Renders sympy dimension expressions with the user's names (``batch``, ``2*time``), each
    expression once (sympy's printing is the slow part of typing the values)."""

    def __init__(self):
        self.names: dict[sympy.Symbol, str] = {}
        self.counts: dict[Any, str] = {}  # data-dependent output sizes (``Min(20, u9)``) -> their names
        self._rendered: dict[Any, int | str] = {}

    def __call__(self, expr: Any) -> int | str:
        if isinstance(expr, (int, np.integer)):
            return int(expr)
        if expr in self.counts:
            return self.counts[expr]
        key = (expr, len(self.names))  # names are added before translation; a new one renders anew
        hit = self._rendered.get(key)
        if hit is None:
            hit = self._rendered[key] = symbolic.dim_names_for(self.names, expr)
        return hit


def output_names(program: torch.export.ExportedProgram, n_user: int) -> list[str]:
    """Stable flat names of the user outputs: ``output`` / ``output_0``... / dict keys / attributes;
    the tensors of a returned cache ``present.0.key``... (``onnxport.capture.caches``)."""
    spec = program.call_spec.out_spec
    if spec is None:
        return [f"output_{i}" for i in range(n_user)]
    try:
        tree = pytree.tree_unflatten(list(range(spec.num_leaves)), spec)
        leaves, _ = pytree.tree_flatten_with_path(tree)
    except Exception:  # noqa: BLE001 - unusual containers fall back to positions
        return [f"output_{i}" for i in range(n_user)]
    if len(leaves) == 1 and not leaves[0][0]:
        return ["output"]
    names = []
    caches: list[tuple] = []  # the paths of the returned caches, in order
    for path, _ in leaves:
        at = next((i for i, k in enumerate(path) if isinstance(k, CacheKey)), None)
        if at is not None:
            if path[:at] not in caches:
                caches.append(path[:at])
            n = caches.index(path[:at])
            names.append(f"{OUTPUT_PREFIX}{'' if n == 0 else f'_{n}'}" + "".join(f".{k.key}" for k in path[at:]))
            continue
        parts = [key_str(k) for k in path]
        if parts and parts[0].isdigit():
            parts = ["output"] + parts
        names.append("_".join(parts))
    return names


def name_counts(namer: DimNamer, outputs: list[tuple[str, Any]], output_dims: dict | None,
                equal: dict | None = None) -> None:
    """Name the data-dependent sizes of the outputs (``outputs``: ONNX name and ``meta["val"]``): a
    size computed from the model's data (an unbacked symbol of torch: the detections NMS keeps) takes
    the name ``output_dims`` gives one of its axes (``{"boxes": {0: "num_detections"}}``), else
    ``<output>_dim<axis>`` of the first output holding it; every axis of the same size carries that
    name. Sizes of the inputs keep their dims' names. ``equal`` maps a data-dependent symbol to the
    first one known equal to it (``equal_counts``: the counts of one mask); equal sizes share a name.

    Raises ``ExportError`` when ``output_dims`` names an output the model does not return, an axis it
    does not have or whose size is not data-dependent, or one name for two different sizes.
    """
    given = {name: dict(axes) for name, axes in (output_dims or {}).items()}
    shapes = {name: val.shape for name, val in outputs if isinstance(val, torch.Tensor)}
    for name, axes in given.items():
        if name not in shapes:
            raise ExportError(f"output_dims names output {name!r}, which the model does not return as a tensor",
                              hint=f"name one of {', '.join(shapes) or 'no outputs'}")
        for axis in axes:
            if not isinstance(axis, int) or not -len(shapes[name]) <= axis < len(shapes[name]):
                raise ExportError(f"output_dims names axis {axis!r} of {name!r}, which has {len(shapes[name])} axes")

    def data_dependent(expr: Any) -> bool:
        return isinstance(expr, sympy.Basic) and any(s not in namer.names for s in expr.free_symbols)

    equal = equal or {}

    def same(expr: Any) -> Any:
        return expr.xreplace(equal) if isinstance(expr, sympy.Basic) and equal else expr

    def assign(expr: Any, chosen: str, name: str, axis: int) -> None:
        if any(namer.counts[e] == chosen and same(e) == same(expr) for e in namer.counts):
            namer.counts[expr] = chosen
            return
        if chosen in namer.counts.values() or chosen in namer.names.values():
            raise ExportError(f"output_dims gives {chosen!r} to axis {axis} of {name!r}, a size other than "
                              f"the one already named {chosen!r}", hint="give different sizes different names")
        namer.counts[expr] = chosen

    for name, axes in given.items():  # the user's names first, then the defaults of the sizes left
        shape = shapes[name]
        for axis, wanted in axes.items():
            axis %= len(shape)
            expr = expr_of(shape[axis])
            if not data_dependent(expr):
                raise ExportError(
                    f"output_dims names axis {axis} of {name!r} {wanted!r}, but its size is "
                    f"{namer(expr)!r}, not a size computed from the model's data",
                    hint="output_dims names data-dependent sizes only; an input's dims take their names from "
                         "dynamic_shapes")
            if expr in namer.counts:
                if wanted != namer.counts[expr]:
                    raise ExportError(f"output_dims names one size both {namer.counts[expr]!r} and {wanted!r} "
                                      f"(axis {axis} of {name!r})", hint="give a size one name")
                continue
            assign(expr, wanted, name, axis)
    for name, shape in shapes.items():
        for axis, d in enumerate(shape):
            expr = expr_of(d)
            if data_dependent(expr) and expr not in namer.counts:
                named = next((namer.counts[e] for e in namer.counts if same(e) == same(expr)), None)
                assign(expr, named or f"{name}_dim{axis}", name, axis)


def build_model(captured: Captured, *, opset: int, registry: Translations, input_names: list[str] | None = None,
                output_names_: list[str] | None = None, options: dict | None = None,
                weights: Weights | None = None, output_dims: dict | None = None) -> ir.Model:
    """Translate ``captured.program`` into an onnx_ir.Model (not yet optimized), in five steps: the
    inputs (``_inputs``), the initializers (``_initializers``), the nodes (``translate_nodes``), the
    outputs (``_outputs``), the model assembled (``_assemble``).

    Args:
        captured: what capture handed forward.
        opset: the ONNX default-domain opset.
        registry: the export's translations (``Translations(opset, user_registry)``).
        input_names, output_names_: names overriding the flat ones (one per tensor input/output).
        output_dims: names of data-dependent output sizes, ``{output: {axis: name}}`` (``name_counts``).
        options: export options shared by nested contexts (``inline``).
        weights: for a model whose parameters are on the meta device, where their values are
            (``onnxport.weights.bind``): each such initializer is an ``onnx_ir.LazyTensor`` reading
            its tensor from the checkpoint when the model is saved.

    Raises ``ExportError`` subclasses from the translations, and when ``input_names`` /
    ``output_names_`` do not match the tensor inputs/outputs in number.
    """
    namer = DimNamer()
    ctx = TranslationContext(opset, options=options or {}, dim_namer=namer, registry=registry,
                             size_floors={s: v.lo for s, v in captured.variables.items()})
    inputs, names = _inputs(ctx, captured, input_names, namer)  # 1. the user's tensors, dims named as declared
    initializers = _initializers(ctx, captured.program, weights, namer)  # 2. parameters, buffers, constants
    outs = translate_nodes(ctx, captured.program.graph)  # 3. the nodes, in order
    outputs = _outputs(ctx, captured, outs, names, output_names_, output_dims, set(inputs) | set(initializers))  # 4.
    return _assemble(ctx, inputs, outputs, initializers, opset)  # 5.


def _inputs(ctx: TranslationContext, captured: Captured, input_names: list[str] | None,
            namer: DimNamer) -> tuple[list[ir.Value], list[str]]:
    """The graph inputs (one per tensor input, Python constants kept as constants) and every user
    input's name; torch's symbols named after the user's dims first (``namer.names``)."""
    user = captured.inputs
    names = [inp.name for inp in user]
    tensor_inputs = [inp.name for inp in user if isinstance(inp.value, torch.Tensor)]
    if input_names is not None:
        if len(input_names) != len(tensor_inputs):
            raise ExportError(
                f"input_names has {len(input_names)} names but the model has {len(tensor_inputs)} tensor inputs "
                f"({', '.join(tensor_inputs)})", hint="give one name per tensor input, in order")
        rename = dict(zip(tensor_inputs, input_names))
        names = [rename.get(n, n) for n in names]
        captured_decl = [(rename.get(d.input_name, d.input_name), d) for d in captured.declared]
    else:
        captured_decl = [(d.input_name, d) for d in captured.declared]
    declared = {(n, d.axis): d.name for n, d in captured_decl}
    for name, inp in zip(names, user):
        if isinstance(inp.value, torch.Tensor):
            for axis, d in enumerate(inp.value.shape):
                expr = expr_of(d)
                if isinstance(expr, sympy.Symbol) and expr not in namer.names:
                    namer.names[expr] = declared.get((name, axis), f"{name}_dim{axis}")
    for sym, var in captured.variables.items():  # a derived Dim's root (``T`` of an input's ``4*T``)
        if sym not in namer.names and var.name not in namer.names.values():
            namer.names[sym] = var.name
    inputs: list[ir.Value] = []
    for name, inp in zip(names, user):
        val = inp.value
        if not isinstance(val, torch.Tensor):
            ctx.values[inp.node] = val  # Python constants (int, float, bool, None) stay constants
            continue
        value = ir.Value(name=name)
        set_meta_type(value, val, namer)
        inputs.append(value)
        ctx.values[inp.node] = value
        for axis, d in enumerate(val.shape):
            expr = expr_of(d)
            if isinstance(expr, sympy.Symbol) and expr not in ctx.sym_sources:
                ctx.sym_sources[expr] = (value, axis)
    return inputs, names


def _initializers(ctx: TranslationContext, program: torch.export.ExportedProgram, weights: Weights | None,
                  namer: DimNamer) -> list[ir.Value]:
    """An initializer per parameter, buffer and tensor constant of ``program`` (lazy where ``weights``
    holds it); other constants kept as Python values.

    Raises ``CheckpointError`` for a tensor on the meta device no checkpoint gives."""
    graph_nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    state = program.state_dict
    initializers: list[ir.Value] = []
    for spec in program.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            continue
        node = graph_nodes[spec.arg.name]
        if spec.kind == InputKind.TOKEN:  # side-effect ordering token: nothing in ONNX
            ctx.values[node] = None
            continue
        target = spec.target
        tensor = state.get(target) if target in state else program.constants.get(target)
        if tensor is None:
            raise ExportError(f"no value for {spec.kind.name.lower()} {target!r} in the exported program")
        if isinstance(tensor, torch.nn.Parameter):
            tensor = tensor.data
        if not isinstance(tensor, torch.Tensor):
            ctx.values[node] = tensor
            continue
        if tensor.is_complex() and not tensor.is_meta:  # carried as its real [..., 2] pairs
            complex_ = complex_constant(ctx, node, tensor, target)
            initializers.append(complex_.value)
            ctx.values[node] = complex_
            continue
        if weights is not None and target in weights:
            const = weights.lazy(target)
        elif tensor.is_meta:
            raise CheckpointError(f"{spec.kind.name.lower()} {target!r} is on the meta device and no checkpoint "
                                  "gives its values", hint="pass weights=<checkpoint> to to_onnx; a tensor made "
                                  "in __init__ that is not a registered buffer cannot come from a checkpoint")
        else:
            const = ir_tensor(tensor, target)
        value = ir.Value(name=target, const_value=const)
        set_meta_type(value, tensor, namer)
        initializers.append(value)
        ctx.values[node] = value
    return initializers


def _outputs(ctx: TranslationContext, captured: Captured, outs: list, names: list[str],
             output_names_: list[str] | None, output_dims: dict | None, graph_values: set) -> list[ir.Value]:
    """The graph outputs: the user's (named ``output_names``, or ``output_names_``), then the state
    updates (a buffer or input written in place: ``<name>.updated``), named, typed, data-dependent
    sizes named (``name_counts``).

    Raises ``ExportError`` when ``output_names_`` does not match the outputs in number,
    ``TranslationError`` for a complex output or a model with no output."""
    program, namer = captured.program, ctx.dim_namer
    out_specs = program.graph_signature.output_specs
    user_out = [v for v, s in zip(outs, out_specs) if s.kind == OutputKind.USER_OUTPUT]
    out_nodes = [a for a, s in zip(_output_args(program.graph), out_specs) if s.kind == OutputKind.USER_OUTPUT]
    names_out = output_names(program, len(user_out))
    if output_names_ is not None:
        if len(output_names_) != len(user_out):
            raise ExportError(f"output_names has {len(output_names_)} names but the model returns {len(user_out)} "
                              f"outputs ({', '.join(names_out)})", hint="give one name per output, in order")
        names_out = list(output_names_)
    # state updates (buffer and input mutations) follow the user outputs as extra outputs
    input_by_placeholder = {inp.node.name: n for n, inp in zip(names, captured.inputs)}
    returned = {id(n) for n in out_nodes}
    for value, spec, fx_node in zip(outs, out_specs, _output_args(program.graph)):
        if spec.kind == OutputKind.BUFFER_MUTATION:
            if _unchanged(program, fx_node, spec.target):
                continue  # a buffer given its own value again (CTRL's ``self.pos = self.pos.to(dtype)``)
            names_out.append(f"{spec.target}.updated")
        elif spec.kind == OutputKind.USER_INPUT_MUTATION:
            name = input_by_placeholder.get(spec.target, spec.target)
            if is_cache_leaf(name) and id(fx_node) in returned:
                continue  # a cache updated in place and returned: its present.* output is the update
            names_out.append(f"{name}.updated")
        else:
            continue
        user_out.append(value)
        out_nodes.append(fx_node)
    name_counts(namer, [(n, f.meta.get("val") if isinstance(f, torch.fx.Node) else None)
                        for n, f in zip(names_out, out_nodes)], output_dims, equal_counts(program.graph))
    graph_outputs: list[ir.Value] = []
    seen: set = set()
    for name, value, fx_node in zip(names_out, user_out, out_nodes):
        if value is None:
            continue
        val = fx_node.meta.get("val") if isinstance(fx_node, torch.fx.Node) else None
        if isinstance(val, torch.Tensor) and val.is_complex() or not isinstance(value, (ir.Value, bool, int, float)):
            raise TranslationError(
                f"output {name!r} is a complex tensor; ONNX models made here carry no complex tensors "
                "(onnxruntime runs few operators on them)", node=fx_node,
                hint="return torch.view_as_real(z) instead and rebuild the complex tensor with "
                     "torch.view_as_complex after running the ONNX model")
        value = graph_output(ctx, value, seen, graph_values)
        value.name = name
        if isinstance(fx_node, torch.fx.Node):
            typed = value.shape  # as translated: a dim equal to a clamped constant by chance kept constant
            set_meta_type(value, fx_node.meta.get("val"), namer)
            clamped.retype(value, ctx.clamped.get(fx_node, {}), namer, typed)
        graph_outputs.append(value)
    if not graph_outputs:
        raise TranslationError("the model returns no tensor and updates no buffer: an ONNX model needs an output",
                               hint="return at least one tensor (a Python number is exported as a constant)")
    return graph_outputs


def _assemble(ctx: TranslationContext, inputs: list[ir.Value], outputs: list[ir.Value],
              initializers: list[ir.Value], opset: int) -> ir.Model:
    """The main graph and the model: opsets (onnxport's domain where local functions were made), IR
    version, the functions, the dim names and output types (read by finalize)."""
    graph = ir.Graph(inputs, outputs, nodes=ctx.nodes, initializers=initializers,
                     opset_imports={"": opset, DOMAIN: 1} if ctx.functions else {"": opset}, name="main_graph")
    model = ir.Model(graph, ir_version=10 if opset <= 21 else 11, producer_name="onnxport",
                     functions=list(ctx.functions.values()))
    model.meta["dim_names"] = dict(ctx.dim_namer.names)
    model.meta["output_types"] = {v.name: (v.type, v.shape) for v in outputs}
    return model


def _output_args(graph: torch.fx.Graph) -> list[Any]:
    out = next(n for n in graph.nodes if n.op == "output")
    return list(out.args[0])



_to_ir_tensor = ir_tensor  # the name callers used before onnxport.weights.ir_tensor


_SAME_VALUE = ("alias", "clone", "detach", "lift_fresh_copy", "_to_copy", "to")


def _unchanged(program: torch.export.ExportedProgram, node: Any, target: str) -> bool:
    """Whether the value a buffer mutation writes (``node``) is the buffer ``target`` itself: its
    placeholder, or that through copies and casts to its own dtype."""
    buffers = program.graph_signature.inputs_to_buffers
    while isinstance(node, torch.fx.Node):
        if node.op == "placeholder":
            return buffers.get(node.name) == target
        name = getattr(node.target, "__name__", str(node.target)).split(".")[0]
        if node.op != "call_function" or name not in _SAME_VALUE or not node.args:
            return False
        source = node.args[0]
        out, into = node.meta.get("val"), source.meta.get("val") if isinstance(source, torch.fx.Node) else None
        if not (isinstance(out, torch.Tensor) and isinstance(into, torch.Tensor) and out.dtype == into.dtype):
            return False
        node = source
    return False
