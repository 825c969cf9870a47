"""An installed package's branch on a remainder written with bitwise operators, or by another size.

``if (w & 3) == 1:`` traced at ``w = 16`` leaves torch ``(w & 3) != 1``, its kind of "these sizes differ"
condition, which the capture keeps where an installed package branched on it (``Guard.branched``). It holds
on whole residue classes modulo 4 (``residues.divisors``: a mask ``m`` keeps the low bits of ``m``'s length),
so each class is exported and the graphs joined under ONNX ``If``. A remainder by another size
(``w % h == 1``) has no classes to list: it is adopted and stated, never kept unlooked-at.
"""

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

import onnxport
from exportcheck import assert_right_at_widths, import_source

SOURCE = '''
import torch


class MaskAnd(torch.nn.Module):
    def forward(self, x):
        w = x.shape[1]
        if (w & 3) == 1:
            return x * 2
        return x + 1


class MaskOr(torch.nn.Module):
    def forward(self, x):
        w = x.shape[1]
        if (w | 1) == w:
            return x * 2
        return x + 1


class MaskOfFloor(torch.nn.Module):
    def forward(self, x):
        w = x.shape[1]
        if ((w // 4) & 1) == 1:
            return x * 2
        return x + 1


class ByOtherSize(torch.nn.Module):
    def forward(self, x):
        h, w = x.shape
        if w % h == 1:
            return x * 2
        return x + 1
'''


@pytest.fixture
def package(tmp_path, monkeypatch):
    return import_source(tmp_path, monkeypatch, "bitwise_remainder_pkg", SOURCE)


@pytest.mark.parametrize("name", ["MaskAnd", "MaskOr", "MaskOfFloor"])
def test_a_package_branch_on_a_bitwise_mask_is_right_at_every_size(package, name):
    model = getattr(package, name)()
    result = onnxport.to_onnx(model, (torch.randn(2, 16),), dynamic_shapes={"x": {1: Dim("w")}})
    assert not result.constraints, result.constraints
    assert_right_at_widths(result, model, range(1, 34))


def test_a_package_branch_on_a_remainder_by_another_size_is_stated(package):
    """``w % h != 1`` holds on no listable residue classes: adopted and stated, and right where it holds."""
    model = package.ByOtherSize()
    with pytest.warns(UserWarning, match=r"holds for \(w % h\) != 1 only"):
        result = onnxport.to_onnx(model, (torch.randn(4, 16),), dynamic_shapes={"x": {0: Dim("h"), 1: Dim("w")}})
    (constraint,) = result.constraints
    assert not constraint.holds({"h": 4, "w": 17}) and constraint.holds({"h": 4, "w": 18})
    session = ort.InferenceSession(result.model_proto.SerializeToString())
    compared = 0
    for h in (3, 4, 5):
        for w in range(2, 20):
            if not constraint.holds({"h": h, "w": w}):
                continue
            x = torch.randn(h, w)
            np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0], model(x).numpy(), rtol=1e-6, atol=1e-6)
            compared += 1
    assert compared > 40
