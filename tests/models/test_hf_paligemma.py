"""transformers' PaliGemma (``PaliGemmaForConditionalGeneration``: a tiny SigLIP vision tower and a tiny
Gemma, seeded random weights, 32x32 images in 8x8 patches: 16 image tokens per image) exported whole with
the inputs its processor gives (``input_ids``, ``attention_mask``, ``token_type_ids`` marking the image and
prompt prefix, which attends both ways, ``pixel_values``), batch and sequence dynamic: right at batch sizes,
prompt lengths and prefix lengths other than the example's."""

import pytest
import torch

from exportcheck import check_export

transformers = pytest.importorskip("transformers")

IMAGE_TOKEN, PER_IMAGE = 3, 16


def tiny_paligemma():
    torch.manual_seed(0)
    vision = transformers.SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                             num_attention_heads=2, image_size=32, patch_size=8)
    text = transformers.GemmaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                    max_position_embeddings=128, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    config = transformers.PaliGemmaConfig(vision_config=vision, text_config=text, image_token_id=IMAGE_TOKEN,
                                          projection_dim=64)
    return transformers.PaliGemmaForConditionalGeneration(config).eval()


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids, pixel_values):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                          pixel_values=pixel_values, use_cache=False).logits


def prompt(batch, seq, prefix, seed):
    """The processor's layout: 16 image tokens, a prompt prefix of ``prefix`` tokens (token type 0, attended
    both ways), then the suffix (token type 1, causal)."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 1000, (batch, seq), generator=gen)
    ids[:, :PER_IMAGE] = IMAGE_TOKEN
    types = torch.ones(batch, seq, dtype=torch.int64)
    types[:, :PER_IMAGE + prefix] = 0
    return {"input_ids": ids, "attention_mask": torch.ones(batch, seq, dtype=torch.int64), "token_type_ids": types,
            "pixel_values": torch.randn(batch, 3, 32, 32, generator=gen)}


@pytest.mark.slow
def test_paligemma_exports_whole_with_dynamic_batch_and_sequence():
    dims = {name: {0: "batch", 1: "seq"} for name in ("input_ids", "attention_mask", "token_type_ids")}
    dims["pixel_values"] = {0: "batch"}
    sets = [((), prompt(1, 24, 2, 1)), ((), prompt(3, 41, 10, 2)), ((), prompt(2, 17, 0, 3))]
    check_export(Logits(tiny_paligemma()), (), {**dims}, kwargs=prompt(2, 30, 6, 0), inputs=sets, sizes=[],
                 values=[], min_sets=4, expect_inputs={"input_ids": ["batch", "seq"],
                                                       "pixel_values": ["batch", 3, 32, 32]})
