"""Encoder-decoders from tiny configs (2 layers, width 64, vocab 1000, seeded): T5, BART and
Whisper exported as an encoder (with the cross-attention cache) and a decoder-with-cache,
validated at the default sizes (an empty self-attention cache included), and decoded greedily
in onnxruntime against the model's own ``generate``: 16 tokens, batch 1 and batch 2 (the second
source left-padded for the text models)."""

import pytest
import torch

import onnxport
from onnxport.encoder_decoder import export_encoder_decoder

transformers = pytest.importorskip("transformers")

VOCAB, WIDTH, LAYERS, HEADS, FF = 1000, 64, 2, 4, 128


def _build(name: str):
    """(model, encoder example, padding id)."""
    torch.manual_seed(0)
    if name == "whisper":
        cfg = transformers.WhisperConfig(vocab_size=VOCAB, num_mel_bins=80, encoder_layers=LAYERS,
                                         decoder_layers=LAYERS, encoder_attention_heads=HEADS,
                                         decoder_attention_heads=HEADS, d_model=WIDTH,
                                         encoder_ffn_dim=FF, decoder_ffn_dim=FF, max_source_positions=32,
                                         max_target_positions=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                         decoder_start_token_id=1)
        return transformers.WhisperForConditionalGeneration(cfg).eval(), None
    if name == "t5":
        cfg = transformers.T5Config(vocab_size=VOCAB, d_model=WIDTH, d_kv=16, d_ff=FF, num_layers=LAYERS,
                                    num_heads=HEADS, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
        return transformers.T5ForConditionalGeneration(cfg).eval(), 0
    cfg = transformers.BartConfig(vocab_size=VOCAB, d_model=WIDTH, encoder_layers=LAYERS, decoder_layers=LAYERS,
                                  encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FF,
                                  decoder_ffn_dim=FF, max_position_embeddings=128, pad_token_id=1, bos_token_id=0,
                                  eos_token_id=2, decoder_start_token_id=2, forced_bos_token_id=None,
                                  forced_eos_token_id=None)
    return transformers.BartForConditionalGeneration(cfg).eval(), 1


def _source(batch: int, length: int, pad: int | None, seed: int) -> dict:
    gen = torch.Generator().manual_seed(seed)
    if pad is None:
        return {"input_features": torch.randn(batch, 80, 64, generator=gen)}
    ids = torch.randint(3, VOCAB, (batch, length), generator=gen)
    mask = torch.ones(batch, length, dtype=torch.int64)
    if batch > 1:
        ids[1, :3], mask[1, :3] = pad, 0  # the second source is 3 shorter: left padding
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("name", ["t5", "bart", "whisper"])
def test_encoder_and_decoder_with_cache_validate_and_decode_as_generate(name, tmp_path):
    model, pad = _build(name)
    pair = export_encoder_decoder(model, _source(2, 7, pad, seed=0))
    encoder, decoder = pair.parts["encoder"], pair.parts["decoder"]
    enc_len = 32 if name == "whisper" else "encoder_seq"
    enc_out = {v.name: [d if isinstance(d, int) else str(d) for d in v.shape] for v in encoder.model.graph.outputs}
    assert enc_out["encoder_hidden_states"] == ["batch", enc_len, WIDTH]
    assert enc_out["present.1.encoder.value"] == ["batch", HEADS, enc_len, 16]
    dec_in = {v.name: [d if isinstance(d, int) else str(d) for d in v.shape] for v in decoder.model.graph.inputs}
    dec_out = {v.name: [d if isinstance(d, int) else str(d) for d in v.shape] for v in decoder.model.graph.outputs}
    assert list(dec_in)[:2] == ["input_ids", "encoder_hidden_states"]
    assert ("encoder_attention_mask" in dec_in) == (pad is not None)
    assert dec_in["past_key_values.0.decoder.key"] == ["batch", HEADS, "past", 16]
    assert dec_in["past_key_values.0.encoder.key"] == ["batch", HEADS, enc_len, 16]
    assert list(dec_out) == ["logits"] + [f"present.{i}.decoder.{kv}" for i in range(LAYERS) for kv in ("key", "value")]
    assert dec_out["present.1.decoder.key"] == ["batch", HEADS, "past + seq", 16]

    report = pair.validate()
    assert report.ok, report
    assert any(c.inputs.startswith("decoder") and "past=0" in c.sizes for c in report.checks)

    for batch in (1, 2):
        gen = pair.check_generation(model, _source(batch, 9, pad, seed=batch), max_new_tokens=16)
        assert gen.ok, gen
        assert len(gen.got) == batch and len(gen.got[0]) >= 1
    paths = pair.save(tmp_path)
    assert [p.rsplit("/", 1)[1] for p in paths] == ["encoder.onnx", "decoder.onnx"]


def test_the_deprecated_door_and_attributes_still_work_and_name_the_new_ones():
    model, pad = _build("t5")
    with pytest.warns(DeprecationWarning, match=r"onnxport.export_pretrained\(directory"):
        pair = onnxport.export_encoder_decoder(model, _source(2, 7, pad, seed=0))
    with pytest.warns(DeprecationWarning, match=r'result.parts\["encoder"\]'):
        assert pair.encoder is pair.parts["encoder"]
    with pytest.warns(DeprecationWarning, match=r'result.parts\["decoder"\]'):
        assert pair.decoder is pair.parts["decoder"]


def test_an_encoder_decoder_call_as_written_exports_with_its_encoder_decoder_cache():
    from transformers import DynamicCache, EncoderDecoderCache
    from transformers.modeling_outputs import BaseModelOutput

    model, pad = _build("t5")
    source = _source(2, 7, pad, seed=0)
    with torch.no_grad():
        hidden = model.get_encoder()(**source).last_hidden_state
        cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
        model(decoder_input_ids=torch.zeros(2, 3, dtype=torch.long), encoder_outputs=BaseModelOutput(hidden),
              attention_mask=source["attention_mask"], past_key_values=cache, use_cache=True)
    kwargs = dict(decoder_input_ids=torch.randint(3, VOCAB, (2, 2)), encoder_outputs=(hidden,),
                  attention_mask=source["attention_mask"], past_key_values=cache, use_cache=True)
    dims = {"decoder_input_ids": {0: "batch", 1: "seq"}, "encoder_outputs": ({0: "batch", 1: "enc"},),
            "attention_mask": {0: "batch", 1: "enc"},
            "past_key_values": {"decoder": {0: "batch", 2: "past"}, "encoder": {0: "batch", 2: "enc"}}}
    r = onnxport.to_onnx(model, kwargs=kwargs, dynamic_shapes=dims)
    names = [v.name for v in r.model.graph.outputs]
    assert names[:3] == ["logits", "present.0.decoder.key", "present.0.decoder.value"]
    assert "present.1.encoder.value" in names
    report = r.validate()
    assert report.ok, report
