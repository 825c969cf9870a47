"""Hand-built graphs for the optimizer tests: build from ONNX text, run a pass, compare onnxruntime
before and after on random inputs at several sizes of every dim_param."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import onnxruntime as ort

_NP = {1: np.float32, 7: np.int64, 9: np.bool_, 11: np.float64, 10: np.float16}


def parse(text: str, opset: int = 20, functions: str = "") -> onnx.ModelProto:
    """An ONNX model from the text format: a graph body, with local functions appended."""
    domains = '"": %d, "local": 1' % opset if functions else '"": %d' % opset
    model = onnx.parser.parse_model(f"<ir_version: {10 if opset <= 21 else 11}, opset_import: [{domains}]>\n"
                                    + text + "\n" + functions)
    onnx.checker.check_model(model, full_check=True)
    return model


def _feeds(proto: onnx.ModelProto, sizes: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in proto.graph.input:
        t = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else sizes[d.dim_param] for d in t.shape.dim]
        dtype = _NP[t.elem_type]
        if dtype == np.bool_:
            feeds[vi.name] = np.asarray(rng.random(shape) > 0.5)
        elif np.issubdtype(dtype, np.integer):
            feeds[vi.name] = rng.integers(-5, 6, shape).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def run(proto: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(None, feeds)


def check_pass(pass_, proto: onnx.ModelProto, sizes: list[dict] | None = None, atol: float = 1e-5) -> ir.Model:
    """Run ``pass_`` on ``proto`` (as onnx_ir), check the result with the full checker, compare
    onnxruntime outputs before/after on each size set (dim_param -> size); return the new model.

    Graph inputs and outputs must keep their names, dtypes and shapes."""
    model = ir.serde.deserialize_model(proto)
    pass_(model)
    after = ir.serde.serialize_model(model)
    onnx.checker.check_model(after, full_check=True)
    for before_io, after_io in ((proto.graph.input, after.graph.input), (proto.graph.output, after.graph.output)):
        assert [v.name for v in before_io] == [v.name for v in after_io]
        assert [v.type for v in before_io] == [v.type for v in after_io]
    for i, s in enumerate(sizes or [{}]):
        feeds = _feeds(proto, s, seed=i)
        for want, got in zip(run(proto, feeds), run(after, feeds)):
            assert want.shape == got.shape and want.dtype == got.dtype
            np.testing.assert_allclose(got, want, atol=atol, rtol=1e-4)
    return model


def ops(model: ir.Model) -> Counter:
    """Op types over the main graph, its subgraphs and the local functions."""
    c = Counter(n.op_type for n in ir.traversal.RecursiveGraphIterator(model.graph))
    for f in model.functions.values():
        c.update(n.op_type for n in ir.traversal.RecursiveGraphIterator(f))
    return c


def rules_fired(model: ir.Model, op_type: str) -> list[str]:
    """The rewrite-rule names recorded on each ``op_type`` node (main graph, subgraphs, local
    functions): onnxscript's rewriter tags the nodes a rule creates with the rule's name."""
    from onnxscript.rewriter import RULE_NAME_TAG

    nodes = [n for g in (model.graph, *model.functions.values()) for n in ir.traversal.RecursiveGraphIterator(g)]
    return [n.metadata_props.get(RULE_NAME_TAG, "") for n in nodes if n.op_type == op_type]
