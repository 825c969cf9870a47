"""A branch on a data-dependent count (an NMS-like model): onnxport's error alone on stderr, naming
the count as the user's code made it, the line, and the fixes that apply; torch's graph dump kept
on the error's detail."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import onnxport

MODEL = textwrap.dedent("""\
    import torch


    class NMSLike(torch.nn.Module):
        \"\"\"Keeps the boxes scoring over a threshold, then branches on how many there are.\"\"\"

        def forward(self, boxes, scores):
            keep = scores > 0.5
            kept = boxes[keep]
            if kept.numel() > 4000:
                kept = kept[:1000]
            return kept * 2


    class NMSLikeInline(torch.nn.Module):
        \"\"\"The same branch as a conditional expression, which the rewriter leaves as Python.\"\"\"

        def forward(self, boxes, scores):
            keep = scores > 0.5
            kept = boxes[keep]
            limit = 1000 if kept.numel() > 4000 else kept.shape[0]
            return kept[:limit] * 2
    """)


@pytest.fixture()
def model_file(tmp_path):
    path = tmp_path / "nms_model.py"
    path.write_text(MODEL)
    return path


def _model(path, name: str = "NMSLike"):
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - the test's own model
    return namespace[name]().eval()


def test_the_error_names_the_count_the_line_and_the_fixes(model_file, capfd):
    with pytest.raises(onnxport.DataDependentError) as info:
        onnxport.to_onnx(_model(model_file), (torch.randn(30, 4), torch.rand(30)),
                         dynamic_shapes={"boxes": {0: "n"}, "scores": {0: "n"}}, rewrite_control_flow=False)
    e = info.value
    assert "4*kept.shape[0] > 4000" in e.summary and "kept = boxes[keep]" in e.what and "nms_model.py:9" in e.what
    assert e.where.endswith("nms_model.py:10 in forward: if kept.numel() > 4000:")
    assert "torch._check(kept.shape[0] <= 1000)" in e.hint and "torch.cond" in e.hint
    assert "strict=False" not in e.hint
    assert "def forward" in e.detail and "capture steps:" in e.detail  # torch's dump and the steps, for --debug
    assert "def forward" not in str(e)
    assert capfd.readouterr().err == ""


@pytest.mark.slow
def test_the_command_exports_the_branch_rewritten(model_file, tmp_path):
    """By default the branch is rewritten after capture fails on it, with one notice on stderr naming
    the ``if`` and its line. Its side, ``kept[:1000]``, is all of ``kept`` where the branch is not
    taken (at most 1000 rows): it runs at every count, no ``If``; onnxruntime matches eager PyTorch
    on both sides of the branch."""
    out = tmp_path / "out.onnx"
    cmd = [sys.executable, "-m", "onnxport", "export", f"{model_file}:NMSLike", "--input", "boxes: float32[n, 4]",
           "--input", "scores: float32[n]", "-o", str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "onnxport rewrote the if at" in run.stderr and "nms_model.py:10" in run.stderr
    import onnx

    import onnxruntime as ort

    assert [n.op_type for n in onnx.load(str(out)).graph.node].count("If") == 0
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    model = _model(model_file)
    for n, high in ((1500, 1200), (40, 20)):  # more than 1000 boxes kept, and fewer
        boxes, scores = torch.randn(n, 4), torch.cat([torch.full((high,), 0.9), torch.full((n - high,), 0.1)])
        got = session.run(None, {"boxes": boxes.numpy(), "scores": scores.numpy()})[0]
        torch.testing.assert_close(torch.from_numpy(got), model(boxes, scores))


@pytest.mark.slow
def test_the_command_prints_only_onnxports_error(model_file, tmp_path):
    cmd = [sys.executable, "-m", "onnxport", "export", f"{model_file}:NMSLikeInline", "--input", "boxes: float32[n, 4]",
           "--input", "scores: float32[n]", "-o", str(tmp_path / "out.onnx")]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) <= 5, run.stderr
    error = [i for i, line in enumerate(lines) if line.startswith("onnxport: error: ")]
    assert error and all(line.startswith("onnxport: ") for line in lines[:error[0]]), run.stderr
    assert "kept.shape[0]" in lines[error[0]] and "torch._check" in run.stderr and "torch.ops" not in run.stderr
    assert not (tmp_path / "out.onnx").exists()
    debug = subprocess.run(cmd[:4] + ["--debug"] + cmd[4:], capture_output=True, text=True, cwd=tmp_path,
                           timeout=600)
    assert "torch printed while tracing:" in debug.stderr and "torch.ops.aten.index.Tensor" in debug.stderr


class Bounded(torch.nn.Module):
    """The fix the error offers, applied: the count bounded, the branch decided."""

    def forward(self, boxes, scores):
        kept = boxes[scores > 0.5]
        torch._check(kept.shape[0] <= 1000)
        if kept.numel() > 4000:
            kept = kept[:1000]
        return kept * 2


def test_the_offered_bound_makes_the_model_export():
    boxes, scores = torch.randn(30, 4), torch.rand(30)
    r = onnxport.to_onnx(Bounded().eval(), (boxes, scores), dynamic_shapes={"boxes": {0: "n"}, "scores": {0: "n"}})
    assert r.validate().ok


class SignBranch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


def test_a_branch_on_a_tensors_value_is_named_by_its_code_and_exported_as_if():
    x = torch.randn(3, 4)
    with pytest.raises(onnxport.DataDependentError) as info:
        onnxport.to_onnx(SignBranch(), (x,), dynamic_shapes={"x": {0: "n"}}, rewrite_control_flow=False)
    assert "branches on a bool read from the inputs' data" in info.value.what
    assert "`if x.sum() > 0:`" in info.value.what and "u0" not in info.value.what
    with pytest.warns(UserWarning, match=r"inputs' data, `if x.sum\(\) > 0:`") as caught:
        r = onnxport.to_onnx(SignBranch(), (x,), dynamic_shapes={"x": {0: "n"}})
    assert not any("Eq(u0" in str(w.message) for w in caught)
    assert "If" in {n.op_type for n in r.model.graph}
    assert r.validate(inputs=[(torch.ones(5, 4),), (-torch.ones(2, 4),)]).ok


class IntOfCount(torch.nn.Module):
    def forward(self, x):
        n = int((x > 0).sum())
        return x[:n] * 2


def test_int_of_a_data_dependent_value_offers_item(monkeypatch):
    from onnxport import stages

    # the error as it is without the strict-mode retry
    monkeypatch.setattr(stages, "STRATEGIES", tuple(s for s in stages.STRATEGIES if s.name != "strict"))
    with pytest.raises(onnxport.DataDependentError) as info:
        onnxport.to_onnx(IntOfCount(), (torch.randn(8),), dynamic_shapes={"x": {0: "n"}})
    e = info.value
    assert "as a Python number" in e.what and "n = int((x > 0).sum())" in e.where
    assert ".item() instead of int(...)" in e.hint and "torch._check(~" not in e.hint


def test_int_of_a_data_dependent_value_is_captured_in_strict_mode():
    with pytest.warns(UserWarning, match=r"as a Python number.*strict mode \(TorchDynamo\)"):
        r = onnxport.to_onnx(IntOfCount(), (torch.randn(8),), dynamic_shapes={"x": {0: "n"}})
    assert r.captured.strategy == "strict"
    assert r.validate(inputs=[(torch.ones(5),), (-torch.ones(6),), (torch.randn(9),)]).ok


class ItemOfCount(torch.nn.Module):
    """The fix the error offers, applied."""

    def forward(self, x):
        n = (x > 0).sum().item()
        return x[:n] * 2


def test_the_offered_item_makes_the_model_export():
    r = onnxport.to_onnx(ItemOfCount(), (torch.randn(8),), dynamic_shapes={"x": {0: "n"}})
    assert r.validate(inputs=[(torch.ones(8),), (-torch.ones(5),), (torch.tensor([1.0, -1.0, 2.0]),)]).ok


class AnyPositive(torch.nn.Module):
    """Branches on a bool read from the data, as transformers' Longformer chooses global attention."""

    def forward(self, x):
        flag = (x > 0).any().item()
        if flag:
            y = x * 2
        else:
            y = x - 1
        return y


def test_a_branch_on_a_bool_read_from_data_names_where_it_was_read():
    with pytest.raises(onnxport.DataDependentError, match=r"a bool read from the inputs' data, "
                       r"`flag = \(x > 0\)\.any\(\)\.item\(\)` at test_data_dependent\.py:\d+") as e:
        onnxport.to_onnx(AnyPositive(), (torch.randn(2, 3),), dynamic_shapes={"x": {0: "batch"}},
                         rewrite_control_flow=False)
    assert "if flag:" in e.value.where and "torch.cond" in e.value.hint


class AnyKept(torch.nn.Module):
    """A branch on whether a mask keeps any row: the fix states the count is not 0, not that it is."""

    def forward(self, boxes, scores):
        kept = boxes[scores > 0.5]
        if kept.shape[0] > 0:
            return kept.sum(0)
        return boxes.sum(0)


def test_a_count_compared_with_zero_is_stated_non_empty():
    with pytest.raises(onnxport.DataDependentError) as info:
        onnxport.to_onnx(AnyKept(), (torch.randn(30, 4), torch.rand(30)),
                         dynamic_shapes={"boxes": {0: "n"}, "scores": {0: "n"}}, rewrite_control_flow=False)
    e = info.value
    assert "torch._check(kept.shape[0] > 0)" in e.hint, e.hint
    assert "<= 0" not in e.hint, e.hint
