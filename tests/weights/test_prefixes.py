"""A checkpoint whose names differ from the model's by one prefix (a wrapper ``W(m)`` exported from
``m``'s own state dict, or a checkpoint saved from a wrapper into the bare model) is bound across
it with one warning naming the prefix, and its saved ONNX model reads the checkpoint's tensors
(onnxruntime matches eager PyTorch); a prefix that fits only part of the names, or two prefixes
that fit alike, are refused naming the prefix instead of listing every name twice."""

import numpy as np
import onnxruntime as ort
import pytest
import torch
from safetensors.torch import save_file

import onnxport
from onnxport.errors import CheckpointError
from onnxport.weights import bind, empty_weights, open_checkpoint


class Inner(torch.nn.Module):
    """Two layers of the same shape (a tensor read under the wrong name changes the values, not the
    shapes) and a persistent buffer computed in ``__init__``, absent from the checkpoint."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.Tanh(), torch.nn.Linear(6, 6))
        self.register_buffer("offset", torch.linspace(-1, 1, 6))

    def forward(self, x):
        return self.layers(x) + self.offset


class W(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x) * 2


class WithHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.m = Inner()
        self.head = torch.nn.Linear(6, 2)

    def forward(self, x):
        return self.head(self.m(x))


class Two(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = Inner(), Inner()

    def forward(self, x):
        return self.a(x) + self.b(x)


def _inner():
    torch.manual_seed(0)
    return Inner().eval()


def _checkpoint(tmp_path, state):
    path = str(tmp_path / "ckpt.safetensors")
    save_file({k: v.contiguous() for k, v in state.items() if k != "offset" and not k.endswith(".offset")}, path)
    return path


def _run_saved(result, path, x):
    session = ort.InferenceSession(result.save(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]


def test_a_wrapped_model_on_meta_binds_its_inner_models_checkpoint_across_the_prefix(tmp_path):
    inner = _inner()
    path = _checkpoint(tmp_path, inner.state_dict())  # 0.weight, ... as saved from m itself
    with empty_weights():
        model = W(Inner()).eval()
    x = torch.randn(3, 6)
    with pytest.warns(UserWarning, match=r"the checkpoint's names lack the model's prefix 'm\.' \(the model's "
                                         r"m\.layers\.0\.bias is the checkpoint's layers\.0\.bias\); bound across it"):
        result = onnxport.to_onnx(model, (x,), dynamic_shapes=({0: "batch"},), weights=path)
    weights = result.weights
    assert (weights.prefix, weights.prefix_in) == ("m.", "model")
    assert weights.sources == {"m." + k: k for k in ("layers.0.weight", "layers.0.bias", "layers.2.weight",
                                                     "layers.2.bias")}
    assert weights.computed == ("m.offset",)
    with torch.no_grad():
        eager = W(inner)(x).numpy()
    np.testing.assert_allclose(_run_saved(result, str(tmp_path / "w.onnx"), x), eager, atol=1e-6)
    x2 = torch.randn(5, 6)
    with torch.no_grad():
        eager2 = W(inner)(x2).numpy()
    session = ort.InferenceSession(str(tmp_path / "w.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {session.get_inputs()[0].name: x2.numpy()})[0], eager2, atol=1e-6)
    report = result.validate(load_eager=True)  # eager: the checkpoint loaded into the wrapper across the prefix
    assert report.ok, report


def test_a_checkpoint_saved_from_a_wrapper_binds_the_bare_model_across_its_prefix(tmp_path):
    inner = _inner()
    state = {"model." + k: v for k, v in inner.state_dict().items()}  # as a training wrapper saves it
    path = _checkpoint(tmp_path, state)
    with torch.device("meta"):
        model = Inner().eval()
    model.offset = torch.linspace(-1, 1, 6)  # computed: the checkpoint does not hold it
    x = torch.randn(4, 6)
    with pytest.warns(UserWarning, match=r"the checkpoint's names carry a prefix 'model\.' the model's names lack "
                                         r"\(the model's layers\.0\.bias is the checkpoint's model\.layers\.0\.bias\)"):
        result = onnxport.to_onnx(model, (x,), dynamic_shapes=({0: "batch"},), weights=path)
    assert (result.weights.prefix, result.weights.prefix_in) == ("model.", "checkpoint")
    assert set(result.weights.sources.values()) <= set(state)
    with torch.no_grad():
        eager = inner(x).numpy()
    np.testing.assert_allclose(_run_saved(result, str(tmp_path / "bare.onnx"), x), eager, atol=1e-6)


def test_a_prefix_fitting_part_of_the_model_is_refused_naming_it(tmp_path):
    path = _checkpoint(tmp_path, _inner().state_dict())
    with empty_weights():
        model = WithHead().eval()
    with pytest.raises(CheckpointError) as info:
        onnxport.to_onnx(model, (torch.randn(3, 6),), weights=path)
    text = info.value.what + "\n" + str(info.value)
    assert "the checkpoint's names lack the model's prefix 'm.', which fits 4 of the model's 7 names" in text
    assert "across it, missing from the checkpoint: head.bias, head.weight" in text
    assert "'m.'" in info.value.hint
    assert "unexpected" not in text and "m.layers.0.weight" not in text  # not every name twice


def test_two_prefixes_fitting_alike_are_refused_naming_both(tmp_path):
    path = _checkpoint(tmp_path, _inner().state_dict())
    with empty_weights():
        model = Two().eval()
    with pytest.raises(CheckpointError) as info:
        onnxport.to_onnx(model, (torch.randn(3, 6),), weights=path)
    text = info.value.what + "\n" + str(info.value)
    assert "across more than one prefix of its names: 'a.'" in text and "or 'b.'" in text
    assert "does not choose" in text


def test_across_a_prefix_shapes_are_still_checked_and_a_tied_wrapper_binds_once(tmp_path):
    state = _inner().state_dict()
    state["layers.2.bias"] = torch.zeros(7)
    with empty_weights():
        model = W(Inner())
    with pytest.raises(CheckpointError) as info:
        bind(model, open_checkpoint(_checkpoint(tmp_path, state)))
    text = info.value.what + "\n" + str(info.value)
    assert "the checkpoint's names lack the model's prefix 'm.'; bound across it: other shape (checkpoint vs " \
           "model): layers.2.bias (7,) vs (6,)" in text
    with empty_weights():
        tied = W(Inner())
    tied.n = tied.m  # the same module under two names: both prefixes give the same binding
    with pytest.warns(UserWarning, match="prefix 'm.'"):
        weights = bind(tied, open_checkpoint(_checkpoint(tmp_path, _inner().state_dict())))
    assert weights.sources["n.layers.0.weight"] == weights.sources["m.layers.0.weight"] == "layers.0.weight"


def test_names_that_fit_as_they_are_take_no_prefix(tmp_path):
    inner = _inner()
    with empty_weights():
        model = Inner()
    state = dict(inner.state_dict())
    with pytest.warns(UserWarning, match="persistent") as caught:
        weights = bind(model, open_checkpoint(_checkpoint(tmp_path, state)))
    assert weights.prefix == "" and not any("prefix" in str(w.message) for w in caught)
