"""Packed vision attention (Qwen2-VL's vision tower and its kin), captured as one attention under a
block-diagonal mask.

transformers' vision towers that pack every image (or video frame) of a call into one sequence
(``Qwen2-VL``, ``Qwen2.5-VL``, ``Qwen3-VL``, ``GLM-4V``, ``GLM-Image``...) mark where each image
starts with ``cu_seqlens`` (``[0, n_1, n_1 + n_2, ...]``, from ``grid_thw``). Without flash attention,
their ``VisionAttention.forward`` cuts the queries, keys and values at those boundaries and runs one
attention per image::

    lengths = cu_seqlens[1:] - cu_seqlens[:-1]
    splits = [torch.split(tensor, lengths.tolist(), dim=2) for tensor in (query_states, key_states, value_states)]
    attn_outputs = [attention_interface(self, q, k, v, attention_mask=None, ...)[0] for q, k, v in zip(*splits)]
    attn_output = torch.cat(attn_outputs, dim=1)

The number of pieces is a value of ``grid_thw`` known only when the model runs, which torch.export
cannot loop over. Attention over each piece is attention over the whole sequence where each token sees
only the tokens of its own piece: with token ``i``'s piece ``(i >= cu_seqlens[1:]).sum()``, an additive
mask of 0 between tokens of one piece and the dtype's minimum elsewhere gives each query's softmax
weight 0 (exactly: ``exp`` underflows) outside its piece, so the same output at every number and size
of images.

``BLOCK_DIAGONAL_VISION_ATTENTION`` (a registered capture patch) gives each loaded transformers class
whose own ``forward`` holds those four statements, while torch.export traces, a ``forward`` compiled
from transformers' own source with them replaced by the one masked call (the same attention function,
with the same arguments, ``attention_mask`` the block mask). The flash-attention branch, which takes
``cu_seqlens`` itself, is left as it is; so are the forms this does not match (a loop that also
collects each piece's attention weights: PaddleOCR-VL, VideoLLaMA3, LFM3-VL; a call without
``attention_mask``, whose ``**kwargs`` may carry one: HunyuanVL). The shorter form concatenating
around the list of the pieces' attentions, ``attn_output = torch.cat([attention_interface(...)[0] for
q, k, v in zip(*splits)], dim=1)`` (Cosmos 3 Edge's), is the same computation and replaced alike.
Qwen3-ASR's audio attention over its windows has the same four statements.

Semantics: transformers' ``models/qwen2_vl/modeling_qwen2_vl.py`` (``VisionAttention.forward``),
``vision_utils.get_vision_cu_seqlens``.
"""

from __future__ import annotations

import ast

from onnxport.capture.patches import Patch, always, register
from onnxport.library.transformers import method_variants

_MASK = """
_onnxport_at = torch.arange({q}.shape[2], device={cu}.device)
_onnxport_piece = (_onnxport_at[:, None] >= {cu}[None, 1:]).sum(-1)
_onnxport_mask = torch.zeros((), dtype={q}.dtype, device={q}.device).masked_fill(
    _onnxport_piece[:, None] != _onnxport_piece[None, :], torch.finfo({q}.dtype).min)[None, None]
"""


def _assigned(stmt: ast.stmt) -> tuple[str, ast.expr] | None:
    """``(name, value)`` of a statement ``name = value``; None otherwise."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id, stmt.value
    return None


def _masked_block(block: list[ast.stmt]) -> list[ast.stmt] | None:
    """The statements replacing ``block`` (lengths, splits, per-piece attention, concatenation in
    that order, and nothing else) by one masked attention; None where ``block`` is not that form."""
    parts = [_assigned(s) for s in block]
    if len(block) not in (3, 4) or any(p is None for p in parts):
        return None
    if len(block) == 3:  # the pieces' attentions concatenated in one statement: out = torch.cat([...], dim=1)
        (lengths, diff), (splits, split), (out, cat) = parts
        per_piece = cat.args[0] if isinstance(cat, ast.Call) and len(cat.args) == 1 else None
        if not isinstance(per_piece, ast.ListComp) or ast.unparse(cat.func) != "torch.cat" \
                or [ast.unparse(k) for k in cat.keywords] != ["dim=1"]:
            return None
        outputs = None
    else:
        (lengths, diff), (splits, split), (outputs, per_piece), (out, cat) = parts
    # lengths = cu[1:] - cu[:-1]
    if not (isinstance(diff, ast.BinOp) and isinstance(diff.op, ast.Sub) and isinstance(diff.left, ast.Subscript)):
        return None
    cu = ast.unparse(diff.left.value)
    if ast.unparse(diff) != f"{cu}[1:] - {cu}[:-1]":
        return None
    # splits = [torch.split(tensor, lengths.tolist(), dim=2) for tensor in (q, k, v)]
    if not (isinstance(split, ast.ListComp) and len(split.generators) == 1
            and isinstance(split.generators[0].iter, ast.Tuple) and isinstance(split.generators[0].target, ast.Name)):
        return None
    tensor = split.generators[0].target.id
    if ast.unparse(split.elt) != f"torch.split({tensor}, {lengths}.tolist(), dim=2)":
        return None
    qkv = split.generators[0].iter.elts
    # outputs = [attention(..., q, k, v, ..., attention_mask=None, ...)[0] for q, k, v in zip(*splits)]
    if not (isinstance(per_piece, ast.ListComp) and len(per_piece.generators) == 1
            and ast.unparse(per_piece.generators[0].iter) == f"zip(*{splits})"
            and isinstance(per_piece.generators[0].target, ast.Tuple)
            and all(isinstance(e, ast.Name) for e in per_piece.generators[0].target.elts)
            and len(per_piece.generators[0].target.elts) == len(qkv) == 3):
        return None
    if outputs is not None and ast.unparse(cat) != f"torch.cat({outputs}, dim=1)":
        return None
    names = {e.id: q for e, q in zip(per_piece.generators[0].target.elts, qkv)}
    call = per_piece.elt

    class Whole(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return ast.copy_location(names[node.id], node) if node.id in names else node

    call = Whole().visit(call)
    inner = call.value if isinstance(call, ast.Subscript) else None
    masks = [k for k in getattr(inner, "keywords", []) if k.arg == "attention_mask"]
    if not isinstance(inner, ast.Call) or len(masks) != 1 or ast.unparse(masks[0].value) != "None":
        return None
    masks[0].value = ast.Name("_onnxport_mask", ast.Load())
    mask = ast.parse(_MASK.format(q=ast.unparse(qkv[0]), cu=cu)).body
    return mask + [ast.Assign([ast.Name(out, ast.Store())], call)]


def _one_masked_attention(func: ast.FunctionDef) -> bool:
    """Replace the per-piece attention block of ``func`` (a ``forward``) by one masked attention;
    False where ``func`` holds no such block, or more than one."""
    if func.name != "forward":
        return False
    found = []
    for node in ast.walk(func):
        for field in ("body", "orelse"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                start = next((i for i, s in enumerate(block) if isinstance(s, ast.Assign)
                              and ".tolist()" in ast.unparse(s) and "torch.split(" in ast.unparse(s)), None)
                if start is not None and start > 0:
                    found.append((block, start - 1))
    if len(found) != 1:
        return False
    block, at = found[0]
    for count in (4, 3):  # a form is checked whole before _masked_block changes any of its nodes
        replacement = _masked_block(block[at:at + count])
        if replacement is not None:
            break
    else:
        return False
    for node in replacement:
        for child in ast.walk(node):
            ast.copy_location(child, block[at + 1])
    block[at:at + count] = replacement
    return True


def _changes() -> list:
    return method_variants("forward", _one_masked_attention, reads=frozenset({"split", "tolist", "cat"}))


BLOCK_DIAGONAL_VISION_ATTENTION = register(Patch(
    "packed vision attention as one block-diagonal masked attention", _changes,
    "transformers' packed vision attention (Qwen2-VL's VisionAttention.forward and its kin) without flash "
    "attention: while torch.export traces, the attention per image cut at cu_seqlens (torch.split over "
    "lengths.tolist(), a number of pieces known only when the model runs) is one attention over the sequence "
    "under a block-diagonal mask of the same pieces; nothing happens where no loaded transformers model holds "
    "those statements", when=always, order=232))
