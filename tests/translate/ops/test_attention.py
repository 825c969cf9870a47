"""scaled_dot_product_attention (masks, causal, scale, grouped heads, fully masked rows),
its fused CPU form, nn.MultiheadAttention and the native multi-head attention fast path."""

import pytest
import torch
import torch.nn.functional as F

from exportcheck import check_export, count_ops

B, H, L, S, E = 2, 4, 5, 6, 8


class _Sdpa(torch.nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.kw = kw

    def forward(self, q, k, v, mask=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **self.kw)


def _qkv(dtype=torch.float32, hq=H, hkv=H, lq=L, s=S):
    return (torch.randn(B, hq, lq, E, dtype=dtype), torch.randn(B, hkv, s, E, dtype=dtype),
            torch.randn(B, hkv, s, E, dtype=dtype))


_QKV_DIMS = {"q": {0: "batch", 2: "tgt"}, "k": {0: "batch", 2: "src"}, "v": {0: "batch", 2: "src"}}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kw", [{}, {"scale": 0.3}], ids=["default_scale", "scale"])
def test_sdpa_no_mask(dtype, kw):
    r = check_export(_Sdpa(**kw), _qkv(dtype), _QKV_DIMS, expect_outputs={"output": ["batch", H, "tgt", E]})
    assert count_ops(r, "Softmax") == 1


def _fully_masked_bool(lq=L, s=S):
    m = torch.rand(lq, s) > 0.3
    m[1] = False  # query row 1 sees no key
    return m


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sdpa_bool_mask_with_fully_masked_row(dtype):
    q, k, v = _qkv(dtype)
    m = _fully_masked_bool()
    # PyTorch gives 0 on the fully masked row: compare on that example and on new sizes
    assert torch.equal(_Sdpa()(q, k, v, m)[:, :, 1], torch.zeros(B, H, E, dtype=dtype))
    other = (*_qkv(dtype, lq=3, s=9), _fully_masked_bool(3, 9))
    check_export(_Sdpa(), (q, k, v, m), _QKV_DIMS | {"mask": {0: "tgt", 1: "src"}}, inputs=[other])


def test_sdpa_float_mask_with_minus_inf_rows():
    q, k, v = _qkv()
    m = torch.randn(B, 1, L, S)
    m[:, :, 2] = float("-inf")  # fully masked row
    m[0, 0, 3, :2] = float("-inf")  # partly masked row
    assert not torch.isnan(_Sdpa()(q, k, v, m)).any()
    check_export(_Sdpa(), (q, k, v, m), _QKV_DIMS | {"mask": {0: "batch", 2: "tgt", 3: "src"}})


def test_sdpa_key_padding_bool_mask_broadcast():
    """A [B, 1, 1, S] key padding mask built from lengths in the model, one sequence empty."""

    class M(torch.nn.Module):
        def forward(self, q, k, v, lengths):
            keep = torch.arange(k.shape[2]).unsqueeze(0) < lengths.unsqueeze(1)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])

    q, k, v = _qkv()
    lengths = torch.tensor([S, 0])
    check_export(M(), (q, k, v, lengths), _QKV_DIMS | {"lengths": {0: "batch"}},
                 inputs=[(*_qkv(lq=2, s=4), torch.tensor([0, 3]))])


@pytest.mark.parametrize("lq,s", [(L, L), (L, S), (S, L)], ids=["square", "wide", "tall"])
def test_sdpa_causal(lq, s):
    args = _qkv(lq=lq, s=s)
    dims = _QKV_DIMS if lq != s else {"q": {0: "batch", 2: "t"}, "k": {0: "batch", 2: "t"}, "v": {0: "batch", 2: "t"}}
    check_export(_Sdpa(is_causal=True), args, dims)


@pytest.mark.parametrize("with_mask", [False, True, "causal"], ids=["no_mask", "bool_mask", "causal"])
def test_sdpa_grouped_query_heads(with_mask):
    q, k, v = _qkv(hq=8, hkv=2)
    args = (q, k, v) + ((_fully_masked_bool(),) if with_mask is True else ())
    dims = _QKV_DIMS | ({"mask": {0: "tgt", 1: "src"}} if with_mask is True else {})
    check_export(_Sdpa(enable_gqa=True, is_causal=with_mask == "causal"), args, dims)


def test_flash_attention_for_cpu_form():
    class M(torch.nn.Module):
        def forward(self, q, k, v):
            out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True)
            return out, lse

    check_export(M(), _qkv(s=L), {"q": {0: "batch", 2: "t"}, "k": {0: "batch", 2: "t"}, "v": {0: "batch", 2: "t"}})


class _Mha(torch.nn.Module):
    """nn.MultiheadAttention with a key padding mask built from lengths (no sequence fully masked)."""

    def __init__(self, need_weights):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(16, 4, batch_first=True)
        self.need_weights = need_weights

    def forward(self, x, lengths):
        pad = torch.arange(x.shape[1]).unsqueeze(0) >= lengths.unsqueeze(1)
        out, w = self.mha(x, x, x, key_padding_mask=pad, need_weights=self.need_weights)
        return (out, w) if self.need_weights else out


@pytest.mark.slow
@pytest.mark.parametrize("need_weights", [False, True], ids=["sdpa_path", "weights_path"])
def test_multihead_attention_key_padding(need_weights):
    x, lengths = torch.randn(3, 7, 16), torch.tensor([7, 2, 5])
    check_export(_Mha(need_weights), (x, lengths), {"x": {0: "batch", 1: "time"}, "lengths": {0: "batch"}})


@pytest.mark.parametrize("mask_kind", [None, "key_padding", "src"])
@pytest.mark.parametrize("average", [True, False], ids=["averaged", "per_head"])
def test_native_multi_head_attention(mask_kind, average):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = torch.nn.MultiheadAttention(16, 4, batch_first=True)

        def forward(self, x, lengths):
            t = x.shape[1]
            if mask_kind == "key_padding":
                mask, mtype = torch.arange(t).unsqueeze(0) >= lengths.unsqueeze(1), 1
            elif mask_kind == "src":
                mask, mtype = torch.ones(t, t, dtype=torch.bool).triu(1), 0
            else:
                mask, mtype = None, None
            m = self.mha
            return torch.ops.aten._native_multi_head_attention(
                x, x, x, 16, 4, m.in_proj_weight, m.in_proj_bias, m.out_proj.weight, m.out_proj.bias,
                mask, True, average, mtype)

    x, lengths = torch.randn(3, 7, 16), torch.tensor([7, 2, 5])
    check_export(M(), (x, lengths), {"x": {0: "batch", 1: "time"}, "lengths": {0: "batch"}})


@pytest.mark.slow
@pytest.mark.parametrize("case", ["no_mask", "bool_mask", "float_mask", "causal", "causal_wide", "causal_tall",
                                  "gqa_scale"])
def test_sdpa_opset23_attention_op(case):
    """From opset 23 scaled_dot_product_attention is one ONNX Attention node, same results."""
    q, k, v = {"gqa_scale": _qkv(hq=8, hkv=2), "causal": _qkv(s=L), "causal_tall": _qkv(lq=S, s=L)}.get(case) or _qkv()
    args, dims = (q, k, v), dict(_QKV_DIMS)
    kw = {}
    if case.startswith("causal"):
        kw = {"is_causal": True}
    elif case == "gqa_scale":
        kw = {"enable_gqa": True, "scale": 0.2}
    if case == "causal":
        dims = {"q": {0: "batch", 2: "t"}, "k": {0: "batch", 2: "t"}, "v": {0: "batch", 2: "t"}}
    if case == "bool_mask":
        args, dims = args + (_fully_masked_bool(),), dims | {"mask": {0: "tgt", 1: "src"}}
    if case == "float_mask":
        m = torch.randn(B, 1, L, S)
        m[:, :, 2] = float("-inf")
        args, dims = args + (m,), dims | {"mask": {0: "batch", 2: "tgt", 3: "src"}}
    r = check_export(_Sdpa(**kw), args, dims, opset=23)
    assert count_ops(r, "Attention") == 1 and count_ops(r, "Softmax") == 0


@pytest.mark.parametrize("need_weights", [False, True], ids=["sdpa_path", "weights_path"])
def test_multihead_attention_all_keys_masked_follows_captured_path(need_weights):
    """A sequence whose every key is padding: the captured (slow) path gives 0 through SDPA and NaN
    through the explicit softmax; eager's native fast path (eval, no grad) gives NaN for both. The
    ONNX model follows the captured graph."""
    import numpy as np

    from onnxport.verify import OrtRunner

    model = _Mha(need_weights).eval()
    x, lengths = torch.randn(2, 5, 16), torch.tensor([5, 0])
    r = check_export(model, (x, torch.tensor([5, 3])), {"x": {0: "batch", 1: "time"}, "lengths": {0: "batch"}})
    got = OrtRunner(r.model_proto).run([x, lengths])[0]
    with torch.enable_grad():
        expected = model(x, lengths)
    expected = (expected[0] if need_weights else expected).detach().numpy()
    np.testing.assert_allclose(got, expected, atol=1e-5, equal_nan=True)
    assert np.isnan(got[1]).all() == need_weights
