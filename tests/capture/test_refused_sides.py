"""A branch on a size whose other side raises (CLIP's ``if seq_length > max_position_embedding:
raise ValueError(...)``) is a condition the model needs: eager PyTorch refuses the sizes the other
side takes, so the export holds where the model runs and states the range, checked with
onnxruntime against eager PyTorch at sizes inside it. A branch both sides of which compute stays a
refusal naming the ``if``."""

import pytest
import torch

import onnxport
from exportcheck import check_export

transformers = pytest.importorskip("transformers")


class LengthChecked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(10, 4))

    def forward(self, x):  # x: [b, n, 4]
        if x.shape[1] > self.table.shape[0]:
            raise ValueError(f"at most {self.table.shape[0]} positions, got {x.shape[1]}")
        return x + self.table[: x.shape[1]]


class TwoSides(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] > 10:
            return x * 2
        return x + 1


def test_a_side_that_raises_is_a_condition_the_model_needs():
    with pytest.warns(UserWarning, match=r"the export holds for n <= 10 only"):
        result = check_export(LengthChecked(), (torch.randn(2, 6, 4),), ({0: "b", 1: "n"},), values=[],
                              sizes=[{"b": 1, "n": 1}, {"b": 3, "n": 10}])
    assert [str(c) for c in result.constraints] == ["n <= 10"]


def test_a_branch_both_sides_of_which_compute_is_refused():
    with pytest.raises(onnxport.SpecializationError, match="branches on a size"):
        onnxport.to_onnx(TwoSides(), (torch.randn(2, 6),), dynamic_shapes=({0: "b", 1: "n"},),
                         rewrite_control_flow=False)


@pytest.mark.slow
def test_clip_text_keeps_sequences_up_to_its_positions():
    torch.manual_seed(0)
    config = transformers.CLIPTextConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=2, max_position_embeddings=16)
    model = transformers.CLIPTextModel(config).eval()
    with pytest.warns(UserWarning, match=r"seq <= 16"):
        result = check_export(model, (), {"input_ids": {0: "batch", 1: "seq"}},
                              kwargs={"input_ids": torch.randint(0, 64, (2, 7))}, values=[],
                              sizes=[{"batch": 1, "seq": 1}, {"batch": 3, "seq": 16}])
    assert [str(c) for c in result.constraints] == ["seq <= 16"]


def test_eager_confirms_a_refusal_near_the_example_only(monkeypatch):
    from onnxport.capture.guards import probe
    from onnxport.capture.inputs import dim_examples, dim_names

    model = LengthChecked()
    with pytest.warns(UserWarning, match=r"n <= 10"):
        captured = onnxport.to_onnx(model, (torch.randn(2, 6, 4),), dynamic_shapes=({0: "b", 1: "n"},)).captured
    names = dim_names(captured)
    examples, _ = dim_examples(captured, names)
    asked = []
    eager = probe.eager_refusal
    monkeypatch.setattr(probe, "eager_refusal", lambda *a: asked.append(a[3]) or eager(*a))

    near = probe.refusal_at(model, captured, names, examples, {"n": 11}, confirm=True)
    assert "raise ValueError" in near[0] and asked == [{"b": 2, "n": 11}]
    far = probe.refusal_at(model, captured, names, examples, {"n": 6 * probe.EAGER_GROWTH + 1}, confirm=True)
    assert "raise ValueError" in far[0] and len(asked) == 1  # fake tensors' refusal stands: eager not run there
    assert probe.refusal_at(model, captured, names, examples, {"n": 11}) == near and len(asked) == 1
    assert probe.refusal_at(model, captured, names, examples, {"n": 7}, confirm=True) is None and len(asked) == 1
