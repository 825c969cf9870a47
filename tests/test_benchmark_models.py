"""benchmarks/models.py: every factory builds, its model runs eagerly on its example and on its
other-size inputs, and those inputs really change the dynamic dimensions (no export, no timing)."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    if f"_bench_{name}" in sys.modules:
        return sys.modules[f"_bench_{name}"]
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


models = _load("models")

# every family the tests export has a benchmark entry
FAMILIES = {"resnet_same_cnn", "transformer_encoder", "scan_cdist", "scan_decoder", "cond", "while_loop", "conformer",
            "lstm_tagger", "gru_tagger", "lstm_packed_tagger", "gru_packed_tagger", "unet", "vit", "whisper_encoder",
            "bert", "gpt2", "llama"}


def test_every_family_is_listed():
    assert FAMILIES <= set(models.MODELS), sorted(FAMILIES - set(models.MODELS))


def _dynamic_axes(spec):
    """(input index, axis) pairs named dynamic in a dynamic_shapes dict keyed by parameter name
    (inputs whose spec is a dict of axes; nested specs, a cache per layer, are left out)."""
    out = []
    for i, dims in enumerate(spec.values()):
        if isinstance(dims, dict):
            out += [(i, axis) for axis, d in dims.items() if d is not None]
    return out


@pytest.mark.parametrize("name", list(models.MODELS))
def test_factory_builds_and_runs_eagerly(name):
    try:
        case = models.MODELS[name]()
    except ImportError as e:  # what the factory needs is absent here (compare.py skips it with a note)
        pytest.skip(str(e))
    assert isinstance(case.model, torch.nn.Module) and not case.model.training
    assert isinstance(case.dynamic_shapes, dict) and len(case.dynamic_shapes) == len(case.args)
    axes = _dynamic_axes(case.dynamic_shapes)
    assert axes, "a benchmark model has at least one dynamic dimension"
    with torch.no_grad():
        outputs = case.model(*case.args)
        for other in case.others:
            assert len(other) == len(case.args)
            assert any(other[i].shape[a] != case.args[i].shape[a] for i, a in axes), "same sizes as the example"
            again = case.model(*other)
            assert type(again) is type(outputs)
    leaves = torch.utils._pytree.tree_leaves(outputs)  # nested outputs: a decoder's cache per layer
    assert all(torch.isfinite(t).all() for t in leaves if t.dtype.is_floating_point)


def test_grown_inputs_share_sizes_between_inputs():
    """compare.py's default other-size inputs: one new size per dimension name, used by every input."""
    compare = _load("compare")
    case = models.MODELS["transformer_encoder"]()
    (grown,) = compare.other_size_inputs(case.args, case.dynamic_shapes)
    assert grown.shape[0] == case.args[0].shape[0] + 3 and grown.shape[1] == case.args[0].shape[1] + 3
    ids = torch.zeros(2, 9, dtype=torch.int64)
    a, b = compare.other_size_inputs((ids, ids), {"a": {0: "batch", 1: "seq"}, "b": {0: "batch", 1: "seq"}})
    assert a.shape == b.shape == (5, 12)


def test_status_names_the_exporter_that_failed_or_was_wrong():
    compare = _load("compare")
    good = compare.Measure(ok=True, correct=True, seconds=1.0, capture=0.5, own=0.5, nodes=10, latency_ms=1.0)
    wrong = compare.Measure(ok=True, correct=False, seconds=2.0, nodes=20, latency_ms=2.0)
    failed = compare.Measure(ok=False, error="TorchExportError: x")
    rows = compare.build_rows({"a": (good, good), "b": (good, wrong), "c": (good, failed)})
    assert rows[0][-1] == "ok"
    assert rows[1][-1] == "torch.onnx WRONG at other sizes"
    assert rows[2][-1] == "torch.onnx FAILED to export (TorchExportError: x)"
    assert rows[-1][0] == "geomean (1 both right)" and rows[-1][6] == "1.00"


def test_count_nodes_separates_shape_computations_and_counts_functions():
    import onnx
    import onnx_ir as ir

    compare = _load("compare")
    proto = onnx.parser.parse_model("""
<ir_version: 10, opset_import: ["" : 20, "local" : 1]>
g (float[N, 4] x) => (float[N, 4] y, float[N, 4] z) {
  s = Shape(x)
  i = Constant<value = int64 {0}>()
  n = Gather<axis = 0>(s, i)
  zero = Constant<value = int64[1] {0}>()
  n1 = Unsqueeze(n, zero)
  four = Constant<value = int64[1] {4}>()
  shp = Concat<axis = 0>(n1, four)
  r = Reshape(x, shp)
  y = Relu(r)
  z = local.f(x)
}
<domain: "local", opset_import: ["" : 20]>
f (a) => (b) {
  b = Neg(a)
}""")
    model = ir.serde.deserialize_model(onnx.shape_inference.infer_shapes(proto))
    # Shape, Gather, Unsqueeze, Concat compute sizes; the constants, Reshape, Relu and Neg do not;
    # the call of local.f is counted apart from the operator nodes
    assert compare.count_nodes(model) == (10, 4, 1)  # 9 operators in the graph, 1 in the function
