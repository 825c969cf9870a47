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
whose own ``forward`` holds those statements, while torch.export traces, a ``forward`` compiled from
transformers' own source where one call of the same attention function, with the same arguments and
``attention_mask`` the block mask, computes the output wherever the pieces' own mask is None: given as
``attention_mask=None`` (Qwen2-VL's), as ``attention_mask=<name>`` holding None when traced
(LFM3-VL's), or absent from the call and from the ``**kwargs`` it passes (HunyuanVL's). Otherwise the
original statements run. Three forms of the per-piece block are read: the list of the pieces' outputs
then ``torch.cat`` of it (above); ``torch.cat`` around the list in one statement (Cosmos 3 Edge's); and a
loop collecting each piece's output and attention weights (Ovis2.5, PaddleOCR-VL, VideoLLaMA3, LFM3-VL),
where the one attention stands for the pieces only when it returns no weights (SDPA: the pieces' weights
would be a list, not one matrix), the original loop running otherwise. The flash-attention branch, which
takes ``cu_seqlens`` itself, is left as it is. Qwen3-ASR's audio attention over its windows has the
same statements.

Semantics: transformers' ``models/qwen2_vl/modeling_qwen2_vl.py`` (``VisionAttention.forward``),
``vision_utils.get_vision_cu_seqlens``.
"""

from __future__ import annotations

import ast
import copy
import textwrap

from onnxport.capture.patches import Patch, always, register
from onnxport.library.transformers import MODELS, method_variants
from onnxport.source_forms import register_form

_MASK = """
_onnxport_at = torch.arange({q}.shape[2], device={cu}.device)
_onnxport_piece = (_onnxport_at[:, None] >= {cu}[None, 1:]).sum(-1)
_onnxport_mask = torch.zeros((), dtype={q}.dtype, device={q}.device).masked_fill(
    _onnxport_piece[:, None] != _onnxport_piece[None, :], torch.finfo({q}.dtype).min)[None, None]
"""
_WHOLE = "_onnxport_whole"  # True where the pieces' attentions are computed as one masked attention
_RESULT = "_onnxport_result"  # that attention's (output, weights)


def _assigned(stmt: ast.stmt) -> tuple[str, ast.expr] | None:
    """``(name, value)`` of a statement ``name = value``; None otherwise."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id, stmt.value
    return None


def _is_cat(value: ast.expr | None, outputs: str) -> bool:
    """Whether ``value`` is ``torch.cat(<outputs>, dim=1)``."""
    return value is not None and ast.unparse(value) == f"torch.cat({outputs}, dim=1)"


def _per_piece(block: list[ast.stmt], splits: str) -> tuple[int, ast.expr, str, list[str], list[str]] | None:
    """How the statements after ``splits = ...`` run the attention per piece: ``(count, comprehension,
    out, checks, names)``: the form's ``count`` statements, a comprehension ``[call for q, k, v in
    zip(*splits)]`` of its attention call, ``out`` the name of the concatenated output, the lines deciding
    from the whole attention's ``_onnxport_result`` whether it stands for the pieces, and the lines giving
    the form's other names from it. None where the statements are none of the three forms: a list of the
    pieces' outputs then ``torch.cat`` of it; ``torch.cat`` of that list in one statement; a loop
    collecting outputs and weights, then ``torch.cat`` of the outputs."""
    zipped = f"zip(*{splits})"

    def over_pieces(comp) -> bool:
        return isinstance(comp, ast.ListComp) and len(comp.generators) == 1 \
            and ast.unparse(comp.generators[0].iter) == zipped and not comp.generators[0].ifs

    first = _assigned(block[0]) if block else None
    second = _assigned(block[1]) if len(block) > 1 else None
    if first is not None and isinstance(first[1], ast.Call) and len(first[1].args) == 1 \
            and over_pieces(first[1].args[0]) and _is_cat(first[1], ast.unparse(first[1].args[0])):
        return 1, first[1].args[0], first[0], [], []  # out = torch.cat([attention(...)[0] for ...], dim=1)
    if first is not None and over_pieces(first[1]) and second is not None and _is_cat(second[1], first[0]):
        return 2, first[1], second[0], [], [f"{first[0]} = [{_RESULT}[0]]"]  # outputs = [...]; out = torch.cat(...)
    # outputs, weights = [], []
    # for q, k, v in zip(*splits):
    #     o, w = attention(...); outputs.append(o); weights.append(w)
    # out = torch.cat(outputs, dim=1)
    if len(block) < 3 or not isinstance(block[0], ast.Assign) or not isinstance(block[1], ast.For):
        return None
    init, loop, last = block[0], block[1], _assigned(block[2])
    pair = init.targets[0] if len(init.targets) == 1 else None
    if not (isinstance(pair, ast.Tuple) and len(pair.elts) == 2 and all(isinstance(e, ast.Name) for e in pair.elts)
            and ast.unparse(init.value) == "([], [])" and ast.unparse(loop.iter) == zipped and not loop.orelse
            and len(loop.body) == 3 and isinstance(loop.body[0], ast.Assign) and len(loop.body[0].targets) == 1):
        return None
    outputs, weights = (e.id for e in pair.elts)
    each = loop.body[0].targets[0]
    if not (isinstance(each, ast.Tuple) and len(each.elts) == 2):
        return None
    o, w = (ast.unparse(e) for e in each.elts)
    if [ast.unparse(s) for s in loop.body[1:]] != [f"{outputs}.append({o})", f"{weights}.append({w})"] \
            or last is None or not _is_cat(last[1], outputs):
        return None
    comp = ast.ListComp(loop.body[0].value, [ast.comprehension(loop.target, loop.iter, [], 0)])
    # the weights of one attention over the whole sequence are not the pieces' list: only where there
    # are none (SDPA) does the whole attention stand for the pieces
    return 3, comp, last[0], [f"{_WHOLE} = {_RESULT}[1] is None"], [
        f"{outputs}, {weights} = [{_RESULT}[0]], [{_RESULT}[1]]"]


def _masked_block(block: list[ast.stmt]) -> tuple[int, list[ast.stmt]] | None:
    """``(count, statements)``: statements for the first ``count`` of ``block`` (lengths, splits, the
    attention per piece and the concatenation of its outputs) computing one attention under the
    block-diagonal mask where the call's own mask is None (given as ``attention_mask=``, or absent from
    the ``**kwargs`` it passes), the original statements otherwise; None where ``block`` does not start
    with that form."""
    parts = [_assigned(s) for s in block[:2]]
    if len(parts) != 2 or any(p is None for p in parts):
        return None
    (lengths, diff), (splits, split) = parts
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
    found = _per_piece(block[2:], splits)
    if found is None:
        return None
    count, per_piece, out, checks, others = found
    target = per_piece.generators[0].target
    if not (isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts)
            and len(target.elts) == len(qkv) == 3):
        return None
    names = {e.id: q for e, q in zip(target.elts, qkv)}

    class Whole(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return ast.copy_location(copy.deepcopy(names[node.id]), node) if node.id in names else node

    call = Whole().visit(copy.deepcopy(per_piece.elt))
    if count != 3:  # attention(...)[0]: the whole result is kept, its output read below
        if not (isinstance(call, ast.Subscript) and ast.unparse(call.slice) == "0"):
            return None
        call = call.value
    if not isinstance(call, ast.Call):
        return None
    masks = [k for k in call.keywords if k.arg == "attention_mask"]
    starred = [k for k in call.keywords if k.arg is None]
    if len(masks) == 1:  # the pieces' own mask: None, or an expression that may hold one
        own = ast.unparse(masks[0].value)
        whole = "True" if own == "None" else f"({own}) is None"
        masks[0].value = ast.Name("_onnxport_mask", ast.Load())
    elif len(starred) == 1 and isinstance(starred[0].value, ast.Name):  # one **kwargs may carry
        passed = starred[0].value.id
        whole = f"{passed}.get('attention_mask') is None"
        starred[0].value = ast.parse(f"{{_k: _v for _k, _v in {passed}.items() if _k != 'attention_mask'}}",
                                     mode="eval").body
        call.keywords.insert(call.keywords.index(starred[0]),
                             ast.keyword("attention_mask", ast.Name("_onnxport_mask", ast.Load())))
    else:
        return None
    mask = _MASK.format(q=ast.unparse(qkv[0]), cu=cu).strip()
    code = (f"{_WHOLE} = {whole}\n"
            f"if {_WHOLE}:\n{textwrap.indent(mask, '    ')}\n    {_RESULT} = {ast.unparse(call)}\n"
            + "".join(f"    {c}\n" for c in checks)
            + f"if {_WHOLE}:\n    {out} = {_RESULT}[0]\n" + "".join(f"    {c}\n" for c in others)
            + "else:\n    pass\n")
    new = ast.parse(code).body
    for node in new:
        for child in ast.walk(node):
            ast.copy_location(child, block[1])  # the generated lines are the splits' line
    new[-1].orelse = block[:2 + count]  # the original statements, at their own lines
    return 2 + count, new


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
    masked = _masked_block(block[at:])
    if masked is None:
        return False
    count, replacement = masked
    block[at:at + count] = replacement
    return True


register_form(_one_masked_attention, modules=(MODELS,))


def _changes() -> list:
    return method_variants("forward", _one_masked_attention, reads=frozenset({"split", "tolist", "cat"}))


BLOCK_DIAGONAL_VISION_ATTENTION = register(Patch(
    "packed vision attention as one block-diagonal masked attention", _changes,
    "transformers' packed vision attention (Qwen2-VL's VisionAttention.forward and its kin) without flash "
    "attention: while torch.export traces, the attention per image cut at cu_seqlens (torch.split over "
    "lengths.tolist(), a number of pieces known only when the model runs) is one attention over the sequence "
    "under a block-diagonal mask of the same pieces; nothing happens where no loaded transformers model holds "
    "those statements", when=always, order=232))
