"""A branch on a state tensor (a counter or a flag given as a one-element tensor) -> ONNX If.

Streaming models pass their state between calls as tensors and branch on it (``if n_processed_blocks
== 0:``). Capture fails on such a branch; the rewrite keeps both sides as ``torch.cond``, checks the
rewritten copy against the model in eager mode on both sides (the flag or counter given its other
value), and refuses, naming the line, a branch whose sides ``torch.cond`` cannot hold. Each export
is compared with eager PyTorch in onnxruntime at both values of the state and at two sizes of
each dynamic dim."""

import re

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

import onnxport
from exportcheck import check_export, count_ops
from onnxport.rewrite import rewrite_module
from onnxport.rewrite.check import check_equivalent
from speech_streaming import EspnetStreamingStep, espnet_stream_from_first_block


def _line(cls, text: str) -> int:
    """The line of ``cls.forward`` holding ``text``."""
    import inspect

    lines, first = inspect.getsourcelines(cls.forward)
    return first + next(k for k, line in enumerate(lines) if text in line)


class Counter(torch.nn.Module):
    def forward(self, x, counter):
        if counter == 0:
            y = x * 2
        else:
            y = x + 1
        return y


DIMS = {0: Dim("batch"), 1: Dim("time")}


def _sets(state_values, make):
    """Inputs at each state value and at two sizes of each dynamic dim (beside the example's)."""
    return [make(b, t, v) for v in state_values for b, t in ((3, 7), (1, 4))]


def test_a_branch_on_a_counter_is_one_if_checked_on_both_sides():
    line = _line(Counter, "if counter == 0")
    with pytest.warns(UserWarning, match=rf"onnxport rewrote the if at .*test_state_branches.py:{line} in forward"):
        result = check_export(Counter(), (torch.randn(2, 5), torch.tensor(0)), (DIMS, None),
                              inputs=_sets((0, 1, 5), lambda b, t, v: (torch.randn(b, t), torch.tensor(v))))
    assert count_ops(result, "If") == 1
    (note,) = [n for n in result.rewrite_notes if n.rewritten]
    assert note.where.endswith(f":{line} in forward") and "both sides checked in eager mode" in note.detail


class FirstChunk(torch.nn.Module):
    """A streaming step: the ``first`` flag chooses between a cache of zeros and the cache given; the
    step returns its output and the updated cache (the last ``k`` frames seen)."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, chunk, first, cache):
        if first:
            cache = torch.zeros_like(cache)
            scale = torch.ones_like(chunk[:, :1])
        else:
            scale = cache.mean(1, keepdim=True).sigmoid()
        seen = torch.cat([cache, chunk], dim=1)
        out = self.proj(seen)[:, -chunk.shape[1]:] * scale
        return out, seen[:, -cache.shape[1]:]


def test_a_flag_choosing_the_state_update():
    def make(b, t, first):
        return torch.randn(b, t, 4), torch.tensor(first), torch.randn(b, 3, 4)

    with pytest.warns(UserWarning, match=rf"rewrote the if at .*:{_line(FirstChunk, 'if first')} in forward"):
        result = check_export(FirstChunk(), make(2, 5, False), ({0: Dim("batch"), 1: Dim("time")}, None,
                                                                 {0: Dim("batch")}),
                              inputs=_sets((True, False), make))
    assert count_ops(result, "If") == 1
    assert [o.name for o in result.model.graph.outputs][:2] and len(result.model.graph.outputs) == 2


class BoolOfACompare(torch.nn.Module):
    def forward(self, x, state):
        if bool(state == 0):
            y = x * 2
        else:
            y = x + 1
        return y


class Item(torch.nn.Module):
    def forward(self, x, state):
        if state.item() > 0:
            y = x * 2
        else:
            y = x + 1
        return y


class Flag(torch.nn.Module):
    def forward(self, x, state):
        if state:
            y = x * 2
        else:
            y = x + 1
        return y


class Computed(torch.nn.Module):
    """A condition on values computed from the state, with ``and`` / ``not`` / ``bool``."""

    def forward(self, x, state):
        n = state + 1
        if n > 1 and not bool(n > 5):
            y = x * 2
        else:
            y = x + 1
        return y


@pytest.mark.parametrize("cls, values", [(BoolOfACompare, (0, 1)), (Item, (0, 2)), (Flag, (False, True)),
                                         (Computed, (0, 1, 7))])
@pytest.mark.parametrize("shape", [(), (1,)])
def test_forms_of_a_condition_on_a_state(cls, values, shape):
    def make(b, t, v):
        return torch.randn(b, t), torch.tensor(v).reshape(shape)

    result = check_export(cls(), make(2, 5, values[0]), (DIMS, None), inputs=_sets(values, make))
    assert count_ops(result, "If") == 1
    (note,) = result.rewrite_notes
    assert note.rewritten and "both sides checked in eager mode" in note.detail


class ShapesDiffer(torch.nn.Module):
    def forward(self, x, counter):
        if counter == 0:
            y = x[:, 1:]
        else:
            y = x
        return y


class StructuresDiffer(torch.nn.Module):
    def forward(self, x, counter):
        if counter == 0:
            y = (x, x)
        else:
            y = x
        return y[0] if isinstance(y, tuple) else y


class ReadsANumber(torch.nn.Module):
    def forward(self, x, counter):
        n = counter.item()
        if n == 0:
            y = x * 2
        else:
            y = x + n
        return y


@pytest.mark.parametrize("cls, why, options", [
    (StructuresDiffer, "'y' as a tuple of 2 and as a tensor", {"rewrite_control_flow": True}),
    (ReadsANumber, r"a side reads 'n', a number from a tensor's data \(.item\(\)\)", {}),
])
def test_sides_torch_cond_cannot_hold_are_refused_naming_the_line(cls, why, options):
    line = _line(cls, "if ")
    with pytest.raises(onnxport.ExportError) as info:
        onnxport.to_onnx(cls(), (torch.randn(2, 5), torch.tensor(0)), dynamic_shapes=(DIMS, None), **options)
    text = str(info.value)
    assert f"the sides of the if at {__file__}:{line} in forward cannot be one torch.cond" in text
    assert __import__("re").search(why, text), text


def test_sides_of_other_structures_are_exported_one_side_at_a_time():
    # the rewrite's torch.cond cannot hold them (the test above); after it fails, each side is exported on its
    # own and joined under ONNX If on the counter (onnxport/value_sides.py), both sides compared with eager
    def make(b, t, v):
        return torch.randn(b, t), torch.tensor(v)

    with pytest.warns(UserWarning, match=rf"branches on a state's value at .*:{_line(StructuresDiffer, 'if ')} "):
        result = check_export(StructuresDiffer(), make(2, 5, 0), (DIMS, None), inputs=_sets((0, 1, 4), make))
    assert sorted(side.holds for side, _ in result.pieces) == [False, True]


def test_sides_of_other_shapes_are_refused_naming_the_line_or_exported_right():
    # torch.cond holds sides of other shapes from torch 2.15 on (an output size of its own); before, it refuses them
    try:
        result = onnxport.to_onnx(ShapesDiffer(), (torch.randn(2, 5), torch.tensor(0)), dynamic_shapes=(DIMS, None))
    except onnxport.ExportError as refused:
        text = str(refused)
        assert f"the sides of the if at {__file__}:{_line(ShapesDiffer, 'if ')} in forward cannot be one" in text
        assert re.search(r"'y' of shape \[s\d+, s\d+ - 1\] and of shape \[s\d+, s\d+\]", text), text
        return
    session = ort.InferenceSession(result.model_proto.SerializeToString())
    for counter, shape in ((0, (2, 5)), (0, (3, 7)), (1, (2, 5)), (4, (3, 7))):
        x, c = torch.randn(*shape), torch.tensor(counter)
        got = session.run(None, {"x": x.numpy(), "counter": c.numpy()})[0]
        want = ShapesDiffer()(x, c)
        assert got.shape == tuple(want.shape)
        np.testing.assert_allclose(got, want.numpy())


class Wrong(torch.nn.Module):
    """``Counter`` but for its else side."""

    def forward(self, x, counter):
        return x * 2 if counter == 0 else x + 2


def test_the_eager_check_runs_the_other_side():
    args = (torch.randn(2, 5), torch.tensor(0))
    new = rewrite_module(Counter(), args, check=False, warn=False)
    notes = [n for n in new.onnxport_rewrite_notes if n.rewritten]
    check_equivalent(Counter(), new, args, {}, notes)  # the same model: no difference
    with pytest.raises(onnxport.RewriteError, match=r"input 1 \(0\) set to 1"):
        check_equivalent(Wrong(), new, args, {}, notes)  # the same at counter == 0 only


# ------------------------------------------------------------------ ESPnet's contextual-block Conformer
@pytest.mark.slow  # about 40 s
def test_espnet_contextual_block_conformer_streaming_step():
    # forward_infer emits `offset` more frames while n_processed_blocks == 0 (contextual_block_conformer_encoder.py:
    # `y_length += offset`, a Python int, then `ys_pad[:, 0:offset] = ...`): no torch.cond holds it, and each side
    # is exported on its own, joined under ONNX If on the counter (onnxport/value_sides.py)
    encoder, steps = espnet_stream_from_first_block(frames=32, chunks=6)
    step = EspnetStreamingStep(encoder)
    assert [int(s[5]) for s in steps] == [0, 2, 4, 6, 8, 10]
    with pytest.warns(UserWarning, match=r"branches on a state's value at .*contextual_block_conformer_encoder.py"):
        result = check_export(step, steps[0], None, inputs=steps[1:], min_sets=6)
    assert sorted(side.holds for side, _ in result.pieces) == [False, True]
    # the stream from the first block, each step's states fed back, in onnxruntime against eager PyTorch
    names = [i.name for i in result.model.graph.inputs]
    outputs = [o.name for o in result.model.graph.outputs]
    pairs = dict(zip(outputs[2:], names[1:]))
    report = result.validate_stream(pairs, initial=dict(zip(names[1:], steps[0][1:])),
                                    chunks=[{names[0]: s[0]} for s in steps])
    assert report.ok, f"\n{report}"
    lengths = [c.shape[1] for c in report.checks if c.output == outputs[0]]
    assert lengths == [10, 8, 8, 8, 8, 8], lengths  # the first block's frames, then a hop's per block


class StreamPositions(torch.nn.Module):
    """ESPnet's ``StreamPositionalEncoding`` at an offset given as a tensor (a count of processed blocks)."""

    def __init__(self):
        super().__init__()
        from third_party import import_speech

        embedding = import_speech("espnet.nets.pytorch_backend.transformer.embedding")
        self.pos_enc = embedding.StreamPositionalEncoding(16, 0.0)

    def forward(self, x, start):
        return self.pos_enc(x, start * 4)


def test_espnet_stream_positions_at_a_tensor_offset():
    def make(b, t, start):
        return torch.randn(b, t, 16), torch.tensor(start)

    check_export(StreamPositions(), make(2, 5, 3), (DIMS, None), inputs=_sets((0, 2, 700), make))
