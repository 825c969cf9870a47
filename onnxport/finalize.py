"""Finalize: inline bodies on request, constants as initializers, sort, name values uniquely, drop
unused opsets, record the adopted constraints, and check the result with the ONNX checker."""

from __future__ import annotations

import warnings
from typing import Any

import onnx_ir as ir
import onnx_ir.passes.common as common

from onnxport.errors import TranslationError
from onnxport.metadata import CONSTRAINTS_KEY, FLOAT32_COMPUTE_KEY
from onnxport.optimize.bfloat16 import widen_bfloat16


def record_constraints(model: ir.Model, constraints: list[str] | None) -> None:
    """The ``constraints`` adopted on the model's dynamic dimensions in its metadata under
    ``onnxport.constraints``, ``; ``-joined (none: the key removed)."""
    if constraints:
        model.metadata_props[CONSTRAINTS_KEY] = "; ".join(constraints)
    else:
        model.metadata_props.pop(CONSTRAINTS_KEY, None)


def finalize(model: ir.Model, *, inline: bool = False, constraints: list[str] | None = None) -> ir.Model:
    """Make ``model`` ready to serialize (in place): inlined functions when ``inline``, topological
    order, unique value names, only the opsets in use; the ``constraints`` adopted on its dynamic
    dimensions (``time % 4 == 0``) in the metadata under ``onnxport.constraints``, joined by ``; ``.
    The nodes on bfloat16 that onnxruntime's CPU provider has no kernel for compute in float32
    between Casts (``optimize.bfloat16``), said in a warning and in the metadata under
    ``onnxport.float32_compute`` (``ExportResult.float32_compute``). Ends with onnx-ir's
    ``CheckerPass`` (``onnx.checker``, big initializers left out).

    Raises:
        TranslationError: the model fails the ONNX checker (an exporter bug, with the checker's words),
            or holds a bfloat16 node onnxruntime's CPU provider cannot load that has no float32 form
            (its bfloat16 output set by an attribute), named with its op type and the user's line: the
            export never writes a file that does not load.
    """
    _restore_output_types(model)
    record_constraints(model, constraints)
    _runnable_bfloat16(model)
    if inline and model.functions:
        common.InlinePass()(model)
        common.RemoveUnusedFunctionsPass()(model)
    # constants become initializers of the main graph (a subgraph reads them from the outer
    # scope); a local function's constants become inputs its callers pass from there
    _lift_function_constants(model)
    common.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0)(model)
    common.LiftSubgraphInitializersToMainGraphPass()(model)
    common.DeduplicateInitializersPass()(model)
    common.TopologicalSortPass()(model)
    common.NameFixPass()(model)
    _declare_domains(model)
    common.RemoveUnusedOpsetsPass()(model)
    try:
        common.CheckerPass()(model)
    except Exception as e:  # noqa: BLE001 - onnx.checker's ValidationError (and what wraps it)
        raise TranslationError(f"the exported model fails the ONNX checker: {str(e).splitlines()[0][:300]}",
                               hint="this is an exporter bug: report it with the model; "
                                    "onnxport.pretty_onnx(result) shows the graph") from e
    return model


def _runnable_bfloat16(model: ir.Model) -> None:
    """``model``'s bfloat16 nodes that onnxruntime's CPU provider cannot run, in float32 between
    Casts; stated (a warning, the metadata), or refused where no float32 form exists."""
    widened, unloadable = widen_bfloat16(model)
    if unloadable:
        raise TranslationError(
            f"onnxruntime's CPU provider has no bfloat16 kernel for {'; '.join(unloadable)}, whose bfloat16 "
            "result an attribute sets: the model would not load",
            hint="export the model in float32 (model.float()) or float16, or compute that part in float32 "
                 "in the model's code")
    if widened:
        model.metadata_props[FLOAT32_COMPUTE_KEY] = ", ".join(widened)
        warnings.warn(
            f"onnxruntime's CPU provider has no bfloat16 kernel for {', '.join(widened)}: those nodes compute "
            "in float32 between Casts (inputs, outputs and weights stay bfloat16, each result rounded to "
            "bfloat16 as in eager PyTorch); ExportResult.float32_compute lists them", stacklevel=2)


def _lift_function_constants(model: ir.Model) -> None:
    """The Constant nodes of a local function become inputs of the function, which every call
    passes from a main-graph initializer (a call inside a Scan/If/Loop body reads it from the outer
    scope; a call inside another function passes an input that function gains in turn): fewer
    nodes, and equal constants of several functions shared."""
    calls: dict[tuple, list[tuple[ir.Node, tuple | None]]] = {}
    owners: list[tuple[Any, tuple | None]] = [(model.graph, None)]
    owners += [(f, key) for key, f in model.functions.items()]
    for graph_like, owner in owners:
        for node in ir.traversal.RecursiveGraphIterator(graph_like):
            if (node.domain, node.op_type, node.overload) in model.functions:
                calls.setdefault((node.domain, node.op_type, node.overload), []).append((node, owner))
    passed: dict[tuple[tuple, str], ir.Value] = {}  # (function, initializer name) -> its input

    def pass_down(key: tuple, init: ir.Value, name: str | None = None) -> ir.Value:
        """The input of function ``key`` carrying ``init``, added (and passed by its callers) once."""
        if (key, init.name) not in passed:
            function = model.functions[key]
            param = ir.Value(name=name or init.name, type=init.type, shape=init.shape)
            function.inputs.append(param)
            passed[(key, init.name)] = param
            for call, owner in calls.get(key, []):
                call.resize_inputs(len(call.inputs) + 1)
                call.replace_input_with(len(call.inputs) - 1, init if owner is None else pass_down(owner, init))
        return passed[(key, init.name)]

    for key, function in model.functions.items():
        if key not in calls:
            continue
        for node in [n for n in function if n.op_type == "Constant" and n.domain in ("", "ai.onnx")]:
            attr = node.attributes.get("value")
            if attr is None or len(node.outputs) != 1 or node.outputs[0] in function.outputs:
                continue  # a constant the function returns stays its node (a graph output is produced inside)
            name = f"{function.name}.{node.outputs[0].name}"
            init = ir.Value(name=name, const_value=attr.value, type=ir.TensorType(attr.value.dtype),
                            shape=ir.Shape(attr.value.shape))
            model.graph.register_initializer(init)
            node.outputs[0].replace_all_uses_with(pass_down(key, init, node.outputs[0].name))
            function.remove(node, safe=True)


def _restore_output_types(model: ir.Model) -> None:
    """Graph outputs keep the dtype and shape given at translation, even when an optimization
    replaced the value behind an output by an equal one that carries less (CSE)."""
    recorded = model.meta.get("output_types", {})
    for value in model.graph.outputs:
        typ, shape = recorded.get(value.name, (None, None))
        if value.type is None and typ is not None:
            value.type = typ
        if value.shape is None and shape is not None:
            value.shape = shape


def _declare_domains(model: ir.Model) -> None:
    """Every operator domain used (user translations emitting ``_domain="my.domain"``, local
    functions) is imported by the model and by each function using it (version 1 unless set)."""
    def used(graph_like) -> set[str]:
        return {n.domain for n in ir.traversal.RecursiveGraphIterator(graph_like)}

    for domain in used(model.graph):
        model.graph.opset_imports.setdefault(domain, 1)
    for function in model.functions.values():
        for domain in used(function):
            function.opset_imports.setdefault(domain, model.graph.opset_imports.get(domain, 1))
            model.graph.opset_imports.setdefault(domain, function.opset_imports[domain])
