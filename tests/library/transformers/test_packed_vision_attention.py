"""The per-piece attention forms ``packed_vision_attention`` replaces (transformers' packed vision
towers), run in eager PyTorch before and after the replacement: the one attention under the block mask
gives the pieces' outputs; where the pieces' own mask is given, or their weights are computed, the
original statements run."""

from __future__ import annotations

import ast
import textwrap

import pytest
import torch

from onnxport.library.transformers.packed_vision_attention import _one_masked_attention

LIST_THEN_CAT = """
def forward(self, q, k, v, cu_seqlens, attention_mask=None, **kwargs):
    lengths = cu_seqlens[1:] - cu_seqlens[:-1]
    splits = [torch.split(tensor, lengths.tolist(), dim=2) for tensor in (q, k, v)]
    outs = [attend(self, a, b, c, attention_mask=None, **kwargs)[0] for a, b, c in zip(*splits)]
    out = torch.cat(outs, dim=1)
    return out, None
"""
KWARGS_MASK = """
def forward(self, q, k, v, cu_seqlens, attention_mask=None, **kwargs):
    lengths = cu_seqlens[1:] - cu_seqlens[:-1]
    splits = [torch.split(tensor, lengths.tolist(), dim=2) for tensor in (q, k, v)]
    outs = [attend(self, a, b, c, scale=1.0, **kwargs)[0] for a, b, c in zip(*splits)]
    out = torch.cat(outs, dim=1)
    return out, None
"""
LOOP_WITH_WEIGHTS = """
def forward(self, q, k, v, cu_seqlens, attention_mask=None, **kwargs):
    lengths = cu_seqlens[1:] - cu_seqlens[:-1]
    splits = [torch.split(tensor, lengths.tolist(), dim=2) for tensor in (q, k, v)]
    outs, weights = [], []
    for a, b, c in zip(*splits):
        out, weight = attend(self, a, b, c, attention_mask=attention_mask, **kwargs)
        outs.append(out)
        weights.append(weight)
    out = torch.cat(outs, dim=1)
    return out, None if weights[0] is None else tuple(weights)
"""


CALLS = []


def attend(module, q, k, v, attention_mask=None, scale=1.0, weights=False):
    """transformers' eager attention in small: ``[batch, heads, n, d]`` in, ``([batch, n, heads, d], weights)``."""
    CALLS.append(q.shape[2])
    scores = q @ k.transpose(-1, -2) * scale
    if attention_mask is not None:
        scores = scores + attention_mask
    probs = scores.softmax(-1)
    return (probs @ v).transpose(1, 2), (probs if weights else None)


def _functions(source: str):
    tree = ast.parse(textwrap.dedent(source))
    changed = _one_masked_attention(tree.body[0])
    scope = {"torch": torch, "attend": attend}
    exec(compile(source, "<original>", "exec"), scope)
    original = scope["forward"]
    exec(compile(ast.fix_missing_locations(tree), "<replaced>", "exec"), scope)
    return changed, original, scope["forward"]


def _inputs():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 10, 4, generator=g) for _ in range(3))
    return q, k, v, torch.tensor([0, 3, 7, 10])


@pytest.mark.parametrize("source", [LIST_THEN_CAT, KWARGS_MASK, LOOP_WITH_WEIGHTS])
def test_one_masked_attention_gives_the_pieces_outputs(source):
    changed, original, replaced = _functions(source)
    assert changed
    CALLS.clear()
    expected = original(None, *_inputs())
    assert CALLS == [3, 4, 3]
    CALLS.clear()
    got = replaced(None, *_inputs())
    assert CALLS == [10]  # one attention over the whole sequence
    assert got[1] is None and expected[1] is None
    torch.testing.assert_close(got[0], expected[0])


def test_a_mask_passed_in_kwargs_keeps_the_pieces():
    # the mask kwargs carry is the pieces' own: the original statements run with it
    _, original, replaced = _functions(KWARGS_MASK)
    bias = torch.randn(1, 1, 1, 3)  # broadcast to every piece's scores of 3 keys
    q, k, v, _ = _inputs()
    cu = torch.tensor([0, 3, 6, 9])
    expected = original(None, q[:, :, :9], k[:, :, :9], v[:, :, :9], cu, attention_mask=bias)
    got = replaced(None, q[:, :, :9], k[:, :, :9], v[:, :, :9], cu, attention_mask=bias)
    torch.testing.assert_close(got[0], expected[0])


def test_the_loop_keeps_the_pieces_where_their_weights_are_computed():
    # one attention's weights are not the pieces' list: with weights (eager attention) the loop runs
    _, original, replaced = _functions(LOOP_WITH_WEIGHTS)
    expected, got = original(None, *_inputs(), weights=True), replaced(None, *_inputs(), weights=True)
    assert len(got[1]) == len(expected[1]) == 3
    for a, b in zip(got[1], expected[1]):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(got[0], expected[0])


def test_a_given_mask_keeps_the_loop():
    _, original, replaced = _functions(LOOP_WITH_WEIGHTS)
    bias = torch.zeros(1, 1, 1, 1)
    torch.testing.assert_close(replaced(None, *_inputs(), attention_mask=bias)[0],
                               original(None, *_inputs(), attention_mask=bias)[0])
