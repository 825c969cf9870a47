"""Grad-mode regions inside forward (``with torch.no_grad()``), which torch.export keeps as
wrap_with_set_grad_enabled bodies: translated in place (tests ops/control_flow.py)."""

import torch

from exportcheck import check_export


class NoGradRegion(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)

    def forward(self, x):
        y = self.proj(x)
        with torch.no_grad():
            scale = y.abs().amax(-1, keepdim=True) + 1
        with torch.no_grad():  # a second region with the same body
            shift = y.abs().amax(-1, keepdim=True) + 1
        return y / scale - shift


def test_no_grad_regions_translate_in_place():
    r = check_export(NoGradRegion().eval(), (torch.randn(3, 6),), {"x": {0: "b"}})
    assert not r.model.functions


def test_a_region_returning_its_input_and_a_size():
    class M(torch.nn.Module):
        def forward(self, x):
            with torch.no_grad():
                y = x.sin()
                n = x.shape[0] * 2
            return y + n, x

    check_export(M(), (torch.randn(4, 3),), {"x": {0: "b"}})
