"""transformers' ``torch_int`` / ``torch_float`` of a symbolic size keep it symbolic while traced
(``onnxport.library.transformers.size_forms``): an image cut to whole patches exports with its height dynamic and
matches eager PyTorch at other heights, each module holding the helpers patched, none left patched."""

from __future__ import annotations

import pytest
import torch

from exportcheck import check_export

transformers = pytest.importorskip("transformers")
from transformers.models.imagegpt import modeling_imagegpt as float_holder  # noqa: E402 - holds torch_float
from transformers.models.layoutlmv3 import modeling_layoutlmv3 as holder  # noqa: E402 - holds torch_int


class WholePatches(torch.nn.Module):
    """Rows cut to a whole number of 8-row patches, counted as transformers' models count them."""

    def forward(self, x):
        patches = holder.torch_int(x.shape[1] / 8)
        scale = float_holder.torch_float(x.shape[1])
        return x[:, : patches * 8].reshape(x.shape[0], patches, 8 * x.shape[2]).sum(-1) / scale


def test_torch_int_of_a_size_stays_symbolic():
    result = check_export(WholePatches(), (torch.randn(2, 37, 3),), {"x": {1: "rows"}},
                          sizes=[{"rows": 8}, {"rows": 15}, {"rows": 64}, {"rows": 71}], values=[])
    assert not result.constraints
    assert holder.torch_int is transformers.utils.generic.torch_int  # restored after capture
    assert float_holder.torch_float is transformers.utils.generic.torch_float


class CountsRows(torch.nn.Module):
    """``len`` of a tensor in a transformers module's code (as RT-DETR's ``batch_size = len(source_flatten)``):
    the function below runs with the module's globals, so ``len`` resolves as it does in transformers' code."""

    def __init__(self):
        super().__init__()
        self.rows = eval(compile("lambda x: torch.ones(len(x), 1) * len(x) + x.sum(-1, keepdim=True)",  # noqa: S307
                                 holder.__file__, "eval"), vars(holder))

    def forward(self, x):
        return self.rows(x)


def test_len_of_a_tensor_keeps_a_dynamic_batch():
    result = check_export(CountsRows(), (torch.randn(3, 4),), {"x": {0: "batch"}},
                          sizes=[{"batch": 1}, {"batch": 2}, {"batch": 9}], values=[])
    assert not result.constraints
    assert "len" not in vars(holder)  # restored after capture
