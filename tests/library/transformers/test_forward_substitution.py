"""The row-by-row forward substitution of the chunked delta rules (``forward_substitution``): the
variant of transformers' own functions against the functions as they are, in eager PyTorch; the
form's general case (a matrix not zeroed above its diagonal) in float64; the loop kept where the
matrix is not the loop's size; and the models' export in ``tests/models/test_hf_gated_delta.py``
and ``test_hf_delta_rules.py``."""

from __future__ import annotations

import ast
import textwrap

import pytest
import torch

from onnxport.capture.source_variants import source_variant
from onnxport.library.transformers.forward_substitution import blocked_inverse

transformers = pytest.importorskip("transformers")


def _inputs(heads_k, heads_v, seq, dk, dv, per_head_decay, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(2, seq, heads_k, dk, generator=g) for _ in range(2))
    v = torch.randn(2, seq, heads_v, dv, generator=g)
    decay = -torch.rand(2, seq, heads_v, *([dk] if per_head_decay else []), generator=g) * 0.1
    beta = torch.rand(2, seq, heads_v, generator=g)
    return q, k, v, decay, beta


@pytest.mark.parametrize("module, name, per_head_decay", [
    ("qwen3_next", "torch_chunk_gated_delta_rule", False),
    ("kimi_linear", "chunk_kimi_delta_attention", True),
])
@pytest.mark.parametrize("seq", [7, 64, 130])
def test_variant_of_transformers_delta_rule_matches_its_loop(module, name, per_head_decay, seq, monkeypatch):
    modeling = pytest.importorskip(f"transformers.models.{module}.modeling_{module}")
    original = getattr(modeling, name)
    variant = source_variant(original, blocked_inverse)
    assert variant is not None
    # Qwen3-Next runs the loop only while exporting (torch.linalg.solve_triangular otherwise)
    monkeypatch.setattr(modeling, "is_torchdynamo_exporting", lambda: True, raising=False)
    args = _inputs(2, 2, seq, 8, 8, per_head_decay)
    kwargs = {"output_final_state": True, "use_qk_l2norm_in_kernel": True}
    expected, got = original(*args, **kwargs), variant(*args, **kwargs)
    for e, o in zip(expected, got):
        torch.testing.assert_close(o, e, rtol=1e-5, atol=1e-5)


LOOPS = {
    "not zeroed": """
def f(attn, chunk_size):
    for i in range(1, chunk_size):
        row = attn[..., i, :i].clone()
        sub = attn[..., :i, :i].clone()
        attn[..., i, :i] = row + (row.unsqueeze(-1) * sub).sum(-2)
    return attn
""",
    "tril": """
def f(attn, chunk_size):
    attn = -attn.tril(-1)
    for i in range(1, chunk_size):
        row = attn[..., i, :i].clone()
        sub = attn[..., :i, :i].clone()
        attn[..., i, :i] = row + (row.unsqueeze(-1) * sub).sum(-2)
    return attn
""",
    "masked": """
def f(attn, chunk_size):
    mask = torch.triu(torch.ones(chunk_size, chunk_size, dtype=torch.bool), diagonal=0)
    attn = -(attn * 2).masked_fill(mask, 0)
    for i in range(1, chunk_size):
        row = attn[..., i, :i].clone()
        sub = attn[..., :i, :i].clone()
        attn[..., i, :i] = row + (row.unsqueeze(-1) * sub).sum(-2)
    return attn
""",
}


def _both(source):
    tree = ast.parse(textwrap.dedent(source))
    assert blocked_inverse(tree.body[0])
    scope = {"torch": torch}
    exec(compile(source, "<loop>", "exec"), scope)
    original = scope["f"]
    exec(compile(ast.fix_missing_locations(tree), "<variant>", "exec"), scope)
    return original, scope["f"], ast.unparse(tree)


@pytest.mark.parametrize("form", sorted(LOOPS))
@pytest.mark.parametrize("n", [1, 2, 5, 17, 64])
def test_the_form_leaves_what_the_loop_leaves(form, n):
    original, variant, text = _both(LOOPS[form])
    assert ("upper_zero=True" in text) == (form != "not zeroed")  # the zeroed upper triangle is read from the code
    a = torch.randn(2, 3, n, n, dtype=torch.float64, generator=torch.Generator().manual_seed(n)) * 0.3
    torch.testing.assert_close(variant(a.clone(), n), original(a.clone(), n), rtol=1e-9, atol=1e-9)


def test_the_loop_is_kept_where_the_matrix_is_not_its_size():
    original, variant, _ = _both(LOOPS["not zeroed"])
    a = torch.randn(2, 9, 9, dtype=torch.float64)
    torch.testing.assert_close(variant(a.clone(), 6), original(a.clone(), 6))
