"""A branch on a size inside a ``torch.cond`` side is the user's branch.

torch's compiler traces a ``torch.cond`` side by interpreting its bytecode: no frame of the side's code runs,
and the condition's assert comes later, from the graph it made. The capture takes the ``if`` from the
interpreter (``capture/guards/record.py``: ``_interpreted_branch``), for the user's own ``torch.cond`` and
for the one the rewrite makes of an ``if`` on a size. Taken for torch's own ``w % 4 != 1``, the other
residue class was left to validation: wrong at every ``w % 4 == 1`` above 8.
"""

import pytest
import torch
from torch.export import Dim

import onnxport
from exportcheck import assert_right_at_widths


def _big(x):
    if x.shape[1] % 4 == 1:
        return x * 3
    return x * 2


def _small(x):
    return x + 1


class UserCond(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.shape[1] > 8, _big, _small, (x,))


class RewrittenCond(torch.nn.Module):
    """The rewrite makes ``if w > 8`` a torch.cond, the inner ``if`` one of its sides' branches."""

    def forward(self, x):
        w = x.shape[1]
        if w > 8:
            if w % 4 == 1:
                return x * 3
            return x * 2
        return x + 1


@pytest.mark.parametrize("model", [UserCond(), RewrittenCond()], ids=["user-cond", "rewritten-if"])
def test_a_remainder_branch_in_a_cond_side_is_right_at_every_size(model):
    result = onnxport.to_onnx(model, (torch.randn(2, 16),), dynamic_shapes={"x": {1: Dim("w")}})
    assert_right_at_widths(result, model, range(1, 40))
