"""transformers' Mamba2 chunked scan with its padding cut at every length
(``onnxport.library.transformers.mamba2``): found in each module holding a copy, the same function as
transformers' at every length (chunks whole or padded), installed and restored by the registry."""

from __future__ import annotations

import importlib

import pytest
import torch

from onnxport.library.transformers.mamba2 import FUNCTION, UNCONDITIONAL_PADDING_CUT, unconditional_cut
from onnxport.capture.patches import installed

transformers = pytest.importorskip("transformers")

HOLDERS = ["mamba2", "bamba", "falcon_h1", "granitemoehybrid", "nemotron_h", "zamba2"]


@pytest.mark.parametrize("name", HOLDERS)
def test_each_copy_is_found_and_restored(name):
    module = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
    original = getattr(module, FUNCTION)
    assert unconditional_cut(original) is not None
    with installed(UNCONDITIONAL_PADDING_CUT):
        assert getattr(module, FUNCTION) is unconditional_cut(original)
    assert getattr(module, FUNCTION) is original


@pytest.mark.parametrize("seq", [1, 3, 4, 5, 8, 11])
def test_the_same_function_at_every_length(seq):
    from transformers.models.mamba2 import modeling_mamba2 as m

    gen = torch.Generator().manual_seed(seq)
    b, h, p, g, n = 2, 4, 3, 1, 5
    x, dt = torch.randn(b, seq, h, p, generator=gen), torch.randn(b, seq, h, generator=gen)
    big_b, c = torch.randn(b, seq, g, n, generator=gen), torch.randn(b, seq, g, n, generator=gen)
    a, d, bias = -torch.rand(h, generator=gen), torch.randn(h, generator=gen), torch.randn(h, generator=gen)
    kwargs = dict(chunk_size=4, D=d, dt_bias=bias, dt_softplus=True, return_final_states=True)
    want = m.mamba2_chunk_scan(x, dt, a, big_b, c, **kwargs)
    got = unconditional_cut(m.mamba2_chunk_scan)(x, dt, a, big_b, c, **kwargs)
    for w, o in zip(want, got):
        assert w.shape == o.shape and torch.equal(w, o)


def test_source_without_the_statement_is_left_alone():
    def mamba2_chunk_scan(x, pad_size=0):
        if pad_size > 0:
            x = x[:, :2]
        return x

    assert unconditional_cut(mamba2_chunk_scan) is None
