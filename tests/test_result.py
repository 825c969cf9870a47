"""ExportResult: atomic save, external data, repr, reproducible bytes, validation report."""

import dataclasses
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import onnxport


class Affine(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 128))
        self.register_buffer("b", torch.randn(128))

    def forward(self, x):
        return x @ self.w + self.b


def _export():
    return onnxport.to_onnx(Affine(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: "batch"}})


def test_repr_says_inputs_outputs_nodes_opset():
    text = repr(_export())
    assert "x: float[batch, 3]" in text and "output: float[batch, 128]" in text
    assert "nodes=" in text and "opset=20" in text


def test_initializers_named_by_qualified_names():
    r = _export()
    assert set(r.model.graph.initializers) >= {"w", "b"}


def test_save_and_reload_runs(tmp_path):
    r = _export()
    path = r.save(tmp_path / "m.onnx")
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    x = np.random.randn(7, 3).astype(np.float32)
    got = sess.run(None, {"x": x})[0]
    want = Affine.forward(r.module, torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_external_data_above_threshold(tmp_path, monkeypatch):
    r = _export()
    monkeypatch.setattr(type(r), "external_data_threshold", 16)
    path = r.save(tmp_path / "big.onnx")
    (data,) = [p.name for p in tmp_path.iterdir() if p.name != "big.onnx"]
    assert data.startswith("big.onnx.") and data.endswith(".data")
    model = onnx.load(path)  # loads the external weights back
    assert any(i.data_location == onnx.TensorProto.EXTERNAL
               for i in onnx.load(path, load_external_data=False).graph.initializer)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    assert sess.run(None, {"x": np.ones((2, 3), np.float32)})[0].shape == (2, 128)
    assert model.graph.input[0].name == "x"


def test_save_failure_leaves_nothing(tmp_path):
    r = _export()
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(onnxport.SaveError):
        r.save(blocker / "m.onnx")
    target = tmp_path / "dir.onnx"
    target.mkdir()  # saving over a directory fails
    with pytest.raises(onnxport.SaveError):
        r.save(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.onnx", "file"]
    assert list(target.iterdir()) == []


def test_same_model_twice_gives_identical_bytes(tmp_path):
    torch.manual_seed(0)
    a = _export().save(tmp_path / "a.onnx")
    torch.manual_seed(0)
    b = _export().save(tmp_path / "b.onnx")
    assert open(a, "rb").read() == open(b, "rb").read()


def test_validation_report_detects_a_wrong_model():
    r = _export()
    assert r.validate().ok
    # corrupt the exported weights: validation must fail and say where
    w = r.model.graph.initializers["w"]
    w.const_value = onnxport.translate.program._to_ir_tensor(torch.zeros(3, 128), "w")
    r = r.replace(model=r.model)  # a new result: its serialized model is made afresh
    report = r.validate()
    assert not report.ok
    assert "FAIL" in str(report)
    assert report.to_dict()["ok"] is False


def test_validate_explicit_sizes_and_inputs():
    r = _export()
    report = r.validate(sizes=[{"batch": 1}, {"batch": 9}], inputs=[(torch.randn(5, 3),)])
    assert report.ok
    assert {c.sizes for c in report.checks} >= {"batch=1", "batch=9"}
    assert any(c.inputs == "inputs 1" and c.shape == (5, 128) for c in report.checks)


def test_validation_of_a_model_over_the_size_limit_goes_through_a_file(monkeypatch):
    r = _export()
    monkeypatch.setattr(type(r), "external_data_threshold", 16)  # as if the weights were over 2 GB
    monkeypatch.setattr(type(r), "model_proto", property(lambda self: (_ for _ in ()).throw(
        ValueError("Failed to serialize proto"))))
    assert r.validate().ok


def test_validate_sizes_are_checked():
    r = onnxport.to_onnx(Affine(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: torch.export.Dim("batch", max=16)}})
    with pytest.raises(onnxport.ValidationError, match="not dynamic dimensions"):
        r.validate(sizes=[{"zz": 3}])
    with pytest.raises(onnxport.ValidationError, match="outside the range"):
        r.validate(sizes=[{"batch": 40}])
    with pytest.raises(onnxport.ValidationError, match="input set"):
        r.validate(inputs=[3])


class Divide(torch.nn.Module):
    def forward(self, a, b):
        return a // b


def test_eager_failure_on_generated_inputs_is_a_failed_check_and_zeros_are_avoided():
    a, b = torch.randint(-9, 9, (4,)), torch.tensor([3, -2, 5, 7])
    r = onnxport.to_onnx(Divide(), (a, b), dynamic_shapes=({0: "n"}, {0: "n"}))
    assert r.validate().ok  # b has no zero in the example: generated divisors have none either
    report = r.validate(inputs=[(a, torch.tensor([1, 0, 2, 3]))])
    assert not report.ok and "eager PyTorch failed" in str(report)


def test_default_sizes_separate_dims_equal_in_the_example():
    class Swap(torch.nn.Module):
        def forward(self, x):
            return x.transpose(0, 1) * 2

    r = onnxport.to_onnx(Swap(), (torch.randn(3, 3),), dynamic_shapes={"x": {0: "a", 1: "b"}})
    sizes = [c.sizes for c in r.validate().checks if c.why in ("below the example", "above the example")]
    assert len(set(sizes)) == 3
    assert all("a=" in s and s.split(", ")[0].split("=")[1] != s.split(", ")[1].split("=")[1] for s in sizes)


def test_a_result_of_parts_saves_as_a_directory_and_validates_each_part(tmp_path):
    first, second = _export(), _export()
    source = tmp_path / "tokenizer.json"
    source.write_text('{"a": 1}')
    r = onnxport.ExportResult(None, parts={"encoder": first, "decoder": second},
                              files={"info.json": {"layers": 2}, "tokenizer.json": str(source)})
    assert r.count_nodes() == first.count_nodes() + second.count_nodes()
    assert "parts={encoder: ExportResult(" in repr(r)
    with pytest.raises(onnxport.ExportError, match="needs one model, and this result holds 2: encoder, decoder"):
        _ = r.model_proto
    report = r.validate()
    assert report.ok and {c.inputs.split(":")[0] for c in report.checks} == {"encoder", "decoder"}
    failing = onnxport.ValidationReport((dataclasses.replace(report.checks[0], ok=False),))
    assert r.ok and not r.replace(parts={"encoder": first.replace(validation=failing)}).ok
    out = tmp_path / "out"
    paths = r.save(out)
    assert [os.path.basename(p) for p in paths] == ["encoder.onnx", "decoder.onnx", "info.json", "tokenizer.json"]
    assert (out / "info.json").read_text() == '{\n    "layers": 2\n}'
    assert (out / "tokenizer.json").read_text() == '{"a": 1}'
    sess = ort.InferenceSession(str(out / "decoder.onnx"))
    assert sess.run(None, {"x": np.ones((2, 3), np.float32)})[0].shape == (2, 128)
    with pytest.raises(TypeError, match="needs a model, or parts"):
        onnxport.ExportResult(None)
