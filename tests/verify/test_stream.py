"""The streaming check (``onnxport.verify.stream``): small models run chunk after chunk from their initial
state in onnxruntime and in eager PyTorch, the state outputs fed back; an ONNX model right at every call
``validate`` makes but wrong once its own states come back is caught; arguments that do not describe a
stream of the model are refused with what to do."""

import onnx
import onnx_ir as ir
import pytest
import torch
from onnx import helper
from torch.export import Dim

import onnxport
from onnxport.errors import ValidationError


class Cache(torch.nn.Module):
    """Attention-like left context kept as ``cat([cache, chunk])[:, -16:]``."""

    def __init__(self, keep: int = 16):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.keep = keep

    def forward(self, chunk, cache):
        x = torch.cat([cache, chunk], 1)
        y = self.lin(x).tanh().cumsum(1)[:, -chunk.shape[1]:]
        return y, x[:, -self.keep:]


class LstmStep(torch.nn.Module):
    """One LSTM step over a chunk with its ``(h, c)`` state in and out."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(8, 12, num_layers=2, batch_first=True)

    def forward(self, x, h, c):
        y, (h, c) = self.lstm(x, (h, c))
        return y, h, c


def export_cache(keep: int = 16, dynamic_cache: bool = True, chunk_max: int | None = None):
    torch.manual_seed(0)
    batch, chunk = Dim("batch"), Dim("chunk", max=chunk_max) if chunk_max else Dim("chunk")
    cache = {0: batch, 1: Dim("cache")} if dynamic_cache else {0: batch}
    return onnxport.to_onnx(Cache(keep).eval(), (torch.randn(2, 4, 8), torch.randn(2, 16, 8)),
                            dynamic_shapes={"chunk": {0: batch, 1: chunk}, "cache": cache})


@pytest.fixture(scope="module")
def cache_result():
    return export_cache()


class Counted(torch.nn.Module):
    """A chunk scaled by a counter of the steps taken, a tensor of shape ``[]`` in and out."""

    def forward(self, chunk, count):
        return chunk * (count + 1).to(chunk.dtype), count + 1


def test_a_state_of_shape_scalar_is_fed_back_as_a_scalar():
    result = onnxport.to_onnx(Counted(), (torch.randn(2, 4), torch.tensor(0)),
                              dynamic_shapes=({0: Dim("batch"), 1: Dim("chunk")}, None))
    report = result.validate_stream({"output_1": "count"}, initial={"count": torch.tensor(0)})
    assert report.ok, report
    assert {c.shape for c in report.checks if c.output == "output_1"} == {()}


def test_cache_streams_from_an_empty_cache_at_two_batches_and_two_chunk_lengths(cache_result):
    report = cache_result.validate_stream({"output_1": "cache"}, initial={"cache": torch.zeros(2, 0, 8)})
    assert report.ok, report
    sizes = {s for _, s, _ in report.streams}
    assert sizes == {"batch=2, chunk=4", "batch=2, chunk=2", "batch=1, chunk=4", "batch=1, chunk=2"}
    errors = report.per_step
    assert len(errors) == 8 and all(len(v) == 6 for v in errors.values())
    shapes = [c.shape for c in report.checks if c.output == "output_1" and c.inputs.startswith("stream 1 ")]
    assert shapes == [(2, 4, 8), (2, 8, 8), (2, 12, 8), (2, 16, 8), (2, 16, 8), (2, 16, 8)]  # filled, then cut
    assert "stream matches" in str(report) and "step 5" in str(report)


def test_lstm_state_by_positions_from_zeros():
    torch.manual_seed(0)
    batch, time = Dim("batch"), Dim("time")
    result = onnxport.to_onnx(LstmStep().eval(), (torch.randn(3, 5, 8), torch.randn(2, 3, 12), torch.randn(2, 3, 12)),
                              dynamic_shapes={"x": {0: batch, 1: time}, "h": {1: batch}, "c": {1: batch}})
    report = onnxport.check_stream(result, states={1: 1, 2: 2}, steps=7)  # zeros like the example's h and c
    assert report.ok, report
    assert report.states == (("output_1", "h"), ("output_2", "c"))
    assert {s for _, s, _ in report.streams} == {"batch=3, time=5", "batch=3, time=2", "batch=1, time=5",
                                                  "batch=1, time=2"}
    assert all(c.shape[1] in (1, 3) for c in report.checks if c.output in ("output_1", "output_2"))
    with pytest.raises(ValidationError, match=r"state output 'output_1' has shape \[2, batch, 12\] but feeds input "
                                              r"'x' of shape \[batch, time, 8\]"):
        result.validate_stream({"output_1": "x"})


def _wrong_on_an_empty_cache(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` whose cache output is zeros when the cache input is empty (a stream's first step), right
    otherwise: every call ``validate`` makes (cache lengths 1 and more) is right."""
    proto = onnx.ModelProto.FromString(proto.SerializeToString())
    g = proto.graph
    out = next(o for o in g.output if o.name == "output_1")
    old = "output_1_right"
    for node in g.node:
        node.output[:] = [old if n == out.name else n for n in node.output]
        node.input[:] = [old if n == out.name else n for n in node.input]
    g.initializer.append(helper.make_tensor("zero_length", onnx.TensorProto.INT64, [1], [0]))
    g.node.extend([
        helper.make_node("Shape", ["cache"], ["cache_length"], start=1, end=2),
        helper.make_node("Equal", ["cache_length", "zero_length"], ["cache_empty"]),
        helper.make_node("Mul", [old, "zero_float"], ["zeros_like_cache"]),
        helper.make_node("Where", ["cache_empty", "zeros_like_cache", old], [out.name]),
    ])
    g.initializer.append(helper.make_tensor("zero_float", onnx.TensorProto.FLOAT, [], [0.0]))
    onnx.checker.check_model(proto)
    return proto


def test_right_at_every_call_but_wrong_over_the_loop_is_caught(cache_result):
    broken = cache_result.replace(model=ir.serde.deserialize_model(_wrong_on_an_empty_cache(cache_result.model_proto)))
    assert broken.validate(values=[]).ok  # every call validate makes is right
    empty = {"cache": torch.zeros(2, 0, 8)}
    assert cache_result.validate_stream({"output_1": "cache"}, initial=empty).ok
    report = broken.validate_stream({"output_1": "cache"}, initial=empty)
    assert not report.ok
    first = report.first_failure
    assert first.inputs.endswith("step 0") and first.output == "output_1"
    failing = {(c.inputs.split(" step ")[1], c.output) for c in report.checks if not c.ok}
    assert ("1", "output_0") in failing  # the wrong state reaches the next step's output
    assert "STREAM MISMATCH" in str(report) and "FAIL" in str(report)


def test_onnx_model_and_module_given_with_chunks():
    result = export_cache()
    gen = torch.Generator().manual_seed(5)
    chunks = [{"chunk": torch.randn(1, 3, 8, generator=gen)} for _ in range(5)]
    report = onnxport.check_stream(result.model_proto, result.module, states={"output_1": "cache"},
                                   initial={"cache": torch.zeros(1, 0, 8)}, chunks=chunks)
    assert report.ok, report
    assert report.steps == 5 and len(report.streams) == 1


def test_make_step_is_called_at_each_size(cache_result):
    seen = []

    def make_step(step, batch, chunk):
        seen.append((step, batch, chunk))
        return {"chunk": torch.full((batch, chunk, 8), float(step))}

    report = cache_result.validate_stream({"output_1": "cache"}, initial={"cache": torch.zeros(2, 0, 8)},
                                          make_step=make_step, steps=3, batches=[1, 4], chunk_lengths=[5])
    assert report.ok, report
    assert seen == [(t, b, 5) for b in (1, 4) for t in range(3)]


@pytest.mark.parametrize("kwargs, message", [
    ({"states": {"output_7": "cache"}}, "no output named 'output_7'"),
    ({"states": {"output_1": "cach"}}, "no input named 'cach'"),
    ({"states": {5: 1}}, "no output at position 5"),
    ({"states": {"output_1": "cache"}, "initial": {"h": torch.zeros(2, 0, 8)}}, "misses ['cache']"),
    ({"states": {"output_1": "cache"}, "initial": {"cache": torch.zeros(2, 8)}}, "has shape [2, 8]"),
    ({"states": {"output_1": "cache"}, "initial": {"cache": torch.randn(2, 3, 8)}, "batches": [1]},
     "rows that differ"),
    ({"states": {"output_1": "cache"}, "chunks": [{"x": torch.zeros(1, 2, 8)}]}, "miss ['chunk']"),
])
def test_arguments_that_are_not_a_stream_of_the_model_are_refused(cache_result, kwargs, message):
    with pytest.raises(ValidationError) as e:
        cache_result.validate_stream(**kwargs)
    assert message in str(e.value) and "fix:" in str(e.value)


def test_sizes_outside_the_export_are_refused():
    result = export_cache(chunk_max=8)
    with pytest.raises(ValidationError, match=r"chunk lengths \[9\] are outside the range \[0, 8\]"):
        result.validate_stream({"output_1": "cache"}, chunk_lengths=[4, 9])


def test_a_state_output_whose_fixed_length_differs_from_its_input_is_refused():
    result = export_cache(keep=12, dynamic_cache=False)  # cache in [batch, 16, 8], out [batch, 12, 8]
    with pytest.raises(ValidationError, match=r"state output 'output_1' is \[2, 12, 8\] at step 0 \(eager PyTorch\) "
                                              r"but feeds input 'cache' of shape \[batch, 16, 8\]"):
        result.validate_stream({"output_1": "cache"})


def test_a_state_output_of_another_dtype_is_refused():
    class Count(torch.nn.Module):
        def forward(self, x, n):
            return x * n.float(), n + x.shape[1]

    result = onnxport.to_onnx(Count(), (torch.randn(2, 3), torch.ones(2, 1, dtype=torch.int64)),
                              dynamic_shapes={"x": {0: Dim("batch"), 1: Dim("time")}, "n": {0: Dim("batch")}})
    assert result.validate_stream({1: 1}, initial={"n": torch.zeros(2, 1, dtype=torch.int64)}).ok
    with pytest.raises(ValidationError, match="state output 'output_0' is float but feeds input 'n' of int64"):
        result.validate_stream({0: "n"})
