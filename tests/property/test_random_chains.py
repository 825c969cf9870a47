"""Property: random chains of supported ops, random shapes, dtypes and dynamic axes, export and
match eager PyTorch at the example and at other sizes.

``ONNXPORT_EXAMPLES`` sets the number of examples (default 300). Chains that once failed are kept
below as ``@example`` cases.
"""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import onnxport
from exportcheck import check_export

EXAMPLES = int(os.environ.get("ONNXPORT_EXAMPLES", "300"))

# each op: name -> (applies to dtype kinds, function(x) keeping the rank)
UNARY = {
    "relu": lambda x: torch.relu(x),
    "tanh": lambda x: torch.tanh(x),
    "sigmoid": lambda x: torch.sigmoid(x),
    "abs": lambda x: torch.abs(x),
    "neg": lambda x: -x,
    "exp_clamped": lambda x: torch.exp(torch.clamp(x, -5, 5)),
    "square": lambda x: x * x,
    "add_scalar": lambda x: x + 3,
    "mul_scalar": lambda x: x * 2,
    "sub_self_flip": lambda x: x - x.flip(-1),
    "cumsum_last": lambda x: torch.cumsum(x, -1),
    "softmax_last": lambda x: torch.softmax(x, -1),
    "sum_keep_last": lambda x: x.sum(-1, keepdim=True) + x,
    "mean_keep_first": lambda x: x.mean(0, keepdim=True) - x,
    "max_keep_last": lambda x: x.amax(-1, keepdim=True) * x,
    "transpose_back": lambda x: x.transpose(0, -1).contiguous().transpose(0, -1),
    "cat_self_last": lambda x: torch.cat([x, x * 2], dim=-1),
    "unsqueeze_squeeze": lambda x: x.unsqueeze(1).squeeze(1),
    "where_pos": lambda x: torch.where(x > 0, x, x * 0.5),
    "reshape_flat_back": lambda x: x.reshape(-1).reshape(x.shape),
    "slice_from_1": lambda x: x[..., 1:],
    "pad_last": lambda x: torch.nn.functional.pad(x, (1, 2)),
}
INT_OK = {"relu", "abs", "neg", "square", "add_scalar", "mul_scalar", "sub_self_flip", "cumsum_last",
          "sum_keep_last", "max_keep_last", "transpose_back", "cat_self_last", "unsqueeze_squeeze",
          "reshape_flat_back", "slice_from_1", "pad_last"}


class Chain(torch.nn.Module):
    def __init__(self, names):
        super().__init__()
        self.names = list(names)

    def forward(self, x):
        for n in self.names:
            x = UNARY[n](x)
        return x


@st.composite
def chains(draw):
    rank = draw(st.integers(1, 3))
    # sizes from 3: slicing one element off then leaves 2 or more (torch.export pins a dynamic
    # size whose intermediate becomes 1; that case is a regular test below)
    shape = tuple(draw(st.integers(3, 6)) for _ in range(rank))
    dtype = draw(st.sampled_from(["float32", "int64"]))
    pool = sorted(UNARY) if dtype == "float32" else sorted(INT_OK)
    names = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=5))
    dynamic = draw(st.lists(st.booleans(), min_size=rank, max_size=rank))
    return shape, dtype, names, dynamic


def _run(shape, dtype, names, dynamic):
    torch.manual_seed(0)
    if dtype == "float32":
        x = torch.randn(*shape)
    else:
        x = torch.randint(-20, 20, shape)
    spec = {"x": {i: f"d{i}" for i, d in enumerate(dynamic) if d}} or None
    try:
        check_export(Chain(names), (x,), spec)
    except (onnxport.SpecializationError, onnxport.DynamicShapesError) as e:
        # torch.export's own range reasoning may refuse a dynamic size (a guard such as
        # "(d2 - 1) != 1"): acceptable only as a clear error naming the dimension, with a fix
        assert any(f"d{i}" in str(e) for i in range(len(shape))) and e.hint, str(e)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(chains())
@example(((3, 3), "float32", ["slice_from_1", "cat_self_last"], [True, True]))
@example(((3,), "int64", ["cumsum_last", "sub_self_flip"], [True]))
# x[..., 1:][..., 1:] on a named dynamic last axis with a static axis before it: torch failed
# formatting its own guard (8/3 <= d1); the export now adopts d1 >= 3 whatever the sizes drawn
@example(((3, 4), "float32", ["slice_from_1", "slice_from_1"], [False, True]))
@example(((4, 6), "int64", ["slice_from_1", "slice_from_1", "abs"], [False, True]))
@example(((3, 3, 4), "float32", ["slice_from_1", "slice_from_1", "cat_self_last"], [False, False, True]))
def test_random_chain_matches_eager(case):
    _run(*case)


@pytest.mark.parametrize("names", [["abs", "slice_from_1", "abs", "transpose_back", "abs"],
                                   ["slice_from_1", "transpose_back"]])
def test_size_one_intermediate_is_exported_or_refused_clearly(names):
    """Found by the property test: an example size of 2 sliced to 1 then made contiguous makes
    torch.export pin the dimension. The export either works or says which dim and why."""
    x = torch.randint(-20, 20, (2, 2, 5))
    try:
        check_export(Chain(names), (x,), {"x": {2: "d2"}})
    except onnxport.ExportError as e:
        assert isinstance(e, (onnxport.SpecializationError, onnxport.DynamicShapesError))
        assert "d2" in str(e) and e.hint


@pytest.mark.parametrize("shape", [(3, 4), (4, 6), (2, 5), (3, 3, 4)])
def test_slicing_a_dynamic_last_axis_twice_adopts_its_minimum(shape):
    """Found by the property test on some draws: the export adopts the size the two slices need."""
    x = torch.randn(*shape)
    result = check_export(Chain(["slice_from_1", "slice_from_1"]), (x,), {"x": {len(shape) - 1: "d"}})
    assert [str(c) for c in result.constraints] in ([], ["d >= 3"])
