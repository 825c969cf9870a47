"""Small ONNX models with Scan, If, Loop and local functions, built by hand with ``onnx.helper``.

Each builder returns an ``onnx.ModelProto`` that passes ``onnx.checker.check_model(full_check=True)``
and runs in onnxruntime; dims are symbolic (``batch``, ``n``) where the operator allows.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

OPSET = 20


def _model(graph: onnx.GraphProto, functions=(), extra_opsets=()) -> onnx.ModelProto:
    opsets = [h.make_opsetid("", OPSET)] + [h.make_opsetid(d, 1) for d in extra_opsets]
    model = h.make_model(graph, opset_imports=opsets, functions=list(functions), producer_name="handmade")
    model.ir_version = 10
    return model


def scan_model() -> onnx.ModelProto:
    """Cumulative sum over the rows of ``x: float32[n, 4]`` with Scan; the body also scales by a
    constant. Outputs: the final sum ``total: float32[4]`` and every partial sum ``partial: float32[n, 4]``."""
    body = h.make_graph(
        [
            h.make_node("Constant", [], ["scale"], value=numpy_helper.from_array(np.array(2.0, np.float32))),
            h.make_node("Mul", ["row", "scale"], ["scaled"]),
            h.make_node("Add", ["acc_in", "scaled"], ["acc_out"]),
            h.make_node("Identity", ["acc_out"], ["partial_row"]),
        ],
        "scan_body",
        [h.make_tensor_value_info("acc_in", TP.FLOAT, [4]), h.make_tensor_value_info("row", TP.FLOAT, [4])],
        [h.make_tensor_value_info("acc_out", TP.FLOAT, [4]), h.make_tensor_value_info("partial_row", TP.FLOAT, [4])],
    )
    graph = h.make_graph(
        [
            h.make_node("Scan", ["init", "x"], ["total", "partial"], body=body, num_scan_inputs=1, name="scan_0"),
        ],
        "scan_main",
        [h.make_tensor_value_info("x", TP.FLOAT, ["n", 4])],
        [h.make_tensor_value_info("total", TP.FLOAT, [4]), h.make_tensor_value_info("partial", TP.FLOAT, ["n", 4])],
        initializer=[numpy_helper.from_array(np.zeros(4, np.float32), "init")],
    )
    return _model(graph)


def if_model() -> onnx.ModelProto:
    """``y = x * 2 if sum(x) > 0 else x - w``: both branches read ``x`` (and ``w``) from the outer scope."""
    then_g = h.make_graph(
        [h.make_node("Constant", [], ["two"], value_float=2.0), h.make_node("Mul", ["x", "two"], ["t_out"])],
        "then_g", [], [h.make_tensor_value_info("t_out", TP.FLOAT, ["batch", 3])])
    else_g = h.make_graph(
        [h.make_node("Sub", ["x", "w"], ["e_out"])],
        "else_g", [], [h.make_tensor_value_info("e_out", TP.FLOAT, ["batch", 3])])
    graph = h.make_graph(
        [
            h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            h.make_node("Greater", ["s", "zero"], ["cond"]),
            h.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g, name="if_0"),
        ],
        "if_main",
        [h.make_tensor_value_info("x", TP.FLOAT, ["batch", 3])],
        [h.make_tensor_value_info("y", TP.FLOAT, ["batch", 3])],
        initializer=[numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
                     numpy_helper.from_array(np.arange(3, dtype=np.float32), "w")],
    )
    return _model(graph)


def loop_model() -> onnx.ModelProto:
    """Loop ``trip`` times over ``acc = acc + x`` (or ``acc - x`` on odd iterations, an If nested in the
    body: level 2), collecting each ``acc`` as a scan output."""
    then_g = h.make_graph([h.make_node("Sub", ["acc_in", "x"], ["tb"])], "odd_g", [],
                          [h.make_tensor_value_info("tb", TP.FLOAT, ["batch"])])
    else_g = h.make_graph([h.make_node("Add", ["acc_in", "x"], ["eb"])], "even_g", [],
                          [h.make_tensor_value_info("eb", TP.FLOAT, ["batch"])])
    body = h.make_graph(
        [
            h.make_node("Identity", ["cond_in"], ["cond_out"]),
            h.make_node("Mod", ["i", "two"], ["parity"]),
            h.make_node("Cast", ["parity"], ["odd"], to=TP.BOOL),
            h.make_node("If", ["odd"], ["acc_out"], then_branch=then_g, else_branch=else_g, name="if_parity"),
            h.make_node("Identity", ["acc_out"], ["acc_scan"]),
        ],
        "loop_body",
        [h.make_tensor_value_info("i", TP.INT64, []), h.make_tensor_value_info("cond_in", TP.BOOL, []),
         h.make_tensor_value_info("acc_in", TP.FLOAT, ["batch"])],
        [h.make_tensor_value_info("cond_out", TP.BOOL, []), h.make_tensor_value_info("acc_out", TP.FLOAT, ["batch"]),
         h.make_tensor_value_info("acc_scan", TP.FLOAT, ["batch"])],
    )
    graph = h.make_graph(
        [
            h.make_node("Loop", ["trip", "", "x"], ["acc", "accs"], body=body, name="loop_0"),
        ],
        "loop_main",
        [h.make_tensor_value_info("x", TP.FLOAT, ["batch"]), h.make_tensor_value_info("trip", TP.INT64, [])],
        [h.make_tensor_value_info("acc", TP.FLOAT, ["batch"]),
         h.make_tensor_value_info("accs", TP.FLOAT, [None, "batch"])],
        initializer=[numpy_helper.from_array(np.array(2, np.int64), "two")],
    )
    return _model(graph)


def function_model() -> onnx.ModelProto:
    """``y = scaled_gelu(x, alpha=0.5)`` twice through a local function ``custom.ScaledTanh`` taking
    an attribute (``alpha``, a reference attribute inside), itself calling ``custom.Square``."""
    square = h.make_function("custom", "Square", ["a"], ["b"], [h.make_node("Mul", ["a", "a"], ["b"])],
                             [h.make_opsetid("", OPSET)])
    alpha = h.make_attribute_ref("value_float", onnx.AttributeProto.FLOAT)
    alpha.name = "value_float"
    alpha.ref_attr_name = "alpha"
    const = h.make_node("Constant", [], ["alpha_c"])
    const.attribute.append(alpha)
    scaled = h.make_function(
        "custom", "ScaledTanh", ["u"], ["v"],
        [const, h.make_node("Mul", ["u", "alpha_c"], ["m"]), h.make_node("Tanh", ["m"], ["t"]),
         h.make_node("Square", ["t"], ["v"], domain="custom")],
        [h.make_opsetid("", OPSET), h.make_opsetid("custom", 1)], attributes=["alpha"])
    graph = h.make_graph(
        [
            h.make_node("ScaledTanh", ["x"], ["h1"], domain="custom", alpha=0.5, name="call_0"),
            h.make_node("ScaledTanh", ["h1"], ["y"], domain="custom", alpha=2.0, name="call_1"),
        ],
        "function_main",
        [h.make_tensor_value_info("x", TP.FLOAT, ["batch", 3])],
        [h.make_tensor_value_info("y", TP.FLOAT, ["batch", 3])],
    )
    return _model(graph, functions=[square, scaled], extra_opsets=["custom"])


ALL = {"scan": scan_model, "if": if_model, "loop": loop_model, "function": function_model}


def sample_inputs(name: str, batch: int = 3) -> dict[str, np.ndarray]:
    """Inputs for the model ``ALL[name]`` with ``batch`` (or ``n``) rows."""
    rng = np.random.default_rng(0)
    if name == "scan":
        return {"x": rng.standard_normal((batch, 4)).astype(np.float32)}
    if name == "loop":
        return {"x": rng.standard_normal(batch).astype(np.float32), "trip": np.array(3, np.int64)}
    return {"x": rng.standard_normal((batch, 3)).astype(np.float32)}
