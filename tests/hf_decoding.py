"""Shared by the Hugging Face decoder tests: a transformers decoder exported from one step with its
``DynamicCache`` as inputs and outputs, and the checks every such export passes (validation at the
default sizes with ``total = past + seq`` respected and an empty cache included; 16 greedy tokens
in onnxruntime against ``generate``, batch 1 and a left-padded batch 2)."""

from __future__ import annotations

import torch

import onnxport

VOCAB, PAD = 1000, 0
IDS = dict(pad_token_id=PAD, bos_token_id=1, eos_token_id=2)
DIMS = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
        "position_ids": {0: "batch", 1: "seq"}, "past_key_values": {0: "batch", 2: "past"}}


RELATIONS = {"total": "past + seq"}


def export_step(cls, cfg, relations: dict | None = RELATIONS) -> tuple[torch.nn.Module, onnxport.ExportResult]:
    """``cls(cfg)`` (a transformers *ForCausalLM, seeded, in eval mode) and its export from a step
    with 5 cached and 3 new tokens, batch 2, called as its users call it
    (``past_key_values=DynamicCache(...)``), with ``relations`` (None: the call as written)."""
    from transformers import DynamicCache

    torch.manual_seed(0)
    model = cls(cfg).eval()
    past, seq = 5, 3
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=torch.randint(3, VOCAB, (2, past)), past_key_values=cache, use_cache=True)
    kwargs = dict(input_ids=torch.randint(3, VOCAB, (2, seq)),
                  attention_mask=torch.ones(2, past + seq, dtype=torch.int64),
                  position_ids=torch.arange(past, past + seq).expand(2, seq), past_key_values=cache, use_cache=True)
    return model, onnxport.to_onnx(model, kwargs=kwargs, dynamic_shapes=DIMS, relations=relations)


def prompts() -> tuple[torch.Tensor, torch.Tensor]:
    """Two prompts of 6 tokens, the second left-padded by 2, and their attention mask."""
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (2, 6), generator=gen)
    mask = torch.ones(2, 6, dtype=torch.int64)
    ids[1, :2], mask[1, :2] = PAD, 0
    return ids, mask


def check_validates_and_decodes(model, result: onnxport.ExportResult) -> None:
    """Validation at the default sizes (total = past + seq, an empty cache among them) and 16 greedy
    tokens as ``generate`` chooses them, batch 1 and the left-padded batch 2."""
    report = result.validate()
    assert report.ok, report
    compared = [c for c in report.checks if not c.rejected]
    assert not report.rejected and len({c.inputs for c in compared}) >= 6
    for c in compared:
        sizes = {k: int(v) for k, v in (kv.split("=") for kv in c.sizes.split(", "))}
        assert sizes["total"] == sizes["past"] + sizes["seq"]
    assert any(c.why.startswith("empty") and "past=0" in c.sizes for c in compared)

    ids, mask = prompts()
    single = result.check_generation(model, ids[:1], max_new_tokens=16)
    assert single.ok, single
    padded = result.check_generation(model, ids, attention_mask=mask, max_new_tokens=16)
    assert padded.ok, padded
    assert len(padded.expected[0]) == 16 and padded.got == padded.expected
