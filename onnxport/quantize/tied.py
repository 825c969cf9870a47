"""A language model's output projection tied to its token embedding, quantized with it.

onnxport exports a tied ``lm_head`` as ``MatMul(hidden, Transpose(table))`` over the one embedding
table the ``Gather`` of the token ids reads; its weight is no initializer, so ``choose`` does not
see it. ``untie`` gives that ``MatMul`` the transposed table as an initializer of its own, so the
projection is quantized like the others. After int4 quantization, ``share_embedding`` makes the
``Gather`` read the projection's int4 blocks: ``MatMulNBits`` stores its weight ``[N, K]``
(``N`` = vocabulary, ``K`` = hidden size) as ``uint8 [N, K / block_size, block_size / 2]`` with
scales ``[N, K / block_size]``, which are, reshaped to ``[N, K / 2]`` and ``[N, K / block_size]``,
the table ``GatherBlockQuantized`` (``gather_axis=0``, ``quantize_axis=1``, ``bits=4``, no zero
point: 8 for uint8 data, as ``MatMulNBits``'s symmetric blocks) gathers rows of and dequantizes.
The file then holds the table once, in int4.

Semantics: onnxruntime's contrib operators ``com.microsoft.MatMulNBits`` and
``com.microsoft.GatherBlockQuantized`` (docs/ContribOperators.md of onnxruntime); the layout is
the one ``onnxruntime.quantization.matmul_nbits_quantizer`` writes.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper, numpy_helper


def untie(model: ir.Model) -> dict[str, str]:
    """Rewrite, in place, each ``MatMul(a, Transpose(W))`` whose ``W`` is a 2-D float initializer an
    axis-0 ``Gather`` reads (a projection tied to an embedding table) into ``MatMul(a, W')``, ``W'``
    a new initializer ``<W>.T`` holding ``W`` transposed. Returns ``{MatMul output name: W name}``."""
    graph = model.graph
    tables = {n.inputs[0] for n in graph if n.op_type == "Gather" and n.domain in ("", "ai.onnx")
              and n.attributes.get_int("axis", 0) == 0 and n.inputs[0] is not None and n.inputs[0].is_initializer()}
    tied: dict[str, str] = {}
    for node in list(graph):
        if node.op_type != "MatMul" or node.domain not in ("", "ai.onnx") or node.inputs[1] is None:
            continue
        transpose = node.inputs[1].producer()
        if transpose is None or transpose.op_type != "Transpose" or transpose.inputs[0] not in tables:
            continue
        table = transpose.inputs[0]
        perm = list(transpose.attributes.get_ints("perm", [1, 0]))
        if table.shape is None or len(table.shape) != 2 or perm != [1, 0]:
            continue
        data = table.const_value.numpy().T.copy()
        name = f"{table.name}.T"
        while name in graph.initializers:
            name += "_"
        w = ir.Value(name=name, const_value=ir.tensor(data, name=name), type=table.type, shape=ir.Shape(data.shape))
        graph.register_initializer(w)
        node.replace_input_with(1, w)
        tied[node.outputs[0].name] = table.name
    if tied:
        ir.passes.common.RemoveUnusedNodesPass()(model)
    return tied


def share_embedding(proto: onnx.ModelProto, tied: dict[str, str], block_size: int) -> list[str]:
    """Replace, in ``proto`` (an int4-quantized model), each axis-0 ``Gather`` of a table in
    ``tied`` (``untie``'s answer) whose projection became ``MatMulNBits`` by
    ``GatherBlockQuantized`` over that node's blocks (module docstring); the float table is dropped
    when nothing else reads it. A table whose hidden size is not a multiple of ``block_size`` (its
    last block padded) keeps its float ``Gather``. Returns the names of the tables shared."""
    graph = proto.graph
    producers = {o: n for n in graph.node for o in n.output}
    inits = {i.name: i for i in graph.initializer}
    shared = []
    for output, table in tied.items():
        nbits = producers.get(output)
        if nbits is None or nbits.op_type != "MatMulNBits" or table not in inits:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in nbits.attribute}
        vocab, hidden = inits[table].dims
        if attrs.get("bits", 4) != 4 or attrs.get("block_size") != block_size or hidden % block_size or \
                len(nbits.input) > 3 and nbits.input[3]:
            continue
        nodes = list(graph.node)
        at = [i for i, n in enumerate(nodes) if n.op_type == "Gather" and n.domain in ("", "ai.onnx")
              and n.input[0] == table and all(a.i == 0 for a in n.attribute if a.name == "axis")]
        gathers = [nodes[i] for i in at]
        if not gathers:
            continue
        shape = f"{table}.shape_{vocab}x-1"
        data, scales = f"{table}.int4", f"{table}.int4_scales"
        graph.initializer.append(numpy_helper.from_array(np.array([vocab, -1], np.int64), shape))
        new = [helper.make_node("Reshape", [nbits.input[1], shape], [data], name=f"{table}.int4_reshape"),
               helper.make_node("Reshape", [nbits.input[2], shape], [scales], name=f"{table}.int4_scales_reshape")]
        for g in gathers:
            new.append(helper.make_node("GatherBlockQuantized", [data, g.input[1], scales], list(g.output),
                                        name=f"{g.name}_Q4", domain="com.microsoft", gather_axis=0,
                                        quantize_axis=1, block_size=block_size, bits=4))
        # the new nodes where the first Gather was, the Gathers left out: one pass over the nodes
        gone = set(at)
        kept = [n for i, n in enumerate(nodes) if i not in gone]
        first = at[0]
        del graph.node[:]
        graph.node.extend(kept[:first] + new + kept[first:])
        if not any(table in n.input for n in graph.node):
            graph.initializer.remove(inits[table])
        shared.append(table)
    if shared and not any(o.domain == "com.microsoft" for o in proto.opset_import):
        proto.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return shared
