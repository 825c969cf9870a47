"""torch.cond -> ONNX If: tensor and SymBool predicates, operands, several outputs, parameters in the
branches, nested conds, conds inside scan bodies; every case runs both branches."""

import onnx_ir as ir
import pytest
import torch
from torch._higher_order_ops.scan import scan
from torch.export import Dim

import onnxport
from exportcheck import check_export, count_ops, MODES


def _signed(shape, dtype, sign):
    """A tensor whose sum has the given sign (so a ``x.sum() > 0`` predicate picks a known branch)."""
    t = torch.randint(1, 5, shape) if dtype != torch.float32 else torch.rand(shape) + 0.1
    return (t * sign).to(dtype)


def _branch_forms(result, inline):
    ifs = [n for n in ir.traversal.RecursiveGraphIterator(result.model.graph) if n.op_type == "If"]
    for node in ifs:
        for name in ("then_branch", "else_branch"):
            g = node.attributes[name].as_graph()
            assert len(g.inputs) == 0
            calls = [n for n in g if n.domain == "onnxport"]
            assert (len(calls) == 0) if inline else (len(calls) == 1 and len(list(g)) == 1)
    return ifs


class TensorPredicate(torch.nn.Module):
    """Two operands, two outputs of different dtypes/ranks per branch."""

    def forward(self, x, y):
        def true_fn(x, y):
            return x * y + 1, (x - y).sum(1)

        def false_fn(x, y):
            return x - y * 2, (x * y).sum(1) - 3

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x, y))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("inline,optimize", MODES)
def test_cond_tensor_predicate(dtype, inline, optimize):
    B = Dim("B")
    pos = (_signed((3, 4), dtype, 1), _signed((3, 4), dtype, 1))
    neg = (_signed((2, 4), dtype, -1), _signed((2, 4), dtype, 1))
    one = (_signed((1, 4), dtype, -1), _signed((1, 4), dtype, -1))
    result = check_export(TensorPredicate(), pos, {"x": {0: B}, "y": {0: B}}, inline=inline, optimize=optimize,
                          inputs=[neg, one, (_signed((6, 4), dtype, 1), pos[1].repeat(2, 1))])
    assert count_ops(result, "If") == 1
    _branch_forms(result, inline)


class BoolOutputs(torch.nn.Module):
    def forward(self, x, flags):
        return torch.cond(flags.any(), lambda x, f: (x > 0) & f, lambda x, f: (x < 0) | f, (x, flags))


@pytest.mark.parametrize("inline", [False, True])
def test_cond_bool_operands_and_outputs(inline):
    B = Dim("B")
    x = torch.randn(4, 3)
    on, off = torch.rand(4, 3) > 0.5, torch.zeros(4, 3, dtype=torch.bool)
    on[0, 0] = True
    result = check_export(BoolOutputs(), (x, on), {"x": {0: B}, "flags": {0: B}}, inline=inline,
                          inputs=[(x, off), (torch.randn(1, 3), torch.zeros(1, 3, dtype=torch.bool))])
    assert result.model.graph.outputs[0].dtype == ir.DataType.BOOL


class SymBoolPredicate(torch.nn.Module):
    def forward(self, x):
        def true_fn(x):
            return x.sin() + x.shape[0]

        def false_fn(x):
            return x.cos() * 2

        return torch.cond(x.shape[0] > 4, true_fn, false_fn, (x,))


@pytest.mark.parametrize("inline,optimize", MODES)
def test_cond_symbool_predicate(inline, optimize):
    result = check_export(SymBoolPredicate(), (torch.randn(3, 5),), {"x": {0: Dim("B")}}, inline=inline,
                          optimize=optimize, sizes=[{"B": 1}, {"B": 5}, {"B": 9}],
                          expect_outputs={"output": ["B", 5]})
    assert count_ops(result, "If") == 1
    _branch_forms(result, inline)


class WithParameters(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("shift", torch.randn(4))

    def forward(self, x):
        return torch.cond(x.mean() > 0, lambda x: self.lin(x) + self.shift, lambda x: x - self.shift, (x,))


@pytest.mark.slow
@pytest.mark.parametrize("inline", [False, True])
def test_cond_branches_use_parameters(inline):
    x = torch.rand(3, 4) + 0.1
    check_export(WithParameters(), (x,), {"x": {0: Dim("B")}}, inline=inline,
                 inputs=[(-x,), (-torch.rand(7, 4) - 0.1,), (torch.rand(1, 4) + 0.1,)])


class Nested(torch.nn.Module):
    def forward(self, x, y):
        def inner_true(x, y):
            return x + y

        def inner_false(x, y):
            return x - y

        def outer_true(x, y):
            return torch.cond(y.sum() > 0, inner_true, inner_false, (x, y)) * 2

        def outer_false(x, y):
            return x * y

        return torch.cond(x.sum() > 0, outer_true, outer_false, (x, y))


@pytest.mark.slow
@pytest.mark.parametrize("inline,optimize", MODES)
def test_nested_cond(inline, optimize):
    B = Dim("B")
    a, b = torch.rand(3, 2) + 0.1, torch.rand(3, 2) + 0.1
    result = check_export(Nested(), (a, b), {"x": {0: B}, "y": {0: B}}, inline=inline, optimize=optimize,
                          inputs=[(a, -b), (-a[:1], b[:1]), (-a, -b), (torch.rand(5, 2), -torch.rand(5, 2))])
    assert count_ops(result, "If") == 2
    assert len(result.model.functions) == (0 if inline else 4)


class CondInScan(torch.nn.Module):
    """Per time step, a branch chosen by the data (tensor predicate) and one by a size (SymBool)."""

    def forward(self, x, h):
        def step(h, xt):
            h2 = torch.cond(xt.sum() > 0, lambda h, v: h + v, lambda h, v: h * 0.5 - v, (h, xt))
            h3 = torch.cond(h.shape[0] > 2, lambda h: h.clone(), lambda h: -h, (h2,))
            return h3, h3.sum(0, keepdim=True)

        return scan(step, h, x)


@pytest.mark.slow
@pytest.mark.parametrize("inline,optimize", MODES)
def test_cond_inside_scan(inline, optimize):
    T, B = Dim("T"), Dim("B")
    result = check_export(CondInScan(), (torch.randn(6, 3), torch.randn(3)), {"x": {0: T, 1: B}, "h": {0: B}},
                          inline=inline, optimize=optimize,
                          sizes=[{"T": 1, "B": 2}, {"T": 9, "B": 4}, {"T": 4, "B": 1}])
    assert count_ops(result, "Scan") == 1 and count_ops(result, "If") == 2


@pytest.mark.slow
def test_cond_same_branches_share_functions():
    def body(x):
        return x.abs() + 1

    class TwoConds(torch.nn.Module):
        def forward(self, x, y):
            a = torch.cond(x.sum() > 0, body, lambda x: x - 1, (x,))
            b = torch.cond(y.sum() > 0, body, lambda x: x - 1, (y,))
            return a, b

    B = Dim("B")
    x = torch.rand(3, 2)
    result = check_export(TwoConds(), (x, -x), {"x": {0: B}, "y": {0: B}}, inputs=[(-x, x)])
    assert count_ops(result, "If") == 2
    assert len(result.model.functions) == 2
    assert onnxport.translate.program.DOMAIN == "onnxport"


class AliasingBranch(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x, lambda x: x.cos(), (x,))


def test_branch_returning_its_operand_asks_for_clone():
    with pytest.raises(onnxport.errors.ControlFlowError) as info:
        onnxport.to_onnx(AliasingBranch(), (torch.randn(3, 4),))
    assert "torch.cond" in str(info.value) and ".clone()" in str(info.value)
    assert info.value.where is not None and "test_cond.py" in info.value.where and "torch.cond" in info.value.where


def test_subgraph_and_function_signatures_are_typed():
    """Every input and output of the If branches, the Scan body and the local functions has a dtype
    and a shape (the dims named after the user's dims where symbolic)."""
    result = onnxport.to_onnx(CondInScan(), (torch.randn(6, 3), torch.randn(3)),
                              dynamic_shapes={"x": {0: "T", 1: "B"}, "h": {0: "B"}})
    functions = [f.graph for f in result.model.functions.values()]
    graphs = [n.attributes[a].as_graph() for g in [result.model.graph] + functions
              for n in ir.traversal.RecursiveGraphIterator(g)
              for a in ("body", "then_branch", "else_branch") if a in n.attributes]
    assert len(graphs) == 1 + 2 * 2  # the Scan body, the branches of the two Ifs
    assert len(functions) == 1 + 4  # the scan body, the four branches
    graphs += functions
    for g in graphs:
        for v in list(g.inputs) + list(g.outputs):
            assert v.dtype is not None and v.shape is not None, (g.name, v)
            assert all(isinstance(d, int) or str(d) in ("B", "T") for d in v.shape), (g.name, v)


class MaskedFillInBranch(torch.nn.Module):
    """A branch writing a constant under a mask into a tensor it made: the fill value is a 0-d tensor
    constant of the branch's graph (a ``get_attr``), hashed and emitted as a Constant."""

    def forward(self, x):
        def masked(x):
            y = x * 2
            y[x > 0.5] = 0.25
            return y

        def shifted(x):
            return x - 1

        return torch.cond(x.sum() > 0, masked, shifted, (x,))


@pytest.mark.parametrize("inline", [True, False])
def test_cond_branch_with_a_tensor_constant(inline):
    result = check_export(MaskedFillInBranch(), (torch.rand(3, 4),), ({0: Dim("n")},), inline=inline,
                          inputs=[(torch.rand(5, 4),), (-torch.rand(2, 4),)])
    assert count_ops(result, "If") >= 1
