"""Axes and defaults written as fusion tools read them, and what onnxruntime's fusion tools then fuse:
on onnxport's BERT and Llama (transformers' own classes, tiny configs), onnxscript's
``ort_fusions.optimize_for_ort`` fuses at least what it fuses on torch.onnx's graph of the same
model (Attention / MultiHeadAttention, SkipLayerNormalization / SkipSimplifiedLayerNormalization,
RotaryEmbedding), and the fused model still computes what eager PyTorch computes."""

import warnings

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch

import onnxport
from onnxport.optimize.fusion_forms import FusionFormsPass
from optcheck import check_pass, ops, parse

transformers = pytest.importorskip("transformers")
ort_fusions = pytest.importorskip("onnxscript.rewriter.ort_fusions")


def test_the_last_axis_is_written_minus_one():
    model = check_pass(FusionFormsPass(), parse("""

agraph (float[N, 4] x, float[N, 4] y) => (float[N, 8] c, float[N, 4] s, float[N, 1] m) {
  c = Concat<axis = 1>(x, y)
  s = Softmax<axis = 1>(x)
  ax = Constant<value = int64[1] {1}>()
  m = ReduceMean<keepdims = 1>(x, ax)
}"""), [{"N": 1}, {"N": 5}])
    nodes = {n.op_type: n for n in model.graph}
    assert nodes["Concat"].attributes.get_int("axis") == -1
    assert nodes["Softmax"].attributes.get_int("axis") == -1
    reduce = nodes["ReduceMean"]
    assert reduce.inputs[1].const_value.numpy().tolist() == [-1]
    assert reduce.attributes.get_int("noop_with_empty_axes") == 0
    assert ops(model)["ReduceMean"] == 1


def test_an_axis_other_than_the_last_is_left_as_written():
    model = check_pass(FusionFormsPass(), parse("""

agraph (float[N, 4] x, float[N, 4] y) => (float[M, 4] c) {
  c = Concat<axis = 0>(x, y)
}"""), [{"N": 2}])
    assert next(iter(model.graph)).attributes.get_int("axis") == 0


class _Text(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask)[0]


def _bert():
    cfg = transformers.BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, max_position_embeddings=128)
    return _Text(transformers.BertModel(cfg, add_pooling_layer=False))


def _llama():
    cfg = transformers.LlamaConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, intermediate_size=128, max_position_embeddings=128,
                                   use_cache=False)
    return _Text(transformers.LlamaForCausalLM(cfg))


FUSED = {"bert": {"attention": 2, "skip_layer_normalization": 4},
         "llama": {"sdpa_via_mha": 2, "skip_rms_normalization": 4, "rotary_embedding": 4}}


@pytest.mark.slow
@pytest.mark.parametrize("build", [_bert, _llama], ids=["bert", "llama"])
def test_onnxruntime_fusion_tools_fuse_onnxports_graph_as_torch_onnxs(build):
    torch.manual_seed(0)
    model = build().eval()
    ids = torch.randint(0, 1000, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.int64)
    mask[1, 7:] = 0
    result = onnxport.to_onnx(model, (ids, mask), dynamic_shapes={"input_ids": {0: "batch", 1: "seq"},
                                                                  "attention_mask": {0: "batch", 1: "seq"}})
    copied = onnx.ModelProto()
    copied.CopyFrom(result.model_proto)  # the fusions change the tensors of the proto they are given
    fused, ours = ort_fusions.optimize_for_ort(ir.serde.deserialize_model(copied))
    seq = torch.export.Dim("seq", max=128)
    dims = {"input_ids": {0: torch.export.Dim("batch"), 1: seq},
            "attention_mask": {0: torch.export.Dim("batch"), 1: seq}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, (ids, mask), dynamo=True, dynamic_shapes=dims, verbose=False)
    _, theirs = ort_fusions.optimize_for_ort(program.model)
    name = build.__name__.strip("_")
    for key, count in FUSED[name].items():
        assert theirs.get(key, 0) == count, (key, theirs)
        assert ours.get(key, 0) >= theirs[key], (key, ours, theirs)
    # the fused model (onnxruntime's contrib operators) computes what eager PyTorch computes, at two sizes
    session = ort.InferenceSession(ir.serde.serialize_model(fused).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    for batch, n in ((2, 9), (3, 17)):
        x = torch.randint(0, 1000, (batch, n))
        m = torch.ones(batch, n, dtype=torch.int64)
        m[0, n - 2:] = 0
        with torch.no_grad():
            want = model(x, m).numpy()
        got = session.run(None, {"input_ids": x.numpy(), "attention_mask": m.numpy()})[0]
        rows = m.numpy().astype(bool)  # padded positions of a bidirectional model are not compared
        np.testing.assert_allclose(got[rows], want[rows], atol=2e-4, rtol=1e-3)
