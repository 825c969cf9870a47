"""A branch on a state tensor's value whose sides torch.cond cannot hold, exported one side at a time and
joined under ONNX If on the condition computed from the inputs (``onnxport/value_sides.py``).

The step below emits ``extra`` more frames on its first call (``state == 0``), the length a Python int and
the first frames written into a tensor made before the second ``if``, as ESPnet's contextual-block encoders
do: each export is compared with eager PyTorch in onnxruntime at both values of the counter, at two batch
sizes and two time lengths, the output's length differing between the sides."""

import inspect
import re

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

import onnxport
from exportcheck import check_export, count_ops


class FirstCallFrames(torch.nn.Module):
    def forward(self, x, state):
        extra = 0
        if state == 0:
            extra = 2
        out = x.new_zeros(x.shape[0], x.shape[1] - 2 + extra, x.shape[2])
        if state == 0:
            out[:, :extra] = x[:, :extra] * 3
        out[:, extra:] = x[:, 2:].tanh()
        return out, state + 1


class FlagFrames(torch.nn.Module):
    """The same with a bool flag (``first``) and the frames cut from the input: ``x[:, :k]``."""

    def forward(self, x, first):
        k = 2
        if first:
            k += 1
        out = x.new_zeros(x.shape[0], k, x.shape[2])
        if first:
            out[:, -1] = x[:, 0]
        out[:, :2] = x[:, -2:] * 2
        return out, torch.logical_not(first)


DIMS = ({0: Dim("batch"), 1: Dim("time", min=3)}, None)


def _line(cls, text: str) -> int:
    lines, first = inspect.getsourcelines(cls.forward)
    return first + next(k for k, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("cls, values, example", [(FirstCallFrames, (0, 1, 5), 3), (FlagFrames, (True, False), False)])
def test_each_side_exported_and_joined_under_one_if(cls, values, example):
    def make(b, t, v):
        return torch.randn(b, t, 3), torch.tensor(v)

    with pytest.warns(UserWarning, match=rf"branches on a state's value at .*test_value_sides.py:"
                                         rf"{_line(cls, 'if ')} .* exported each side on its own"):
        result = check_export(cls(), make(2, 5, example), DIMS,
                              inputs=[make(b, t, v) for v in values for b, t in ((1, 4), (3, 7))])
    assert count_ops(result, "If") == 1
    assert sorted(side.holds for side, _ in result.pieces) == [False, True]
    report = result.validate()
    assert report.ok and {c.inputs.rsplit(" ", 1)[1] for c in report.checks} == {"p1", "p2"}  # both sides compared
    session = ort.InferenceSession(result.model_proto.SerializeToString())
    lengths = set()
    for v in values:
        for b in (1, 3):
            x, state = make(b, 6, v)
            got = session.run(None, {"x": x.numpy(), result.model.graph.inputs[1].name: state.numpy()})
            want = cls()(x, state)
            assert got[0].shape == tuple(want[0].shape)
            np.testing.assert_allclose(got[0], want[0].numpy(), rtol=1e-6, atol=1e-6)
            np.testing.assert_array_equal(got[1], want[1].numpy())
            lengths.add(got[0].shape[1])
    assert len(lengths) == 2  # the sides' outputs differ in length



def test_each_input_set_runs_once_in_eager_mode(monkeypatch):
    """The example and the input set of the other side each run once in eager mode: the truth read there
    chooses the side and checks the lines the sides answered."""
    import onnxport.capture.value_sides as traced

    states, reads = [], traced.reads

    def counted(model, args, kwargs, *rest):
        states.append(int(args[1]))
        return reads(model, args, kwargs, *rest)

    monkeypatch.setattr(traced, "reads", counted)
    with pytest.warns(UserWarning, match="exported each side on its own"):
        onnxport.to_onnx(FirstCallFrames(), (torch.randn(2, 5, 3), torch.tensor(3)), dynamic_shapes=DIMS)
    assert sorted(states) == [0, 3], states  # the example's counter, then the counter set to 0


class LoopFrames(torch.nn.Module):
    """``FirstCallFrames`` plus a loop over the time axis, which each side's export rewrites into a scan."""

    def forward(self, x, state):
        acc = x[:, 0]
        for t in range(1, x.shape[1]):
            acc = acc * 0.5 + x[:, t]
        out, _ = FirstCallFrames.forward(self, x, state)
        return out + acc[:, None]


def test_the_notes_of_code_both_sides_rewrite_are_given_once():
    def make(b, t, v):
        return torch.randn(b, t, 3), torch.tensor(v)

    with pytest.warns(UserWarning, match="exported each side on its own"):
        result = check_export(LoopFrames(), make(2, 5, 3), DIMS, inputs=[make(b, 6, v) for v in (0, 3) for b in (1, 3)])
    notes = [str(n) for n in result.rewrite_notes]
    loop = f"{__file__}:{_line(LoopFrames, 'for t in')} in forward: for rewritten"
    assert sum(n.startswith(loop) for n in notes) == 1 and len(set(notes)) == len(notes), notes

class OnActivations(torch.nn.Module):
    def forward(self, x, state):
        extra = 0
        if x.sum() > 0:
            extra = 2
        out = x.new_zeros(x.shape[0], x.shape[1] - 2 + extra, x.shape[2])
        if x.sum() > 0:
            out[:, :extra] = x[:, :extra] * 3
        out[:, extra:] = x[:, 2:].tanh() + state
        return out


class TwoStates(torch.nn.Module):
    def forward(self, x, a, b):
        extra = 0
        if a == 0:
            extra = 2
        out = x.new_zeros(x.shape[0], x.shape[1] - 2 + extra, x.shape[2])
        if b == 0:
            out[:, :extra] = x[:, :extra] * 3
        out[:, extra:] = x[:, 2:].tanh()
        return out


class RankDiffers(torch.nn.Module):
    def forward(self, x, state):
        if state == 0:
            y = x.sum(2)
        else:
            y = x
        return y


class FifthCall(torch.nn.Module):
    """Its other side only at ``state == 5``: no counter set to 0 or 1 reaches it from the example's 3."""

    def forward(self, x, state):
        extra = 0
        if state == 5:
            extra = 2
        out = x.new_zeros(x.shape[0], x.shape[1] - 2 + extra, x.shape[2])
        if state == 5:
            out[:, :extra] = x[:, :extra] * 3
        out[:, extra:] = x[:, 2:].tanh()
        return out


class CutOnFirstCall(torch.nn.Module):
    """Its first call keeps the frames up to the largest value, then halves them past 3: a size known only when
    the model runs, branched on, on the side the condition is traced with (True), so that the condition's own
    program fails to capture (the cut alone exports on torch 2.15, whose slicing holds an unbacked size)."""

    def forward(self, x, state):
        if state == 0:
            x = x[:, :int(x.abs().argmax())]
            x = x[:, :x.shape[1] // 2] if x.shape[1] > 3 else x
        return x.tanh()


def _flag(t: torch.Tensor):
    """``t`` while exported, its Python bool (read by ``.item()``, not as a tensor's truth) in eager mode."""
    return t if torch.compiler.is_exporting() else t.item()


class FlagReadWhenExported(torch.nn.Module):
    """Its branch reads a tensor's truth only while exported: eager PyTorch branches on a Python bool."""

    def forward(self, x, state):
        first = _flag(state == 0)
        extra = 0
        if first:
            extra = 2
        out = x.new_zeros(x.shape[0], x.shape[1] - 2 + extra, x.shape[2])
        if first:
            out[:, :extra] = x[:, :extra] * 3
        out[:, extra:] = x[:, 2:].tanh()
        return out


@pytest.mark.parametrize("cls, args, why", [
    (RankDiffers, (torch.randn(2, 5, 3), torch.tensor(0)), r"output 'output' differs in dtype or rank between the "
                                                            r"sides \(ONNX If gives one type per output\)"),
    (OnActivations, (torch.randn(2, 5, 3), torch.tensor(0)), r"reads x, not only one-element integer or bool inputs"),
    (TwoStates, (torch.randn(2, 5, 3), torch.tensor(0), torch.tensor(0)), r"reads another condition at .*:{b}"),
    (CutOnFirstCall, (torch.randn(2, 5, 3), torch.tensor(0)), r"the condition alone failed to export: .*"
                                                             r"`x = x\[:, :int\(x.abs\(\).argmax\(\)\)\]`"),
    (FlagReadWhenExported, (torch.randn(2, 5, 3), torch.tensor(0)), r"eager PyTorch does not read the condition at "
                                                                   r".* \(`if first:`\) on the example"),
    (FifthCall, (torch.randn(2, 5, 3), torch.tensor(3)), r"no state input given its other value \(a counter set to 0, "
                                                        r"or to 1 where it was 0, a flag negated\) makes the "
                                                        r"condition at .* \(`if state == 5:`\) True: give an example "
                                                        r"whose state makes it True"),
])
def test_a_join_that_cannot_be_made_is_refused_naming_the_line(cls, args, why):
    line = _line(cls, "if ")
    with pytest.raises(onnxport.ExportError) as info:
        onnxport.to_onnx(cls(), args, dynamic_shapes=(DIMS[0], *[None] * (len(args) - 1)))
    text = str(info.value)
    assert f"{__file__}:{line} in forward" in text, text
    assert "exporting each side of the branch on its own did not help" in text, text
    if "{b}" in why:
        why = why.format(b=_line(cls, "if b == 0"))
    assert re.search(why, text), text



def test_an_example_on_the_side_the_refusal_names_exports():
    """The fix ``FifthCall``'s refusal gives: an example whose state makes the condition True (5), from which
    the counter set to 0 reaches the other side."""
    def make(b, t, v):
        return torch.randn(b, t, 3), torch.tensor(v)

    with pytest.warns(UserWarning, match="exported each side on its own"):
        result = check_export(FifthCall(), make(2, 5, 5), DIMS,
                              inputs=[make(b, 6, v) for v in (5, 0, 3) for b in (1, 3)])
    assert count_ops(result, "If") == 1 and result.validate().ok

class NoState(torch.nn.Module):
    def forward(self, x):
        extra = 0
        if x.sum() > 0:
            extra = 2
        out = x.new_zeros(x.shape[0], x.shape[1] - 2 + extra, x.shape[2])
        if x.sum() > 0:
            out[:, :extra] = x[:, :extra] * 3
        out[:, extra:] = x[:, 2:].tanh()
        return out


def test_a_model_without_a_state_input_keeps_the_refusal_of_its_branch():
    with pytest.raises(onnxport.ExportError) as info:
        onnxport.to_onnx(NoState(), (torch.randn(2, 5, 3),), dynamic_shapes=(DIMS[0],))
    text = str(info.value)
    assert f"{__file__}:{_line(NoState, 'if ')} in forward" in text and "each side of the branch" not in text, text


def test_the_inputs_a_condition_reads_two_subgraphs_down_are_found():
    from onnx import TensorProto, helper

    from onnxport.value_sides import inputs_read

    def graph(name, nodes, out):
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, TensorProto.BOOL, [])])

    inner = helper.make_node("If", ["flag"], ["inner"], then_branch=graph("t2", [
        helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
        helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])),
        helper.make_node("Greater", ["total", "zero"], ["positive"])], "positive"),
        else_branch=graph("e2", [helper.make_node("Identity", ["flag"], ["same"])], "same"))
    outer = helper.make_node("If", ["flag"], ["go"], then_branch=graph("t1", [inner], "inner"),
                             else_branch=graph("e1", [helper.make_node("Not", ["flag"], ["other"])], "other"))
    unread = helper.make_node("Neg", ["y"], ["dropped"])
    g = helper.make_graph([unread, outer], "condition",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
                           helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("go", TensorProto.BOOL, [])])
    assert inputs_read(g) == ["x", "flag"]  # x only within the If within the If; y by no node the output needs
