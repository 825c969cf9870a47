"""A declared dim torch.export's trace turns into an expression of other declared dims is never gone
silently: the equality is decided as any condition the trace states (here refused for an explicit range)."""

import pytest
import torch
from torch.export import Dim

import onnxport
import onnxport.capture.clamped_slices as clamped_slices
import onnxport.capture.layout_metadata as layout_metadata


class CacheAndChunk(torch.nn.Module):
    def forward(self, chunk, cache):
        x = torch.cat([cache, chunk], 1)
        return (x * 2)[:, cache.shape[1]:], x[:, -16:]


def _as_torch_does(original):
    return lambda *args, **kwargs: original(*args, **kwargs)


def test_a_dim_torch_made_a_relation_of_others_is_refused_for_an_explicit_range(monkeypatch):
    # without the two patches that keep this model's dims apart, torch's trace makes chunk = 16 - cache
    # (the example's cache + chunk is 16, and a contiguity question is decided from it)
    monkeypatch.setattr(layout_metadata, "_unguarded", _as_torch_does)
    monkeypatch.setattr(clamped_slices, "_clamped", _as_torch_does)
    b = Dim("batch")
    with pytest.raises(onnxport.DynamicShapesError) as info:
        onnxport.to_onnx(CacheAndChunk(), (torch.randn(2, 8, 4), torch.randn(2, 8, 4)),
                         dynamic_shapes=({0: b, 1: Dim("chunk", min=2)}, {0: b, 1: Dim.DYNAMIC}))
    text = str(info.value)
    assert "the model requires chunk == " in text and "cache_dim1" in text
    assert "made this dim an expression of the others" in text
