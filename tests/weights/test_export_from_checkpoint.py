"""``to_onnx(model_on_meta, ..., weights=checkpoint)``: a small Llama decoder (width 64, 2 layers,
vocab 1000, seeded) built under ``empty_weights()`` and exported with its cache from a safetensors
file, a sharded checkpoint and a torch.save state dict gives the graph and the initializer bytes of
the in-memory export, and its saved file runs in onnxruntime as eager PyTorch does; the checkpoint
is read only for small tensors before the save and once per tensor by it. Mismatches (missing,
unexpected, mis-shaped, other dtype) are each one clear error and nothing is written; buffers
computed in ``__init__`` are used, those left on meta refused by name; bfloat16 stays bfloat16
(or is cast on request); validation runs without eager, or with the checkpoint loaded."""

import functools
import json
import os

import numpy as np
import onnx
import onnx.numpy_helper
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch
from safetensors.torch import save_file

import onnxport
from onnxport.errors import CheckpointError, SaveError
from onnxport.optimize.constant_folding import TransposedLazyTensor
from onnxport.verify.weightless import BASIS
from onnxport.weights import empty_weights

transformers = pytest.importorskip("transformers")

DIMS = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
        "position_ids": {0: "batch", 1: "seq"}, "past_key_values": {0: "batch", 2: "past"}}
SMALL = 1024  # elements: onnx-ir's initializer deduplication and checker read tensors up to about this size


def _config(dtype=torch.float32):
    return transformers.LlamaConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                    num_key_value_heads=2, intermediate_size=128, max_position_embeddings=128,
                                    dtype=dtype, tie_word_embeddings=False)


@functools.lru_cache(maxsize=None)
def _real(dtype=torch.float32):
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(_config(dtype)).to(dtype).eval()


def _meta(dtype=torch.float32):
    with empty_weights():
        return transformers.LlamaForCausalLM(_config(dtype)).to(dtype).eval()


def _kwargs(dtype=torch.float32, past=5, seq=3):
    from transformers import DynamicCache

    gen = torch.Generator().manual_seed(1)
    cache = DynamicCache(config=_config(dtype))
    for layer in range(2):
        cache.update(torch.randn(2, 2, past, 16, generator=gen).to(dtype),
                     torch.randn(2, 2, past, 16, generator=gen).to(dtype), layer)
    return dict(input_ids=torch.randint(3, 1000, (2, seq), generator=gen),
                attention_mask=torch.ones(2, past + seq, dtype=torch.int64),
                position_ids=torch.arange(past, past + seq).expand(2, seq), past_key_values=cache, use_cache=True)


def _export(model, **kw):
    return onnxport.to_onnx(model, kwargs=_kwargs(kw.pop("dtype", torch.float32)), dynamic_shapes=DIMS,
                            relations={"total": "past + seq"}, **kw)


@functools.lru_cache(maxsize=None)
def _in_memory(dtype=torch.float32):
    return _export(_real(dtype), dtype=dtype)


def _write(tmp_path, form, state):
    if form == "safetensors":
        save_file(state, str(tmp_path / "model.safetensors"))
        return str(tmp_path / "model.safetensors")
    if form == "sharded":
        names = list(state)
        shards = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
                  "model-00002-of-00002.safetensors": names[len(names) // 2:]}
        for file, part in shards.items():
            save_file({k: state[k] for k in part}, str(tmp_path / file))
        index = {"weight_map": {k: file for file, part in shards.items() for k in part}}
        (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
        return str(tmp_path / "model.safetensors.index.json")
    torch.save(state, tmp_path / "model.pt")
    return str(tmp_path / "model.pt")


def _state(dtype=torch.float32):
    return {k: v.contiguous() for k, v in _real(dtype).state_dict().items()}


def _bytes(result):
    return {k: v.const_value.tobytes() for k, v in result.model.graph.initializers.items()}


def _run_saved(path, kwargs):
    from transformers import DynamicCache

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    cache = kwargs["past_key_values"]
    feeds = {"input_ids": kwargs["input_ids"].numpy(), "attention_mask": kwargs["attention_mask"].numpy(),
             "position_ids": kwargs["position_ids"].numpy()}
    for i, layer in enumerate(cache.layers):
        feeds[f"past_key_values.{i}.key"] = layer.keys.float().numpy()
        feeds[f"past_key_values.{i}.value"] = layer.values.float().numpy()
    assert isinstance(cache, DynamicCache)
    return session.run(["logits"], feeds)[0]


@pytest.mark.parametrize("form", ["safetensors", "sharded", "torch"])
def test_export_from_checkpoint_equals_in_memory_export_and_eager(tmp_path, form, monkeypatch):
    monkeypatch.setattr(TransposedLazyTensor, "BLOCK", 4096)  # transposed weights written in many blocks
    path = _write(tmp_path, form, _state())
    read = []
    original = onnxport.weights.Checkpoint.read
    monkeypatch.setattr(onnxport.weights.Checkpoint, "read",
                        lambda self, name: read.append(name) or original(self, name))
    result = _export(_meta(), weights=path)
    ckpt = result.weights.checkpoint
    assert all(ckpt.entries[n].dtype.itemsize * np.prod(ckpt.entries[n].shape) <= 4 * SMALL for n in read), read
    expected = _in_memory()
    assert result.pretty() == expected.pretty()
    read.clear()
    os.makedirs(tmp_path / "out")
    saved = result.save(str(tmp_path / "out" / "model.onnx"))
    lazy = [v for v in result.model.graph.initializers.values() if isinstance(v.const_value, ir.LazyTensor)]
    assert len(read) == len(set(read)) == len(lazy) > 10  # each initializer read once, by the save
    assert _bytes(result) == _bytes(expected)  # same names, same bytes
    written = {t.name: onnx.numpy_helper.to_array(t).tobytes() for t in onnx.load(saved).graph.initializer}
    assert written == _bytes(expected)  # as the save streamed them (transposed weights in blocks)
    kwargs = _kwargs()
    with torch.no_grad():
        eager = _real()(**_kwargs()).logits.numpy()
    np.testing.assert_allclose(_run_saved(saved, kwargs), eager, atol=1e-4, rtol=1e-4)


def test_mismatches_are_one_error_naming_each_and_nothing_is_written(tmp_path):
    state = _state()
    state.pop("model.layers.1.mlp.up_proj.weight")
    state["model.layers.0.extra.weight"] = torch.zeros(3)
    state["model.norm.weight"] = torch.ones(65)
    state["lm_head.weight"] = state["lm_head.weight"].double()
    path = _write(tmp_path, "safetensors", state)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(CheckpointError) as info:
        _export(_meta(), weights=path)
    text = info.value.what + "\n" + str(info.value)  # the whole message (a long path moves part of it to the detail)
    assert "missing from the checkpoint: model.layers.1.mlp.up_proj.weight" in text
    assert "unexpected in the checkpoint: model.layers.0.extra.weight" in text
    assert "other shape (checkpoint vs model): model.norm.weight (65,) vs (64,)" in text
    assert "other dtype (checkpoint vs model): lm_head.weight float64 vs float32" in text
    assert "fix:" in text
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize("fault,message", [
    ("missing", "missing from the checkpoint: model.layers.1.mlp.up_proj.weight"),
    ("unexpected", "unexpected in the checkpoint: model.layers.0.extra.weight"),
    ("shape", "other shape (checkpoint vs model): model.norm.weight (65,) vs (64,)"),
])
def test_each_mismatch_alone_is_an_error_before_capture(tmp_path, fault, message, monkeypatch):
    state = _state()
    if fault == "missing":
        state.pop("model.layers.1.mlp.up_proj.weight")
    elif fault == "unexpected":
        state["model.layers.0.extra.weight"] = torch.zeros(3)
    else:
        state["model.norm.weight"] = torch.ones(65)
    path = _write(tmp_path, "sharded", state)
    before = sorted(os.listdir(tmp_path))
    traced = []
    monkeypatch.setattr(torch.export, "export", lambda *a, **k: traced.append(a))
    with pytest.raises(CheckpointError) as info:
        _export(_meta(), weights=path)
    what = info.value.what  # the whole message (a long path moves part of it to the detail)
    assert message in what and what.count("checkpoint: ") + what.count("model): ") == 1
    assert not traced and sorted(os.listdir(tmp_path)) == before


def test_a_model_on_meta_without_weights_or_in_strict_mode_is_refused(tmp_path):
    with pytest.raises(CheckpointError, match="on the meta device"):
        _export(_meta())
    with pytest.raises(onnxport.CaptureError, match="(?s)strict=True cannot capture.*strict=False"):
        _export(_meta(), weights=_write(tmp_path, "safetensors", _state()), strict=True)


class WithTables(torch.nn.Module):
    """A persistent and a non-persistent buffer computed in ``__init__``, neither in the checkpoint."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.register_buffer("positions", torch.arange(8, dtype=torch.float32) / 8)
        self.register_buffer("freqs", torch.cos(torch.arange(8, dtype=torch.float32)), persistent=False)

    def forward(self, x):
        return self.proj(x) * self.freqs + self.positions


def test_buffers_computed_in_init_are_used_and_those_on_meta_refused_by_name(tmp_path):
    torch.manual_seed(0)
    real = WithTables().eval()
    path = _write(tmp_path, "safetensors", {k: v for k, v in real.state_dict().items() if k.startswith("proj.")})
    x = torch.randn(3, 8)
    with empty_weights():
        meta = WithTables().eval()
    with pytest.warns(UserWarning, match=r"persistent\) are not in checkpoint .*: positions; the export uses the "
                                         r"values the model's __init__ computed"):
        result = onnxport.to_onnx(meta, (x,), dynamic_shapes=({0: "batch"},), weights=path)
    assert set(result.weights.computed) == {"positions"}
    out = ort.InferenceSession(result.save(str(tmp_path / "m.onnx")), providers=["CPUExecutionProvider"]).run(
        None, {"x": x.numpy()})[0]
    np.testing.assert_allclose(out, real(x).detach().numpy(), atol=1e-6)
    with torch.device("meta"):
        all_meta = WithTables().eval()
    with pytest.raises(CheckpointError, match=r"(?s)buffers on the meta device and not in the checkpoint: "
                                              r"freqs, positions.*empty_weights"):
        onnxport.to_onnx(all_meta, (x,), weights=path)


def test_bfloat16_exports_as_bfloat16(tmp_path):
    path = _write(tmp_path, "sharded", _state(torch.bfloat16))
    result = _export(_meta(torch.bfloat16), weights=path, dtype=torch.bfloat16)
    assert result.model.graph.initializers["lm_head.weight.T"].const_value.dtype.name == "BFLOAT16"
    assert result.pretty() == _in_memory(torch.bfloat16).pretty()
    assert _bytes(result) == _bytes(_in_memory(torch.bfloat16))


def test_float16_exports_as_float16_and_validates_against_eager(tmp_path):
    path = _write(tmp_path, "safetensors", _state(torch.float16))
    result = _export(_meta(torch.float16), weights=path, dtype=torch.float16)
    assert result.model.graph.initializers["lm_head.weight.T"].const_value.dtype.name == "FLOAT16"
    assert _bytes(result) == _bytes(_in_memory(torch.float16))
    report = result.validate(load_eager=True)
    assert report.ok, report


def test_a_checkpoint_of_another_dtype_is_cast_only_on_request(tmp_path):
    path = _write(tmp_path, "safetensors", _state(torch.bfloat16))
    with pytest.raises(CheckpointError, match="(?s)other dtype.*cast_weights=True") as info:
        _export(_meta(), weights=path)
    assert "lm_head.weight bfloat16 vs float32" in str(info.value)
    result = _export(_meta(), weights=path, cast_weights=True)
    init = result.model.graph.initializers["lm_head.weight.T"].const_value
    assert init.dtype.name == "FLOAT"
    assert np.array_equal(init.numpy(), _state(torch.bfloat16)["lm_head.weight"].float().numpy().T)
    report = result.validate(load_eager=True)  # eager: the bfloat16 values loaded into the float32 model
    assert report.ok, report


def test_validation_without_eager_says_so_and_with_eager_compares(tmp_path):
    result = _export(_meta(), weights=_write(tmp_path, "safetensors", _state()))
    light = result.validate()
    assert light.ok, light
    assert {c.basis for c in light.checks} == {BASIS}
    assert all("not compared with eager" in c.note for c in light.checks)
    assert len({c.inputs for c in light.checks}) >= 4  # the example and other sizes
    full = result.validate(load_eager=True)
    assert full.ok, full
    assert any(c.basis == "float64 reference" for c in full.checks)
    assert onnxport.weights.on_meta(result.module)  # the user's model stays on meta


class Log(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        return torch.log(x * self.scale)


def test_validation_without_eager_fails_on_nan(tmp_path):
    save_file({"scale": -torch.ones(4)}, str(tmp_path / "m.safetensors"))
    with empty_weights():
        model = Log()
    result = onnxport.to_onnx(model, (torch.rand(2, 4) + 0.5,), dynamic_shapes=({0: "batch"},),
                              weights=str(tmp_path / "m.safetensors"))
    report = result.validate()
    assert not report.ok
    assert all("NaN or infinite" in c.note for c in report.checks)


def test_a_save_that_cannot_read_its_checkpoint_leaves_the_previous_model(tmp_path):
    path = _write(tmp_path, "sharded", _state())
    result = _export(_meta(), weights=path)
    target = str(tmp_path / "out.onnx")
    result.save(target)
    before = sorted(os.listdir(tmp_path))
    first = _run_saved(target, _kwargs())
    os.remove(tmp_path / "model-00002-of-00002.safetensors")
    with pytest.raises(SaveError, match="cannot read tensor"):
        result.save(target)
    assert sorted(os.listdir(tmp_path)) == [n for n in before if n != "model-00002-of-00002.safetensors"]
    np.testing.assert_array_equal(_run_saved(target, _kwargs()), first)
