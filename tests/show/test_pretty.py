"""pretty_onnx: every node of every graph and function once, headers for subgraphs and functions,
typed inputs/outputs, summarized initializers and attributes, inferred shapes, every accepted input."""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnx_ir as ir
import pytest
import torch
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

import onnxport
from onnxport.show.load import ShowInputError
from show_models import ALL

NODE_LINE = re.compile(r"^\s*(\d+) \| ( *)(\S+?)\((.*?)\)(?: -> (.*))?$")


def _all_nodes(model: onnx.ModelProto):
    """(graph name, node) of the main graph, every subgraph and every function, recursively."""
    out = []

    def walk(graph_name, nodes):
        for node in nodes:
            out.append((graph_name, node))
            for attr in node.attribute:
                subs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
                for g in subs:
                    walk(g.name, g.node)

    walk(model.graph.name, model.graph.node)
    for f in model.functions:
        walk(f"{f.domain}.{f.name}", f.node)
    return out


def _node_lines(text: str) -> list[re.Match]:
    return [m for m in map(NODE_LINE.match, text.splitlines()) if m]


@pytest.mark.parametrize("name", sorted(ALL))
def test_every_node_once(name):
    model = ALL[name]()
    text = onnxport.pretty_onnx(model)
    lines = _node_lines(text)
    nodes = _all_nodes(model)
    assert len(lines) == len(nodes), text
    rendered = [(m.group(3), m.group(4), m.group(5) or "") for m in lines]
    for _, node in nodes:
        op = node.op_type if not node.domain else f"{node.domain}.{node.op_type}"
        ins = ", ".join(i or "_" for i in node.input)
        hits = [r for r in rendered if r[0] == op and r[1].startswith(ins)
                and [o.split(":")[0] for o in re.split(r", (?=[\w.]+(?::|$))", r[2])] == list(node.output)]
        assert len(hits) == 1, f"{op}({ins}) -> {list(node.output)} appears {len(hits)} times in\n{text}"


def test_subgraph_headers_name_node_attribute_level():
    text = onnxport.pretty_onnx(ALL["loop"]())
    headers = [line.strip() for line in text.splitlines() if re.match(r"== g\d", line.strip())]
    assert len(headers) == 3, text
    assert "level 1: Loop 'loop_0' .body" in headers[0]
    assert {h_.split(": ", 1)[1].split(" (")[0] for h_ in headers[1:]} == {
        "If 'if_parity' .then_branch", "If 'if_parity' .else_branch"}
    assert all("level 2" in h_ and "(in 'loop_body')" in h_ for h_ in headers[1:])
    # the nested sections are indented by their level, and the node refers to its subgraph by label
    assert re.search(r"^        == g\d, level 2", text, re.M)
    assert re.search(r"Loop\(trip, _, x, body=\{g1\}\)", text)
    assert re.search(r"If\(odd, else_branch=\{g\d\}, then_branch=\{g\d\}\)", text)


def test_function_headers_and_reference_attributes():
    text = onnxport.pretty_onnx(ALL["function"]())
    assert "== function custom.Square [opsets: ''=20] ==" in text
    assert "== function custom.ScaledTanh [opsets: ''=20, custom=1] ==" in text
    assert "attrs   alpha" in text
    assert "Constant(value_float=@alpha) -> alpha_c" in text
    assert "custom.ScaledTanh(x, alpha=0.5) -> h1: float32[batch, 3]" in text


def test_outer_scope_values_listed():
    text = onnxport.pretty_onnx(ALL["if"]())
    sections = text.split("== g")
    then_sec = next(s for s in sections if ".then_branch" in s.splitlines()[0])
    else_sec = next(s for s in sections if ".else_branch" in s.splitlines()[0])
    assert "outer   x\n" in then_sec
    assert "outer   x, w\n" in else_sec
    assert "outer" not in sections[0]


def test_io_dims_as_written_initializers_summarized():
    text = onnxport.pretty_onnx(ALL["if"](), max_values=2)
    assert "input   x: float32[batch, 3]" in text
    assert "output  y: float32[batch, 3]" in text
    assert "init    w: float32[3] [0, 1, ...]" in text
    assert "init    zero: float32[] 0" in text
    assert "opsets: ''=20" in text
    assert "init    w: float32[3] [0, 1, 2]" in onnxport.pretty_onnx(ALL["if"]())
    assert "init    w: float32[3]\n" in onnxport.pretty_onnx(ALL["if"](), max_values=0)


def test_shapes_inferred_and_optional():
    model = ALL["scan"]()
    with_shapes = onnxport.pretty_onnx(model)
    assert "Mul(row, scale) -> scaled: float32[4]" in with_shapes  # inferred inside the Scan body
    assert "Constant(value=float32 2) -> scale: float32[]" in with_shapes
    plain = onnxport.pretty_onnx(model, shapes=False)
    assert "Mul(row, scale) -> scaled\n" in plain
    assert all(":" not in (m.group(5) or "") for m in _node_lines(plain))
    assert "input   x: float32[n, 4]" in plain  # graph inputs keep their declared types
    assert len(_node_lines(plain)) == len(_node_lines(with_shapes))


def test_depth_indentation():
    lines = _node_lines(onnxport.pretty_onnx(ALL["if"]()))
    main = lines[:3]
    assert [int(m.group(1)) for m in main] == [0, 1, 2]
    assert [len(m.group(2)) for m in main] == [0, 1, 2]
    loop = _node_lines(onnxport.pretty_onnx(ALL["loop"]()))
    body = {m.group(3) + "(" + m.group(4).split(",")[0]: int(m.group(1)) for m in loop}
    assert body["Identity(cond_in"] == 0 and body["Mod(i"] == 0 and body["Cast(parity"] == 1


def test_big_attributes_and_constants_summarized():
    big = np.arange(1000, dtype=np.float32).reshape(10, 100)
    graph = h.make_graph(
        [h.make_node("Constant", [], ["c"], value=numpy_helper.from_array(big)),
         h.make_node("Pad", ["x", "pads"], ["p"], mode="constant"),
         h.make_node("Add", ["p", "c"], ["y"])],
        "g", [h.make_tensor_value_info("x", TP.FLOAT, [10, 100])],
        [h.make_tensor_value_info("y", TP.FLOAT, [10, 100])],
        initializer=[numpy_helper.from_array(np.zeros(4, np.int64), "pads"),
                     numpy_helper.from_array(np.ones((300, 300), np.float32), "unused_big")])
    text = onnxport.pretty_onnx(h.make_model(graph, opset_imports=[h.make_opsetid("", 20)]), max_values=3)
    assert "Constant(value=float32[10, 100] [0, 1, 2, ...]) -> c: float32[10, 100]" in text
    assert "init    unused_big: float32[300, 300]\n" in text  # too big: no values
    assert max(len(line) for line in text.splitlines()) < 100


def test_long_list_attribute_cut():
    node = h.make_node("Transpose", ["x"], ["y"], perm=list(range(40))[::-1])
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", TP.FLOAT, [1] * 40)],
                         [h.make_tensor_value_info("y", TP.FLOAT, [1] * 40)])
    text = onnxport.pretty_onnx(h.make_model(graph, opset_imports=[h.make_opsetid("", 20)]))
    assert "perm=[39, 38, 37, 36, 35, ...](40)" in text


def test_accepted_inputs_render_alike(tmp_path):
    proto = ALL["scan"]()
    before = proto.SerializeToString()
    path = tmp_path / "scan.onnx"
    onnx.save(proto, path)
    reference = onnxport.pretty_onnx(proto)
    assert proto.SerializeToString() == before  # the caller's model is not changed by inference
    assert onnxport.pretty_onnx(str(path)) == reference
    assert onnxport.pretty_onnx(path) == reference
    assert onnxport.pretty_onnx(ir.serde.deserialize_model(proto)) == reference
    assert onnxport.pretty_onnx(before) == reference
    external = tmp_path / "ext" / "if.onnx"
    external.parent.mkdir()
    onnx.save(ALL["if"](), external, save_as_external_data=True, all_tensors_to_one_file=True,
              location="if.onnx.data", size_threshold=0)
    assert (tmp_path / "ext" / "if.onnx.data").exists()
    assert onnxport.pretty_onnx(external) == onnxport.pretty_onnx(ALL["if"]())  # weights read from .data


def test_unsorted_nodes_shown_in_topological_order():
    graph = h.make_graph(
        [h.make_node("Relu", ["a"], ["y"]), h.make_node("Neg", ["x"], ["a"])], "g",
        [h.make_tensor_value_info("x", TP.FLOAT, ["n"])], [h.make_tensor_value_info("y", TP.FLOAT, ["n"])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 20)])
    lines = [m.group(0).strip() for m in _node_lines(onnxport.pretty_onnx(model))]
    assert lines == ["0 | Neg(x) -> a: float32[n]", "1 |  Relu(a) -> y: float32[n]"]
    assert [n.op_type for n in model.graph.node] == ["Relu", "Neg"]  # the caller's model is untouched


def test_omitted_optional_output():
    graph = h.make_graph([h.make_node("TopK", ["x", "k"], ["", "i"])], "g",
                         [h.make_tensor_value_info("x", TP.FLOAT, [5]), h.make_tensor_value_info("k", TP.INT64, [1])],
                         [h.make_tensor_value_info("i", TP.INT64, [None])])
    text = onnxport.pretty_onnx(h.make_model(graph, opset_imports=[h.make_opsetid("", 20)]), shapes=False)
    assert "TopK(x, k) -> _, i\n" in text


def test_graph_inputs():
    graph = ALL["if"]().graph
    text = onnxport.pretty_onnx(graph)
    assert "== graph 'if_main' ==" in text and len(_node_lines(text)) == 6
    assert onnxport.pretty_onnx(ir.serde.deserialize_graph(graph)).split("== graph")[1] == text.split("== graph")[1]


def test_function_alone():
    scaled = ALL["function"]().functions[1]
    text = onnxport.pretty_onnx(scaled)
    assert text.startswith("== function custom.ScaledTanh")
    assert len(_node_lines(text)) == len(scaled.node)
    assert onnxport.pretty_onnx(ir.serde.deserialize_function(scaled)) == text


def test_export_result_and_method():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) * 2

    result = onnxport.to_onnx(M(), (torch.randn(2, 3),), dynamic_shapes={"x": {0: "batch"}})
    text = onnxport.pretty_onnx(result)
    assert text == result.pretty()
    assert "input   x: float32[batch, 3]" in text
    assert len(_node_lines(text)) == result.count_nodes()


def test_unknown_input_raises():
    with pytest.raises(ShowInputError, match="cannot show an object of type int") as e:
        onnxport.pretty_onnx(3)
    assert isinstance(e.value, onnxport.ExportError) and e.value.hint
    with pytest.raises(ShowInputError, match="no such file"):
        onnxport.pretty_onnx("/nonexistent/model.onnx")
    with pytest.raises(ShowInputError, match="not a serialized ONNX model"):
        onnxport.pretty_onnx(b"\xff\xfe not a model")


def test_failed_inference_is_a_note():
    graph = h.make_graph([h.make_node("Add", ["x", "s"], ["y"]), h.make_node("Neg", ["x"], ["z"])], "g",
                         [h.make_tensor_value_info("x", TP.FLOAT, [2, 3])],
                         [h.make_tensor_value_info("y", TP.FLOAT, None), h.make_tensor_value_info("z", TP.FLOAT, None)],
                         initializer=[numpy_helper.from_array(np.ones((4, 4), np.float32), "s")])
    text = onnxport.pretty_onnx(h.make_model(graph, opset_imports=[h.make_opsetid("", 20)]))
    assert "# note: shape inference failed: [ShapeInferenceError]" in text
    assert len(_node_lines(text)) == 2
    assert "Neg(x) -> z: float32[2, 3]" in text  # lenient inference still shapes the rest


SCREEN_ROWS, SCREEN_COLS = 60, 180


@pytest.mark.slow
def test_transformer_encoder_fits_one_screen_per_layer():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True, dropout=0.0)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    result = onnxport.to_onnx(model, (torch.randn(2, 5, 32),), dynamic_shapes=({0: "batch", 1: "seq"},))
    text = result.pretty()
    lines = text.splitlines()
    assert len(lines) <= 2 * SCREEN_ROWS, text
    assert max(len(line) for line in lines) <= SCREEN_COLS, max(lines, key=len)
    assert len(_node_lines(text)) == result.count_nodes()
    assert "input   src: float32[batch, seq, 32]" in text
    assert re.search(r"init    layers\.0\.self_attn\.in_proj_weight(\.T)?: "
                     r"float32\[(32, 96|96, 32)\] \[(\S+, ){5}\.\.\.\]", text)
    for line in lines:  # every list of values is cut after max_values items
        for values in re.findall(r"\[([^\]]*)\]", line):
            assert values.count(",") <= 5, line
    shaped = [m for m in _node_lines(text) if m.group(5) and ": float32[" in m.group(5)]
    assert len(shaped) >= result.count_nodes() // 2  # intermediate shapes are shown
