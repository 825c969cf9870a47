"""``torch.div(size, n, rounding_mode=...)`` in transformers' code captured as a symbolic size
(``onnxport.library.transformers.size_division``): a view whose size is such a quotient exports with its axis
dynamic and matches eager PyTorch at other sizes; the same call elsewhere runs as before."""

from __future__ import annotations

import pytest
import torch

from exportcheck import check_export
from onnxport.capture.patches import installed
from onnxport.library.transformers.size_division import SYMBOLIC_SIZE_DIVISION, symbolic_quotient

# a function defined in a module named like transformers' (its globals' __name__), as Longformer's _chunk is
_LIBRARY: dict = {"__name__": "transformers.models.example.modeling_example", "torch": torch}
exec(  # noqa: S102 - a library function for the test
    "def chunk(x, window):\n"
    "    return x.view(x.size(0), torch.div(x.size(1), window, rounding_mode='trunc'), window, x.size(2))\n",
    _LIBRARY)


class Chunks(torch.nn.Module):
    def forward(self, x):
        chunks = _LIBRARY["chunk"](x, 4)
        return chunks.sum(2) * chunks.shape[1]


@pytest.mark.slow
def test_a_view_by_a_quotient_of_sizes_stays_dynamic():
    with pytest.warns(UserWarning, match="onnxport adopted this constraint for seq"):  # whole chunks only
        result = check_export(Chunks(), (torch.randn(2, 12, 3),), {"x": {0: "batch", 1: "seq"}},
                              sizes=[{"batch": 1, "seq": 4}, {"batch": 3, "seq": 40}], values=[],
                              expect_outputs={"output": ["batch", "(seq//4)", 3]})
    adopted = [g for g in result.guards if g.adopted]
    assert all(g.holds({"batch": 2, "seq": s}) for g in adopted for s in (4, 8, 12, 400))  # multiples of 4 stay
    assert not all(g.holds({"batch": 2, "seq": 10}) for g in adopted)


@pytest.mark.parametrize("a, b, mode, want", [(13, 4, "floor", 3), (13, 4, "trunc", 3), (13, 4, None, None),
                                              (13.0, 4, "floor", None)])
def test_integers_divide_as_python_does(a, b, mode, want):
    assert symbolic_quotient(a, b, mode) == want


def test_other_calls_run_torch_div():
    with installed(SYMBOLIC_SIZE_DIVISION):
        assert torch.equal(torch.div(torch.tensor([7, -7]), 2, rounding_mode="trunc"), torch.tensor([3, -3]))
        assert torch.equal(torch.div(7, 2, rounding_mode="floor"), torch.tensor(3))
    assert not hasattr(torch.div, "__onnxport_original__")
