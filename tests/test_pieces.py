"""A branch on a size that capture cannot keep and the rewrite cannot take, both sides of which eager
PyTorch runs, is exported in pieces: each interval of the dim where the branch goes one way on its own,
joined by ONNX If on the size; every piece compared with eager PyTorch through the joined model."""

import onnx
import onnx_ir as ir
import pytest
import torch

import onnxport
from exportcheck import check_export


class PoolsLongInputs(torch.nn.Module):
    """Above 16 steps the sequence is pooled to half its length; the side also writes the module (the
    rewrite into torch.cond leaves such a side as written)."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.mode = "plain"

    def forward(self, x):
        if x.shape[1] > 16:
            self.mode = "pooled"
            x = torch.nn.functional.avg_pool1d(x.transpose(1, 2), 2, ceil_mode=True).transpose(1, 2)
        return self.proj(x)


class WindowsOfFour(torch.nn.Module):
    """DeepSeek-V4's compressor in small: whole windows of 4 steps exist from 4 steps on, and the
    windows are chained from 8 on; three intervals, two branches."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.windows = []

    def forward(self, x):  # x: [batch, time, 4]
        usable = (x.shape[1] // 4) * 4
        chunk = x[:, :usable]
        if chunk.shape[1] > 0:
            n = chunk.shape[1] // 4
            chunk = chunk.reshape(x.shape[0], n, 4, 4).mean(2)
            if n > 1:
                self.windows.append(n)
                chunk = torch.cat([chunk[:, :1], chunk[:, 1:] + chunk[:, :-1]], 1)
            pooled = self.proj(chunk).sum(1, keepdim=True)
        else:
            pooled = x.new_zeros(x.shape[0], 1, 4)
        return x + pooled


def _leaves(result) -> list[str]:
    """The intervals exported, in order, pieces of pieces flattened."""
    return [leaf for iv, piece in result.pieces for leaf in (_leaves(piece) if piece.pieces else [str(iv)])]


def _ifs(result) -> int:
    return sum(n.op_type == "If" for n in ir.traversal.RecursiveGraphIterator(result.model.graph))


def test_a_branch_whose_sides_differ_in_length_is_exported_in_two_pieces():
    with pytest.warns(UserWarning, match=r"exported each side on its own .*1 <= time <= 16, time >= 17"):
        result = check_export(PoolsLongInputs(), (torch.randn(2, 10, 8),), {"x": {0: "batch", 1: "time"}},
                              values=[], sizes=[{"batch": 3, "time": 16}, {"batch": 2, "time": 17},
                                                {"batch": 1, "time": 30}])
    assert [str(iv) for iv, _ in result.pieces] == ["1 <= time <= 16", "time >= 17"]
    assert _ifs(result) == 1
    report = result.validate(values=[])
    assert report.ok and any("time >= 17" in c.why for c in report.checks) and \
        any("1 <= time <= 16" in c.why for c in report.checks)
    assert [d for d in result.model.graph.inputs[0].shape] == [ir.SymbolicDim("batch"), ir.SymbolicDim("time"), 8]


def test_given_inputs_with_no_sizes_are_compared_in_a_model_of_pieces():
    """``validate(inputs=..., sizes=[])`` compares the given inputs (and each piece's example), not nothing."""
    with pytest.warns(UserWarning):
        result = onnxport.to_onnx(PoolsLongInputs(), (torch.randn(2, 10, 8),),
                                  dynamic_shapes=({0: "batch", 1: "time"},))
    report = result.validate(inputs=[(torch.randn(3, 25, 8),), (torch.randn(1, 4, 8),)], sizes=[], values=[])
    given = [c for c in report.checks if c.inputs.startswith("inputs")]
    assert report.ok and len({c.inputs for c in given}) == 2, report
    assert {c.why.split("piece ")[-1] for c in report.checks} == {"1: 1 <= time <= 16", "2: time >= 17"}


@pytest.mark.slow
def test_two_branches_give_three_pieces_each_compared_with_eager():
    result = check_export(WindowsOfFour(), (torch.randn(2, 6, 4),), {"x": {0: "batch", 1: "time"}}, values=[],
                          sizes=[{"batch": 2, "time": t} for t in (1, 3, 4, 7, 8, 9, 21)])
    assert _leaves(result) == ["1 <= time <= 3", "4 <= time <= 7", "time >= 8"]
    assert _ifs(result) == 2
    onnx.checker.check_model(result.model_proto, full_check=True)


class RemainderBranch(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] % 4 == 0:
            self.grouped = True  # a side writing the module: the rewrite leaves the if as written
            return x.reshape(x.shape[0], -1, 4).sum(2)
        return x[:, :1] * 2


def test_a_condition_changing_at_every_few_sizes_is_no_piece_but_a_join_on_residues():
    """A remainder cuts the range into more pieces than the export takes: it is adopted on trial
    (``capture.steps.remainder_branch``), and the residue classes it excludes, traced, are joined under
    one If on the remainder (``onnxport.remainder_sides``), not cut into pieces."""
    with pytest.warns(UserWarning, match=r"joined them under ONNX If on the sizes' remainders modulo 4"):
        r = onnxport.to_onnx(RemainderBranch(), (torch.randn(2, 8),), dynamic_shapes={"x": {0: "batch", 1: "n"}})
    assert not r.constraints and _ifs(r) == 1 and not r.pieces
    assert r.captured.strategy == "non-strict"  # adopted at the first capture: the rewrite leaves the if
    assert r.validate(sizes=[{"batch": 3, "n": 12}, {"batch": 1, "n": 4}, {"batch": 2, "n": 6},
                             {"batch": 2, "n": 9}]).ok


def test_no_pieces_when_control_flow_is_left_as_written():
    with pytest.raises(onnxport.SpecializationError, match="branches on a size"):
        onnxport.to_onnx(PoolsLongInputs(), (torch.randn(2, 10, 8),), dynamic_shapes={"x": {0: "batch", 1: "time"}},
                         rewrite_control_flow=False)


def _piece_model(weight: float, body_op: str, dim: str = "n") -> onnx.ModelProto:
    """``y = f(x) * w``: a local function ``f`` and an initializer ``w`` of the same names in every
    piece, with other bodies and values."""
    from onnx import TensorProto, helper

    f = helper.make_function("local", "f", ["a"], ["b"], [helper.make_node(body_op, ["a"], ["b"])],
                             [helper.make_opsetid("", 20)])
    graph = helper.make_graph(
        [helper.make_node("f", ["x"], ["t"], domain="local"), helper.make_node("Mul", ["t", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", dim])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", dim])],
        initializer=[helper.make_tensor("w", TensorProto.FLOAT, [], [weight])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("local", 1)],
                             functions=[f])


def test_join_keeps_each_piece_its_own_function_and_initializer():
    import numpy as np
    import onnxruntime as ort

    from onnxport.join_pieces import join

    joined = join([_piece_model(2.0, "Neg"), _piece_model(3.0, "Abs"), _piece_model(2.0, "Neg")], "n", [4, 9])
    onnx.checker.check_model(joined, full_check=True)
    assert len(joined.functions) == 2 and len(joined.graph.initializer) == 2  # the third piece shares the first's
    session = ort.InferenceSession(joined.SerializeToString(), providers=["CPUExecutionProvider"])
    for n, expected in ((1, lambda x: -x * 2), (4, lambda x: -x * 2), (5, lambda x: np.abs(x) * 3),
                        (9, lambda x: np.abs(x) * 3), (10, lambda x: -x * 2)):
        x = np.random.default_rng(n).standard_normal((2, n)).astype(np.float32)
        np.testing.assert_allclose(session.run(None, {"x": x})[0], expected(x), rtol=1e-6)
    assert [d.dim_param for d in joined.graph.output[0].type.tensor_type.shape.dim] == ["b", "n"]


class PoolsWithAMask(PoolsLongInputs):
    """The branch's dim also sizes a mask one longer (``total = time + 1``, a relation)."""

    def forward(self, x, mask):
        return super().forward(x).sum(1) + mask.sum(1, keepdim=True)


@pytest.mark.slow
def test_a_related_dim_follows_the_piece():
    with pytest.warns(UserWarning, match=r"1 <= time <= 16, time >= 17"):
        result = check_export(PoolsWithAMask(), (torch.randn(2, 10, 8), torch.ones(2, 11)),
                              {"x": {0: "batch", 1: "time"}, "mask": {0: "batch", 1: "total"}},
                              relations={"total": "time + 1"}, values=[],
                              sizes=[{"batch": 2, "time": 16}, {"batch": 2, "time": 17}])
    assert len(result.pieces) == 2


class ReturnsItsTable(torch.nn.Module):
    """Each side returns a buffer (an initializer the ONNX model returns as it is), other values."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.arange(6.0).reshape(2, 3))

    def forward(self, x):
        if x.shape[1] > 16:
            self.mode = "long"
            return x[:, ::2], self.table * 2
        return x, self.table


def test_pieces_returning_an_initializer_each():
    result = check_export(ReturnsItsTable(), (torch.randn(2, 10, 3),), {"x": {0: "batch", 1: "time"}}, values=[],
                          sizes=[{"batch": 2, "time": 16}, {"batch": 2, "time": 17}, {"batch": 1, "time": 1}])
    assert len(result.pieces) == 2


class OtherOutputs(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] > 16:
            self.mode = "long"
            return x[:, ::2], x.mean(1)
        return x * 2


def test_sides_returning_other_outputs_stay_refused_saying_so():
    with pytest.raises(onnxport.SpecializationError, match=r"the sides return other outputs"):
        onnxport.to_onnx(OtherOutputs(), (torch.randn(2, 10, 3),), dynamic_shapes={"x": {0: "batch", 1: "time"}})


class CondOnTheLongSide(torch.nn.Module):
    """Only the side above 16 holds a torch.cond (a local function of domain onnxport in its piece)."""

    def forward(self, x):
        if x.shape[1] > 16:
            self.seen = True
            x = x[:, ::2]
            return torch.cond(x.shape[0] > 3, lambda t: t.sum(1) * 2, lambda t: t.sum(1) - 2, (x,))
        return x.mean(1)


def test_a_domain_only_a_later_piece_uses_is_imported():
    result = check_export(CondOnTheLongSide(), (torch.randn(2, 10, 3),), {"x": {0: "batch", 1: "time"}}, values=[],
                          sizes=[{"batch": 2, "time": 16}, {"batch": 2, "time": 18}, {"batch": 5, "time": 20}])
    assert "onnxport" in {o.domain for o in result.model_proto.opset_import}


class EqualsEight(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] == 8:
            self.hit = True
            return x * 2
        return x + 1


@pytest.mark.slow
def test_a_piece_of_one_size_is_exported_with_the_dim_static():
    result = check_export(EqualsEight(), (torch.randn(2, 10),), {"x": {0: "batch", 1: "time"}}, values=[],
                          sizes=[{"batch": 2, "time": t} for t in (1, 7, 8, 9, 20)],
                          expect_inputs={"x": ["batch", "time"]}, expect_outputs={"output": ["batch", "time"]})
    assert _leaves(result) == ["1 <= time <= 7", "time == 8", "time >= 9"]
    assert any("time == 8" in c.why and c.ok for c in result.validate(values=[]).checks)


class FiveSides(torch.nn.Module):
    def forward(self, x):
        t = x.shape[1]
        if t > 32:
            self.side = 1
            return x[:, ::4] * 4
        if t > 16:
            self.side = 2
            return x[:, ::3] * 3
        if t > 8:
            self.side = 3
            return x[:, ::2] * 2
        if t > 4:
            self.side = 4
            return x[:, :1]
        return x - 1


@pytest.mark.slow
def test_more_pieces_than_the_limit_are_refused_saying_so():
    with pytest.raises(onnxport.SpecializationError, match=r"more than 4 pieces"):
        onnxport.to_onnx(FiveSides(), (torch.randn(2, 10, 3),), dynamic_shapes={"x": {0: "batch", 1: "time"}})
