"""Target ``genai-cpu`` on a tiny Phi-3, whose ``qkv_proj`` is one projection the model slices into the query,
key and value: recognised as packed, read whole by ``GroupQueryAttention`` rotating it (``do_rotary=1``), no
``Split``, ``Slice`` or ``RotaryEmbedding`` between the projection and the attention. The rewritten decoder is
checked against eager PyTorch (the export's own check on inputs fed as onnxruntime-genai feeds them, its greedy
decoding, a batch padded on the right over a prompt and a decode step), alike where the model splits the
projection by a ``Split`` instead of three ``Slice``, and quantized int4; the projection's key and value
exchanged is refused."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
import torch

from onnxport.errors import RuntimeTargetError
from onnxport.targets import genai_cpu
from onnxport.targets.genai_cpu import APPLIED, ROTARY_INSIDE, genai_fusions
from onnxport.targets.genai_packed import pack_qkv
from onnxport.targets.genai_rotary import fuse_rotary
from tests.targets.test_genai_cpu_norm_mask import _right_padded_matches_eager

pytestmark = pytest.mark.usefixtures("offline")  # the hub offline, no connection (conftest.py)

transformers = pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")


def _tiny_phi3(path):
    """A tiny Phi-3 (2 layers, hidden 64, 4 heads of 16, 2 key/value heads) of seeded random weights written
    by ``save_pretrained``; its eager model."""
    torch.manual_seed(5)
    config = transformers.Phi3Config(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                     original_max_position_embeddings=64, rms_norm_eps=1e-5, pad_token_id=0,
                                     bos_token_id=1, eos_token_id=2)
    model = transformers.Phi3ForCausalLM(config).eval()
    model.save_pretrained(path)
    return model


def _check_packed_inside(model: ir.Model, projection: str = "MatMul") -> None:
    """Each ``GroupQueryAttention`` reads the model's ``qkv_proj`` (a ``projection`` node) whole as its query,
    no key, no value, rotating it; no ``RotaryEmbedding``; no ``Split`` or ``Slice`` on the qkv path (the one
    ``Split`` per layer is the MLP's gate and up)."""
    fusions = genai_fusions(model)
    assert ROTARY_INSIDE in fusions["rotary"]
    assert fusions["packed_qkv"] == f"{APPLIED} (fed to GroupQueryAttention whole)"
    ops = [n.op_type for n in model.graph]
    assert not {"RotaryEmbedding", "Slice", "Reshape"} & set(ops) and ops.count("Split") == 2
    attentions = [n for n in model.graph if n.op_type == "GroupQueryAttention"]
    assert len(attentions) == 2
    for node in attentions:
        assert node.attributes["do_rotary"].value == 1 and node.inputs[1] is None and node.inputs[2] is None
        qkv = node.inputs[0].producer()
        assert qkv.op_type == projection and qkv.inputs[0].shape[-1] == 64 and node.inputs[0].shape[-1] == 128
    for split in (n for n in model.graph if n.op_type == "Split"):
        assert all(use.node.op_type != "GroupQueryAttention" for v in split.outputs for use in v.uses())


def test_phi3_packed_projection_inside_the_attention(tmp_path):
    from onnxport.pretrained import export_pretrained

    eager = _tiny_phi3(tmp_path / "phi3")
    result = export_pretrained(tmp_path / "phi3", target="genai-cpu", generate=2)
    decoder = result.parts["model"]
    assert decoder.validation.ok and all(g.ok for _, g in result.generation) and result.ok
    assert {c.inputs for c in decoder.validation.checks} == {"inputs 1", "inputs 2", "inputs 3"}
    _check_packed_inside(decoder.model)
    _right_padded_matches_eager(eager, decoder.model_proto)


def _const(model: ir.Model, name: str, array: np.ndarray) -> ir.Value:
    value = ir.Value(name=name, const_value=ir.tensor(array), shape=ir.Shape(array.shape),
                     type=ir.TensorType(ir.DataType.from_numpy(array.dtype)))
    model.graph.register_initializer(value)
    return value


def _rewritten_split(form: str, layers: int | None = None):
    """``fuse_rotary``, then each Phi-3 projection's three ``Slice`` (query, key, value) (of the first ``layers``
    layers, all where None) rewritten into another
    form of the same model: ``split``, one ``Split`` of it (as ``torch.split`` writes it); ``reshaped``, the
    slices reading it through a ``Reshape`` keeping its shape; ``value before key``, the key's weight columns
    last and the value's before them, the slices so (not the order the attention needs)."""

    def rewrite(model: ir.Model):
        found = fuse_rotary(model)
        by_source: dict[int, list[ir.Node]] = {}
        for node in model.graph:
            producer = node.inputs[0].producer() if node.op_type == "Slice" else None
            if producer is not None and producer.op_type == "MatMul":  # (not the rotary's slices, now unread)
                by_source.setdefault(id(node.inputs[0]), []).append(node)
        for i, slices in enumerate(list(by_source.values())[:layers]):
            assert len(slices) == 3
            slices.sort(key=lambda n: int(n.inputs[1].const_value.numpy().reshape(-1)[0]))
            packed = slices[0].inputs[0]
            if form == "split":
                split = ir.Node("", "Split", [packed, _const(model, f"sizes_{i}", np.array([64, 32, 32]))],
                                attributes=[ir.AttrInt64("axis", 2)], num_outputs=3)
                model.graph.append(split)
                for node, out in zip(slices, split.outputs):
                    out.type, out.shape = node.outputs[0].type, node.outputs[0].shape
                    node.outputs[0].replace_all_uses_with(out)
            elif form == "reshaped":
                reshape = ir.Node("", "Reshape", [packed, _const(model, f"shape_{i}", np.array([0, 0, -1]))])
                reshape.outputs[0].type, reshape.outputs[0].shape = packed.type, packed.shape
                model.graph.insert_after(packed.producer(), reshape)
                for node in slices:
                    node.replace_input_with(0, reshape.outputs[0])
            else:
                matmul = packed.producer()
                weight = matmul.inputs[1].const_value.numpy()
                moved = _const(model, f"moved_{i}", weight[:, np.r_[0:64, 96:128, 64:96]])
                matmul.replace_input_with(1, moved)
                bounds = [(_const(model, f"start_{i}_{j}", np.array([a])), _const(model, f"end_{i}_{j}", np.array([b])))
                          for j, (a, b) in enumerate(((96, 128), (64, 96)))]
                for node, (a, b) in zip(slices[1:], bounds):
                    node.replace_input_with(1, a)
                    node.replace_input_with(2, b)
        return found

    return rewrite


@pytest.mark.parametrize("form", ["split", "reshaped"])
def test_phi3_split_otherwise_is_packed_too(tmp_path, monkeypatch, form):
    from onnxport.pretrained import export_pretrained

    _tiny_phi3(tmp_path / "phi3")
    monkeypatch.setattr(genai_cpu, "fuse_rotary", _rewritten_split(form))
    result = export_pretrained(tmp_path / "phi3", target="genai-cpu", validate=False, generate=0)
    _check_packed_inside(result.parts["model"].model)  # the rewrite's own check against eager passed


def test_phi3_parts_out_of_order_stay_outside(tmp_path, monkeypatch):
    """The projection's value before its key: not packed (the attention splits query, key, value in that
    order), the rotary stays outside, the reason recorded, the decoder still right."""
    from onnxport.pretrained import export_pretrained

    _tiny_phi3(tmp_path / "phi3")
    monkeypatch.setattr(genai_cpu, "fuse_rotary", _rewritten_split("value before key"))
    result = export_pretrained(tmp_path / "phi3", target="genai-cpu", validate=False, generate=0)
    fusions = genai_fusions(result.parts["model"].model)
    assert fusions["packed_qkv"] == ("1 projections with constant weights reach the attention, not the query, key "
                                     "and value of one input, nor one packed projection (the query, key and value "
                                     "are not the ranges [64, 32, 32] of the split value, in order (they are "
                                     "[(0, 64), (96, 128), (64, 96)]))")
    assert fusions["rotary"].endswith("outside GroupQueryAttention)")
    assert [n.op_type for n in result.parts["model"].model.graph].count("RotaryEmbedding") == 4


def test_phi3_one_layer_out_of_order_is_counted(tmp_path, monkeypatch):
    """The first layer's value before its key, the second layer's projection as Phi-3 writes it: one attention
    packed, one not, and the record says so."""
    from onnxport.pretrained import export_pretrained

    _tiny_phi3(tmp_path / "phi3")
    monkeypatch.setattr(genai_cpu, "fuse_rotary", _rewritten_split("value before key", layers=1))
    result = export_pretrained(tmp_path / "phi3", target="genai-cpu", validate=False, generate=0)
    fusions = genai_fusions(result.parts["model"].model)
    assert fusions["packed_qkv"].startswith(f"{APPLIED} to 1 attentions, not to 1: 1 projections with constant "
                                            "weights reach the attention"), fusions["packed_qkv"]


def _key_for_value(model: ir.Model):
    """``pack_qkv``, then each packed projection's weights with the key's columns and the value's exchanged."""
    reasons = pack_qkv(model)
    for split in [n for n in model.graph if n.op_type == "Split" and len(n.outputs) == 3]:  # (the MLP's: 2)
        matmul = split.inputs[0].producer()
        weight = matmul.inputs[1].const_value.numpy()
        q, kv = split.outputs[0].shape[-1], split.outputs[1].shape[-1]
        order = np.r_[0:q, q + kv:q + 2 * kv, q:q + kv]
        value = ir.Value(name=f"{matmul.inputs[1].name}_exchanged", const_value=ir.tensor(weight[:, order]),
                         shape=ir.Shape(weight.shape), type=matmul.inputs[1].type)
        model.graph.register_initializer(value)
        matmul.replace_input_with(1, value)
    return reasons


def test_phi3_key_and_value_exchanged_is_refused(tmp_path, monkeypatch):
    from onnxport.pretrained import export_pretrained

    _tiny_phi3(tmp_path / "phi3")
    monkeypatch.setattr(genai_cpu, "pack_qkv", _key_for_value)
    with pytest.raises(RuntimeTargetError, match="rewritten for target 'genai-cpu' differs from eager"):
        export_pretrained(tmp_path / "phi3", target="genai-cpu", validate=False, generate=0)


def test_phi3_quantized_int4(tmp_path):
    """``--quantize int4`` after the rewrite: the packed projection a ``MatMulNBits`` read whole by the attention,
    the accuracy checked at the operator's sizes."""
    from onnxport.pretrained import export_pretrained

    _tiny_phi3(tmp_path / "phi3")
    result = export_pretrained(tmp_path / "phi3", target="genai-cpu", quantize="int4", generate=0)
    decoder = result.parts["model"]
    _check_packed_inside(decoder.model, "MatMulNBits")
    assert "MatMul" not in [n.op_type for n in decoder.model.graph]
    checks = decoder.validation.checks
    assert sorted({c.inputs for c in checks}) == ["inputs 1", "inputs 2", "inputs 3"]
    assert all(np.isfinite(c.max_abs) and np.isfinite(c.cosine) for c in checks), checks
