"""Attention: scaled_dot_product_attention, its fused CPU forms, and the native multi-head attention.

Semantics: ``torch.nn.functional.scaled_dot_product_attention`` (PyTorch docs)::

    scores = q @ k^T * scale (+ float mask, or -inf where a bool mask is False or above the causal
             diagonal);  out = softmax(scores, -1) @ v

built from ONNX MatMul, Softmax and Where (opset 18+), or one ONNX ``Attention`` node from opset 23
for 4-D inputs (same semantics: boolean masks keep True, float masks add, top-left causal without
a KV cache, grouped heads, fully masked rows give 0). Details matched to PyTorch 2.13 eager:

- ``is_causal=True`` is the top-left aligned lower-triangular mask (query i sees keys j <= i).
- A bool mask keeps the positions where it is True; a float mask is added to the scores.
- A query row whose every key is masked (bool mask all False, float mask all -inf, or both) gives
  0 in PyTorch's kernels (not NaN): with a mask, the probabilities softmax leaves NaN are replaced
  by 0 (a NaN among the inputs gives 0 on its rows too, where PyTorch gives NaN).

The masks are written in the form onnxruntime's fusion tools (onnxscript's ``ort_fusions``, the
transformers optimizer) read as attention: a bool or causal mask becomes an additive bias
``Where(mask, 0, -inf)`` on the mask's shape, added to the scores, and fully masked rows are
cleared with ``Where(IsNaN(probs), 0, probs)``.
- ``enable_gqa=True`` with ``Hq = g * Hkv`` query heads repeats each key/value head ``g`` times
  (``repeat_interleave`` on the head axis), as PyTorch does.

``torch.export`` keeps ``aten.scaled_dot_product_attention.default`` (a preserved composite op).
``nn.MultiheadAttention`` is captured as its slow path (linear projections and
``scaled_dot_product_attention``, or ``baddbmm`` + ``softmax`` when ``need_weights=True``) even in
eval mode without grad: the fast path ``aten._native_multi_head_attention`` only appears in graphs
that call it explicitly, and is translated here too. One visible consequence: for a sequence whose
every key is padding, eager PyTorch's fast path (eval, no grad) gives NaN while the captured slow
path gives 0 with ``need_weights=False`` (SDPA) and NaN with ``need_weights=True`` (softmax); the
ONNX model follows the captured graph.
"""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate.registry import translates

aten = torch.ops.aten
BOOL = ir.DataType.BOOL
INT64 = ir.DataType.INT64


def _swap_last(ctx, x: ir.Value, rank: int) -> ir.Value:
    perm = list(range(rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return ctx.op.Transpose(x, perm=perm)


def _repeat_heads(ctx, x: ir.Value, groups) -> ir.Value:
    """``x.repeat_interleave(groups, dim=-3)`` for x[..., H, S, E] (groups: int or 0-d int64)."""
    rank = ctx.rank(x)
    head_axis = rank - 3
    unsq = ctx.op.Unsqueeze(x, ctx.const(np.array([head_axis + 1], dtype=np.int64)))
    target = [1] * (rank + 1)
    target[head_axis + 1] = groups
    expanded = ctx.op.Expand(unsq, ctx.shape_list(target))
    lead = ctx.op.Shape(x, start=0, end=head_axis) if head_axis else None
    heads = ctx.op.Mul(ctx.op.Shape(x, start=head_axis, end=head_axis + 1), ctx.shape_list([groups]))
    tail = ctx.op.Shape(x, start=head_axis + 1)
    shape = ctx.op.Concat(*[p for p in (lead, heads, tail) if p is not None], axis=0)
    return ctx.op.Reshape(expanded, shape)


def _causal_allowed(ctx, q: ir.Value, k: ir.Value) -> ir.Value:
    """bool[L, S]: key j visible from query i when j <= i (top-left aligned, as PyTorch)."""
    zero, one = ctx.scalar(0, INT64), ctx.scalar(1, INT64)
    rows = ctx.op.Range(zero, ctx.dim(q, -2), one)
    cols = ctx.op.Range(zero, ctx.dim(k, -2), one)
    return ctx.op.LessOrEqual(ctx.op.Unsqueeze(cols, ctx.const(np.array([0], dtype=np.int64))),
                              ctx.op.Unsqueeze(rows, ctx.const(np.array([1], dtype=np.int64))))


def _scale_value(ctx, q: ir.Value, scale, to: ir.DataType) -> ir.Value:
    if scale is not None:
        return ctx.scalar(float(scale), to)
    e = q.shape[-1] if q.shape is not None else None
    if isinstance(e, int):
        return ctx.scalar(1.0 / math.sqrt(e), to)
    return ctx.op.Reciprocal(ctx.op.Sqrt(ctx.cast(ctx.dim(q, -1), to)))


def attention(ctx, q, k, v, attn_mask=None, is_causal=False, scale=None, enable_gqa=False,
              dropout_p=0.0) -> tuple[ir.Value, ir.Value, ir.Value]:
    """Scaled dot-product attention; returns ``(output, probabilities, masked scores)``.

    Args:
        q: float[..., Hq, L, E]; k: float[..., Hkv, S, E]; v: float[..., Hkv, S, Ev].
        attn_mask: None, bool (True = attend) or float (added to the scores), broadcastable to
            [..., Hq, L, S].
        is_causal: add the top-left causal mask.
        scale: multiplier of q @ k^T; default 1 / sqrt(E).
        enable_gqa: repeat key/value heads to the number of query heads.
        dropout_p: must be 0 (inference).

    Raises:
        TranslationError: ``dropout_p`` is not 0, or grouped heads do not divide.
    """
    if dropout_p:
        raise TranslationError(
            f"scaled_dot_product_attention with dropout_p={dropout_p} is random in PyTorch and has no "
            "deterministic ONNX equivalent",
            hint="export the model in eval mode (model.eval()) or pass dropout_p=0.0 outside training")
    to = q.dtype
    k_in, k_rank = k, ctx.rank(k)
    if enable_gqa:
        hq, hkv = q.shape[-3], k.shape[-3]
        if isinstance(hq, int) and isinstance(hkv, int):
            if hq % hkv:
                raise TranslationError(f"enable_gqa: {hq} query heads are not a multiple of {hkv} key heads",
                                       hint="use a number of query heads divisible by the key/value heads")
            groups = hq // hkv
        else:
            groups = ctx.op.Div(ctx.dim(q, -3), ctx.dim(k, -3))
        if not (isinstance(groups, int) and groups == 1):
            k, v = _repeat_heads(ctx, k, groups), _repeat_heads(ctx, v, groups)
    scores = ctx.op.MatMul(ctx.op.Mul(q, _scale_value(ctx, q, scale, to)), _swap_last(ctx, k, k_rank))
    allowed, mask_bias = None, None
    if attn_mask is not None:
        if attn_mask.dtype == BOOL:
            allowed = attn_mask
        else:
            mask_bias = ctx.cast(attn_mask, to)
    if is_causal:
        causal = _causal_allowed(ctx, q, k_in)
        allowed = causal if allowed is None else ctx.op.And(allowed, causal)
    neg_inf = ctx.scalar(-np.inf, to)
    if allowed is not None:
        # a bool mask (and the causal one) as an additive bias on the mask's own shape, usually far
        # smaller than the scores ([B, 1, L, S] against [B, H, L, S]): the form fusion tools read
        bias = ctx.op.Where(allowed, ctx.scalar(0.0, to), neg_inf)
        mask_bias = bias if mask_bias is None else ctx.op.Add(mask_bias, bias)
    if mask_bias is not None:
        scores = ctx.op.Add(scores, mask_bias)
    probs = ctx.op.Softmax(scores, axis=-1)
    if attn_mask is not None:
        # fully masked rows: softmax gives NaN (every score -inf), PyTorch gives 0
        probs = ctx.op.Where(ctx.op.IsNaN(probs), ctx.scalar(0.0, to), probs)
    return ctx.op.MatMul(probs, v), probs, scores


@translates(aten.scaled_dot_product_attention.default)
def scaled_dot_product_attention(ctx, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """aten::scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None,
    float dropout_p=0., bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor."""
    if ctx.opset >= 23 and not dropout_p and _fits_onnx_attention(ctx, query, key, attn_mask, is_causal):
        return ctx.op.Attention(query, key, value, attn_mask, is_causal=int(bool(is_causal)),
                                scale=None if scale is None else float(scale))
    return attention(ctx, query, key, value, attn_mask, is_causal, scale, enable_gqa, dropout_p)[0]


def _fits_onnx_attention(ctx, q, k, attn_mask, is_causal) -> bool:
    """ONNX Attention (opset 23) covers 4-D inputs; its causal mask is top-left aligned only
    without a KV cache, and a float mask must have the query dtype."""
    if ctx.rank(q) != 4 or ctx.rank(k) != 4:
        return False
    if attn_mask is not None and attn_mask.dtype not in (BOOL, q.dtype):
        return False
    return True


@translates(aten._scaled_dot_product_flash_attention_for_cpu.default)
def flash_attention_for_cpu(ctx, query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None,
                            scale=None):
    """aten::_scaled_dot_product_flash_attention_for_cpu(query, key, value, float dropout_p=0.,
    bool is_causal=False, *, Tensor? attn_mask=None, float? scale=None) -> (output, logsumexp).

    ``logsumexp`` is float[..., H, L]: log of the softmax denominator of each query row.
    """
    out, _, scores = attention(ctx, query, key, value, attn_mask, is_causal, scale, False, dropout_p)
    lse = ctx.op.ReduceLogSumExp(ctx.cast(scores, ir.DataType.FLOAT),
                                 ctx.const(np.array([-1], dtype=np.int64)), keepdims=0)
    return out, lse


@translates(aten._scaled_dot_product_attention_math.default)
def attention_math(ctx, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, dropout_mask=None,
                   *, scale=None, enable_gqa=False):
    """aten::_scaled_dot_product_attention_math(...) -> (output, attention probabilities)."""
    if dropout_mask is not None and dropout_p:
        raise TranslationError("_scaled_dot_product_attention_math with a dropout mask is a training form",
                               hint="export the model in eval mode")
    out, probs, _ = attention(ctx, query, key, value, attn_mask, is_causal, scale, enable_gqa, dropout_p)
    return out, probs


def _split_heads(ctx, x: ir.Value, heads: int, head_dim: int) -> ir.Value:
    """[B, L, H*D] -> [B, H, L, D]."""
    return ctx.op.Transpose(ctx.op.Reshape(x, ctx.const(np.array([0, 0, heads, head_dim], dtype=np.int64))),
                            perm=[0, 2, 1, 3])


@translates(aten._native_multi_head_attention.default)
def native_multi_head_attention(ctx, query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
                                proj_weight, proj_bias, mask=None, need_weights=True,
                                average_attn_weights=True, mask_type=None):
    """aten::_native_multi_head_attention: nn.MultiheadAttention's fast path (batch first).

    Args:
        query: float[B, L, E]; key, value: float[B, S, E]; qkv_weight: [3E, E]; qkv_bias: [3E];
        proj_weight: [E, E]; proj_bias: [E].
        mask: bool, True = masked out: [L, S] (mask_type 0), [B, S] key padding (mask_type 1), or
            broadcastable to [B, H, L, S] (mask_type 2).

    Returns (output float[B, L, E], weights): weights averaged over heads [B, L, S] when
    ``need_weights`` and ``average_attn_weights``, per head [B, H, L, S] when not averaged, and an
    empty tensor when ``need_weights`` is False. Fully masked rows give NaN, as PyTorch's kernel.
    """
    e, h = int(embed_dim), int(num_head)
    d = e // h
    w_q, w_k, w_v = (ctx.op.Slice(qkv_weight, ctx.const(np.array([i * e], dtype=np.int64)),
                                  ctx.const(np.array([(i + 1) * e], dtype=np.int64)),
                                  ctx.const(np.array([0], dtype=np.int64))) for i in range(3))
    b_q, b_k, b_v = (ctx.op.Slice(qkv_bias, ctx.const(np.array([i * e], dtype=np.int64)),
                                  ctx.const(np.array([(i + 1) * e], dtype=np.int64)),
                                  ctx.const(np.array([0], dtype=np.int64))) for i in range(3))

    def project(x, w, b):
        return ctx.op.Add(ctx.op.MatMul(x, ctx.op.Transpose(w, perm=[1, 0])), b)

    q = _split_heads(ctx, project(query, w_q, b_q), h, d)
    k = _split_heads(ctx, project(key, w_k, b_k), h, d)
    v = _split_heads(ctx, project(value, w_v, b_v), h, d)
    to = query.dtype
    scores = ctx.op.MatMul(ctx.op.Mul(q, ctx.scalar(1.0 / math.sqrt(d), to)), _swap_last(ctx, k, 4))
    if mask is not None:
        masked = ctx.cast(mask, BOOL)
        if mask_type == 1:  # key padding [B, S] -> [B, 1, 1, S]
            masked = ctx.op.Unsqueeze(masked, ctx.const(np.array([1, 2], dtype=np.int64)))
        scores = ctx.op.Where(masked, ctx.scalar(-np.inf, to), scores)
    probs = ctx.op.Softmax(scores, axis=-1)
    attn = ctx.op.Reshape(ctx.op.Transpose(ctx.op.MatMul(probs, v), perm=[0, 2, 1, 3]),
                          ctx.const(np.array([0, 0, e], dtype=np.int64)))
    out = ctx.op.Add(ctx.op.MatMul(attn, ctx.op.Transpose(proj_weight, perm=[1, 0])), proj_bias)
    if not need_weights:
        weights = ctx.const(np.zeros((0,), dtype=to.numpy()))
    elif average_attn_weights:
        weights = ctx.op.ReduceMean(probs, ctx.const(np.array([1], dtype=np.int64)), keepdims=0)
    else:
        weights = probs
    return out, weights
