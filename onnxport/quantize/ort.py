"""onnxruntime.quantization's arithmetic on onnxport's models: dynamic int8, static int8 (QDQ),
int4 weight-only (``MatMulNBits``).

Each function takes the float model (an ``onnx.ModelProto``) and the names of the nodes to quantize,
and returns a new ``onnx.ModelProto``; the float model is not changed. Before quantizing, a ``Gemm``
whose second operand is an initializer becomes ``MatMul`` (+ ``Add``), the operator onnxruntime's
dynamic and weight-only quantizers take (onnxport fuses 2-D ``MatMul`` + ``Add`` into ``Gemm``).

References: onnxruntime's quantization documentation
(https://onnxruntime.ai/docs/performance/model-optimizations/quantization.html),
``onnxruntime.quantization.quantize_dynamic`` / ``quantize_static`` / ``MatMulNBitsQuantizer``;
the ``MatMulNBits`` and ``DynamicQuantizeMatMul`` contrib operators.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from typing import Iterator

import onnx
import onnx_ir as ir

WEIGHT_OP_TYPES = ["MatMul", "Conv"]


def unfuse_gemms(model: ir.Model, names: set[str]) -> set[str]:
    """Rewrite, in place, each ``Gemm(a, W, c)`` named in ``names`` with ``alpha = beta = 1``,
    ``transA = 0`` and an initializer ``W`` into ``MatMul(a, W')`` (``W'`` the initializer transposed
    when ``transB = 1``) followed by ``Add(c)``; returns ``names`` with the MatMuls in place of the
    Gemms (same names; the Add is ``<name>_bias``)."""
    graph = model.graph
    out = set(names)
    for node in list(graph):
        if node.op_type != "Gemm" or node.name not in names:
            continue
        attrs = node.attributes
        if attrs.get_int("transA", 0) or attrs.get_float("alpha", 1.0) != 1.0 or attrs.get_float("beta", 1.0) != 1.0:
            out.discard(node.name)
            continue
        a, w = node.inputs[0], node.inputs[1]
        c = node.inputs[2] if len(node.inputs) > 2 else None
        if attrs.get_int("transB", 0):
            data = w.const_value.numpy().T.copy()
            name = f"{w.name}.T" if not w.name.endswith(".T") else w.name[:-2]
            while name in graph.initializers:
                name += "_"
            w = ir.Value(name=name, const_value=ir.tensor(data, name=name), type=w.type, shape=ir.Shape(data.shape))
            graph.register_initializer(w)
        y = node.outputs[0]
        mm = ir.node("MatMul", [a, w], name=node.name)
        mm.outputs[0].name = f"{y.name}_matmul" if c is not None else None
        mm.outputs[0].dtype, mm.outputs[0].shape = y.dtype, y.shape
        new = [mm]
        if c is not None:
            add = ir.node("Add", [mm.outputs[0], c], name=f"{node.name}_bias")
            add.outputs[0].dtype, add.outputs[0].shape = y.dtype, y.shape
            new.append(add)
        graph.insert_before(node, new)
        y.replace_all_uses_with(new[-1].outputs[0], replace_graph_outputs=True)
        graph.remove(node, safe=True)
        if y.name and new[-1].outputs[0].name != y.name:
            new[-1].outputs[0].name = y.name
    ir.passes.common.RemoveUnusedNodesPass()(model)
    return out


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """onnxruntime.quantization's advice printed through the root logger (pre-processing...)
    silenced while it runs; the level restored after."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def dynamic_int8(proto: onnx.ModelProto, nodes: list[str]) -> onnx.ModelProto:
    """Dynamic int8: weights int8 per output channel (symmetric), activations quantized at run
    time (uint8, per tensor); ``MatMul`` nodes in ``nodes`` become ``DynamicQuantizeMatMul``."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _quiet(), tempfile.TemporaryDirectory(prefix="onnxport-quantize-") as tmp:
        out = os.path.join(tmp, "model.onnx")
        quantize_dynamic(proto, out, op_types_to_quantize=["MatMul"], per_channel=True, weight_type=QuantType.QInt8,
                         nodes_to_quantize=list(nodes), extra_options={"MatMulConstBOnly": True})
        return onnx.load(out)


def static_int8(proto: onnx.ModelProto, nodes: list[str], reader) -> onnx.ModelProto:
    """Static int8 in QDQ form: ``QuantizeLinear``/``DequantizeLinear`` pairs around the inputs of
    the ``nodes`` (``MatMul``, ``Conv``), activations uint8 with ranges from ``reader``'s inputs
    (min/max calibration), weights int8 per output channel."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    with _quiet(), tempfile.TemporaryDirectory(prefix="onnxport-quantize-") as tmp:
        out = os.path.join(tmp, "model.onnx")
        quantize_static(proto, out, reader, quant_format=QuantFormat.QDQ, op_types_to_quantize=WEIGHT_OP_TYPES,
                        per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        nodes_to_quantize=list(nodes), calibrate_method=CalibrationMethod.MinMax,
                        extra_options={"MatMulConstBOnly": True},
                        calibration_providers=["CPUExecutionProvider"])
        return onnx.load(out)


def nbits(proto: onnx.ModelProto, nodes: list[str], block_size: int, accuracy_level: int,
          bits: int = 4) -> onnx.ModelProto:
    """Weight-only ``bits``-bit (4 or 8) quantization: each ``MatMul`` of ``nodes`` with a 2-D
    initializer weight becomes ``MatMulNBits`` (symmetric blocks of ``block_size`` along the input
    dimension); activations stay float (``accuracy_level`` 4 lets onnxruntime compute in int8 on the
    fly, 0 in float)."""
    from onnxruntime.quantization.matmul_nbits_quantizer import (DefaultWeightOnlyQuantConfig,
                                                                 MatMulNBitsQuantizer)

    all_matmuls = [n.name for n in proto.graph.node if n.op_type == "MatMul"]
    config = DefaultWeightOnlyQuantConfig(block_size=block_size, is_symmetric=True, accuracy_level=accuracy_level,
                                          bits=bits)
    quantizer = MatMulNBitsQuantizer(proto, bits=bits, block_size=block_size, is_symmetric=True,
                                     accuracy_level=accuracy_level,
                                     nodes_to_exclude=[n for n in all_matmuls if n not in set(nodes)],
                                     algo_config=config)
    with _quiet():
        quantizer.process()
    return quantizer.model.model


def count_ops(proto: onnx.ModelProto) -> dict[str, int]:
    """Operator counts of the main graph (``QuantizeLinear``: 3...)."""
    out: dict[str, int] = {}
    for n in proto.graph.node:
        out[n.op_type] = out.get(n.op_type, 0) + 1
    return out

