"""transformers' Llava (``LlavaForConditionalGeneration``: a tiny CLIP vision tower and a tiny Llama,
seeded random weights, 32x32 images in 8x8 patches: 16 image tokens per image) exported whole with
dynamic batch and sequence: the per-image feature list captured as one tensor
(``onnxport.library.transformers.image_feature_lists``) and the features scattered into the prompt's
image tokens match eager PyTorch at batch sizes and prompt lengths other than the example's. Then the
three parts of the task ``image-text-to-text`` (``onnxport.pretrained.vision_language``), each
validated, and greedy decoding through them in onnxruntime against ``generate``."""

import pytest
import torch

from exportcheck import check_export

transformers = pytest.importorskip("transformers")

IMAGE_TOKEN, PER_IMAGE = 3, 16


def tiny_llava():
    torch.manual_seed(0)
    vision = transformers.CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                           num_attention_heads=2, image_size=32, patch_size=8)
    text = transformers.LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                    pad_token_id=0, bos_token_id=1, eos_token_id=2)
    config = transformers.LlavaConfig(vision_config=vision, text_config=text, image_token_id=IMAGE_TOKEN,
                                      vision_feature_layer=-1, vision_feature_select_strategy="default")
    return transformers.LlavaForConditionalGeneration(config).eval()


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, pixel_values):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, pixel_values=pixel_values,
                          use_cache=False).logits


def prompt(batch, seq, seed):
    """Token ids ``[batch, seq]`` whose 16 image tokens start at a place of each row's own, a mask
    and images."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 1000, (batch, seq), generator=gen)
    for row in range(batch):
        at = int(torch.randint(0, seq - PER_IMAGE + 1, (), generator=gen))
        ids[row, at:at + PER_IMAGE] = IMAGE_TOKEN
    return {"input_ids": ids, "attention_mask": torch.ones(batch, seq, dtype=torch.int64),
            "pixel_values": torch.randn(batch, 3, 32, 32, generator=gen)}


@pytest.mark.slow
def test_llava_for_conditional_generation_exports_with_dynamic_batch_and_sequence():
    model = tiny_llava()
    dims = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}, "pixel_values": {0: "batch"}}
    sets = [((), prompt(1, 20, 1)), ((), prompt(3, 31, 2)), ((), prompt(4, 16, 3))]
    result = check_export(Logits(model), (), dims, kwargs=prompt(2, 24, 0), inputs=sets, sizes=[], values=[],
                          min_sets=4, expect_inputs={"input_ids": ["batch", "seq"],
                                                     "pixel_values": ["batch", 3, 32, 32]},
                          expect_outputs={"output": ["batch", "seq", 1000]})
    # the image-token count check refuses the made-up inputs at every size, not size 1: it excludes none
    assert result.constraints == []
    with torch.no_grad():  # the image features reach the logits: other images, other logits
        base = model(**prompt(2, 24, 0)).logits
        other = prompt(2, 24, 0) | {"pixel_values": torch.randn(2, 3, 32, 32)}
        assert not torch.allclose(base, model(**other).logits)


@pytest.mark.slow
def test_llava_exports_with_batch_and_sequence_declared_from_1():
    from torch.export import Dim

    batch, seq = Dim("batch", min=1), Dim("seq", min=1)
    dims = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}, "pixel_values": {0: batch}}
    sets = [((), prompt(1, PER_IMAGE, 4)), ((), prompt(1, 17, 5)), ((), prompt(3, PER_IMAGE, 6))]
    result = check_export(Logits(tiny_llava()), (), dims, kwargs=prompt(2, 24, 0), inputs=sets, sizes=[], values=[],
                          min_sets=4)
    assert result.constraints == [] and not result.pieces


@pytest.mark.slow
def test_llava_parts_validate_and_decode_like_generate():
    from onnxport.pretrained.vision_language import export_image_text_to_text

    model = tiny_llava()
    parts, generation = export_image_text_to_text(model, generate=8)
    assert set(parts) == {"vision_model", "embedding_model", "text_model"}
    for stem, part in parts.items():
        assert part.validation.ok, f"{stem}\n{part.validation}"
    shapes = {stem: {v.name: [d if isinstance(d, int) else str(d) for d in v.shape] for v in part.model.graph.inputs}
              for stem, part in parts.items()}
    assert shapes["vision_model"] == {"pixel_values": ["batch_size", 3, 32, 32]}
    assert shapes["embedding_model"] == {"input_ids": ["batch_size", "sequence_length"],
                                         "image_features": ["num_image_tokens", 64]}
    assert shapes["text_model"]["inputs_embeds"] == ["batch_size", "sequence_length", 64]
    assert shapes["text_model"]["past_key_values.0.key"] == ["batch_size", 2, "past_sequence_length", 16]
    sets = {c.inputs for c in parts["embedding_model"].validation.checks}
    assert len(sets) == 4  # the example, batch 1 and 3 with images, text without images
    assert len(generation) == 2
    for label, report in generation:
        assert report.ok, f"{label}\n{report}"
        assert len(report.expected[0]) == 8
