"""Grad-mode regions inside forward (``with torch.no_grad()``), which torch.export keeps as
wrap_with_set_grad_enabled bodies: translated in place (tests ops/control_flow.py)."""

import pytest
import torch

import onnxport

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


class AutocastRegion(torch.nn.Module):
    """A region under torch.autocast (timm's EfficientViT attention runs with autocast disabled)."""

    def __init__(self, device_type, enabled):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)
        self.device_type, self.enabled = device_type, enabled

    def forward(self, x):
        y = self.proj(x)
        with torch.autocast(device_type=self.device_type, enabled=self.enabled):
            attn = (y @ y.transpose(-1, -2)).softmax(-1).float()
        return attn @ y


@pytest.mark.parametrize("device_type,enabled", [("cpu", False), ("cuda", False), ("cuda", True)])
def test_autocast_region_that_changes_no_dtype_translates_in_place(device_type, enabled):
    r = check_export(AutocastRegion(device_type, enabled).eval(), (torch.randn(2, 5, 6),), {"x": {0: "b", 1: "t"}})
    assert {n.target for n in r.program.graph.nodes} & {torch.ops.higher_order.wrap_with_autocast}


def test_autocast_enabled_on_the_cpu_is_refused_with_the_users_line():
    with pytest.raises(onnxport.errors.UnsupportedOpError) as info:
        onnxport.to_onnx(AutocastRegion("cpu", True).eval(), (torch.randn(2, 5, 6),))
    assert "autocast" in info.value.what and "enabled=False" in info.value.hint
    assert info.value.where is not None and "test_grad_mode.py" in info.value.where
