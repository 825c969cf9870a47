"""Hugging Face transformers from tiny configs built in code (2 layers, width 64, vocab 1000, seeded,
no downloads): BertModel, GPT2LMHeadModel, LlamaForCausalLM (use_cache=False, grouped-query
heads), ViTModel, WhisperEncoder. Text models take input_ids / attention_mask with dynamic batch
and sequence."""

import pytest
import torch

from exportcheck import check_export, count_ops

transformers = pytest.importorskip("transformers")

VOCAB, WIDTH, LAYERS, HEADS, FF = 1000, 64, 2, 4, 128


class _TextModel(torch.nn.Module):
    def __init__(self, model, output: str):
        super().__init__()
        self.model, self.output = model, output

    def forward(self, input_ids, attention_mask):
        return getattr(self.model(input_ids=input_ids, attention_mask=attention_mask), self.output)


def _bert():
    cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=WIDTH, num_hidden_layers=LAYERS,
                                  num_attention_heads=HEADS, intermediate_size=FF, max_position_embeddings=128)
    return _TextModel(transformers.BertModel(cfg, add_pooling_layer=False), "last_hidden_state"), WIDTH


def _gpt2():
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_embd=WIDTH, n_layer=LAYERS, n_head=HEADS, n_positions=128,
                                  use_cache=False, bos_token_id=0, eos_token_id=0)
    return _TextModel(transformers.GPT2LMHeadModel(cfg), "logits"), VOCAB


def _llama():
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=WIDTH, num_hidden_layers=LAYERS,
                                   num_attention_heads=HEADS, num_key_value_heads=2, intermediate_size=FF,
                                   max_position_embeddings=128, use_cache=False)
    return _TextModel(transformers.LlamaForCausalLM(cfg), "logits"), VOCAB


@pytest.mark.parametrize("build,opset", [(_bert, 20), (_gpt2, 20), (_llama, 20), (_llama, 23)],
                         ids=["bert", "gpt2", "llama", "llama_opset23"])
def test_text_model(build, opset):
    torch.manual_seed(0)
    model, width = build()
    ids = torch.randint(0, VOCAB, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.int64)
    mask[1, 6:] = 0  # right padding on the second sequence
    seq = torch.export.Dim("seq", max=128)  # position embeddings cover 128 positions
    dims = {"input_ids": {0: "batch", 1: seq}, "attention_mask": {0: "batch", 1: seq}}
    r = check_export(model.eval(), (ids, mask), dims, atol=1e-4, rtol=0.0,
                     sizes=[{"batch": 3, "seq": 5}, {"batch": 1, "seq": 17}],
                     expect_outputs={"output": ["batch", "seq", width]}, opset=opset)
    assert count_ops(r, "Attention") == (LAYERS if opset >= 23 else 0)


@pytest.mark.parametrize("build", [_bert], ids=["bert"])
def test_one_token_is_not_given_up(build):
    """A dynamic size declared without a minimum keeps size 1 where torch.export's default minimum of 2
    is the only lower bound (BERT's ``position_ids[:, :seq]`` bounds it from above): no ``seq >= 2``
    among the constraints, and onnxruntime matches eager PyTorch on one token."""
    torch.manual_seed(0)
    model, width = build()
    ids = torch.randint(0, VOCAB, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.int64)
    dims = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    r = check_export(model.eval(), (ids, mask), dims, sizes=[{"batch": 3, "seq": 1}, {"batch": 1, "seq": 1}])
    assert [str(c) for c in r.constraints] == ["seq <= 128"]
    one = r.validate(sizes=[{"batch": 2, "seq": 1}], values=[])
    assert one.ok and one.checks, one


def test_mobilenet_v2_tf_padding_with_dynamic_image_size():
    """HF MobileNetV2 pads as TensorFlow's "SAME" (``int()`` of the image size, a branch on its parity):
    exported with batch, height and width dynamic, right at odd and even sizes."""
    torch.manual_seed(0)
    cfg = transformers.MobileNetV2Config(image_size=32, depth_multiplier=0.35, num_labels=10)

    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = transformers.MobileNetV2ForImageClassification(cfg)

        def forward(self, pixel_values):
            return self.model(pixel_values=pixel_values).logits

    r = check_export(Classifier().eval(), (torch.randn(2, 3, 32, 32),),
                     {"pixel_values": {0: "batch", 2: "height", 3: "width"}},
                     sizes=[{"batch": 1, "height": 33, "width": 24}, {"batch": 3, "height": 17, "width": 40}],
                     expect_outputs={"output": ["batch", 10]})
    assert not r.constraints


def test_vit_interpolated_position_encoding_with_dynamic_image_size():
    """ViT with ``interpolate_pos_encoding=True`` interpolates its position grid to the patch counts of the
    image: height and width stay dynamic (no upper bound adopted) and match eager at other sizes."""
    torch.manual_seed(0)
    cfg = transformers.ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=WIDTH,
                                 num_hidden_layers=1, num_attention_heads=HEADS, intermediate_size=FF)

    class Vit(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = transformers.ViTModel(cfg, add_pooling_layer=False)

        def forward(self, pixel_values):
            return self.model(pixel_values=pixel_values, interpolate_pos_encoding=True).last_hidden_state

    r = check_export(Vit().eval(), (torch.randn(2, 3, 48, 40),), {"pixel_values": {2: "height", 3: "width"}},
                     sizes=[{"height": 64, "width": 24}, {"height": 16, "width": 56}], values=[])
    assert not [c for c in r.constraints if "height" in c.names and "<=" in str(c)]


def test_dinov2_example_at_its_configured_image_size_keeps_the_size_dynamic():
    """DINOv2 skips interpolating its position grid when the image is the configured size, unless
    ``torch.jit.is_tracing()``: at an example of that size the branch would fix the size; captured on
    transformers' tracing path, the ONNX model interpolates at every size (the configured one included,
    where the interpolation returns the grid unchanged)."""
    torch.manual_seed(0)
    cfg = transformers.Dinov2Config(image_size=32, patch_size=8, num_channels=3, hidden_size=WIDTH,
                                    num_hidden_layers=1, num_attention_heads=HEADS, intermediate_size=FF)
    model = transformers.Dinov2Model(cfg).eval()
    check_export(model, (torch.randn(2, 3, 32, 32),), {"pixel_values": {0: "batch", 2: "height", 3: "width"}},
                 sizes=[{"batch": 1, "height": 64, "width": 24}, {"batch": 3, "height": 16, "width": 56}],
                 values=[], expect_inputs={"pixel_values": ["batch", 3, "height", "width"]})
    assert torch.jit.is_tracing() is False  # torch's own again after capture


def test_vit_dynamic_batch():
    torch.manual_seed(0)
    cfg = transformers.ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=WIDTH,
                                 num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=FF)

    class Vit(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = transformers.ViTModel(cfg, add_pooling_layer=False)

        def forward(self, pixel_values):
            return self.model(pixel_values=pixel_values).last_hidden_state

    check_export(Vit().eval(), (torch.randn(2, 3, 32, 32),), {"pixel_values": {0: "batch"}}, atol=1e-4, rtol=0.0,
                 expect_outputs={"output": ["batch", 17, WIDTH]})


def test_whisper_encoder_dynamic_batch():
    """WhisperEncoder (conv front end, GELU, attention); Whisper requires exactly
    2 * max_source_positions input frames, so only the batch is dynamic."""
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    torch.manual_seed(0)
    cfg = transformers.WhisperConfig(vocab_size=VOCAB, num_mel_bins=80, encoder_layers=LAYERS,
                                     encoder_attention_heads=HEADS, decoder_layers=LAYERS,
                                     decoder_attention_heads=HEADS, d_model=WIDTH,
                                     encoder_ffn_dim=FF, decoder_ffn_dim=FF, max_source_positions=32,
                                     max_target_positions=64, pad_token_id=0, bos_token_id=0, eos_token_id=0,
                                     decoder_start_token_id=0)

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = WhisperEncoder(cfg)

        def forward(self, input_features):
            return self.encoder(input_features=input_features).last_hidden_state

    check_export(Encoder().eval(), (torch.randn(2, 80, 64),), {"input_features": {0: "batch"}}, atol=1e-4, rtol=0.0,
                 expect_outputs={"output": ["batch", 32, WIDTH]})
