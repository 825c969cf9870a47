"""A slice bound that may fall outside a dynamic axis is clamped, as PyTorch and ONNX Slice clamp it: no
guard, no relation between the declared dims, right on both sides of the bound."""

import numpy as np
import onnxruntime as ort
import torch
from torch.export import Dim

from tests.exportcheck import check_export


class CacheAndChunk(torch.nn.Module):
    """A streaming cache kept as the last 16 frames of cache + chunk."""

    def forward(self, chunk, cache):
        x = torch.cat([cache, chunk], 1)
        return (x * 2)[:, cache.shape[1]:], x[:, -16:]


class FirstSixteen(torch.nn.Module):
    def forward(self, x):
        return x[:, :16] * 3


def _run(result, *args):
    session = ort.InferenceSession(result.model_proto.SerializeToString())
    return session.run(None, {i.name: a.numpy() for i, a in zip(session.get_inputs(), args)})


def test_the_last_frames_of_a_cache_keep_every_declared_dim():
    b = Dim("batch")
    result = check_export(CacheAndChunk(), (torch.randn(2, 8, 4), torch.randn(2, 8, 4)),
                          ({0: b, 1: Dim("chunk", min=2)}, {0: b, 1: Dim.DYNAMIC}),
                          sizes=[{"batch": 3, "chunk": 4, "cache_dim1": 16},
                                 {"batch": 1, "chunk": 20, "cache_dim1": 3}])
    dims = {v.name: [str(d) for d in v.shape] for v in result.model.graph.inputs}
    assert dims["chunk"] == ["batch", "chunk", "4"] and result.constraints == []
    for chunk, cache in ((8, 0), (4, 16), (3, 5), (20, 3)):
        args = torch.randn(2, chunk, 4), torch.randn(2, cache, 4)
        for got, want in zip(_run(result, *args), CacheAndChunk()(*args)):
            assert got.shape == tuple(want.shape)
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-6)


def test_a_leading_bound_clamps_below_it():
    result = check_export(FirstSixteen(), (torch.randn(2, 20),), {"x": {1: "t"}},
                          sizes=[{"t": 5}, {"t": 16}, {"t": 40}])
    assert result.constraints == []  # t < 16 was validated above (t = 5)
    x = torch.randn(2, 7)
    assert _run(result, x)[0].shape == (2, 7)
