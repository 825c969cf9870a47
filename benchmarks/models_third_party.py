"""Benchmark models built from third-party packages' own classes, seeded random weights, nothing
downloaded: torchvision and timm classifiers (a ViT with dynamic image size among them), torchvision's detectors
(where its compiled ops load), transformers' RT-DETR, RT-DETRv2 and DETR with its post-processing,
segmentation-models-pytorch's Unet and FPN, a transformers CLIPModel, Hugging Face wav2vec2, T5, Phi and a Llama
decoder with its key/value cache as inputs, speech toolkits' models (``tests/speech_zoo.py``: torchaudio,
SpeechBrain, ESPnet) and diffusers' conditional UNet and VAE decoder. A factory raises ``ImportError`` when its
package is absent (``compare.py`` and ``third_party.py`` skip the model with a note)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.export import Dim

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from case import Case  # noqa: E402
from third_party import import_timm, import_torchvision  # noqa: E402

TORCHVISION = import_torchvision()  # before transformers imports it
TIMM = import_timm()

VOCAB, WIDTH, LAYERS, HEADS, FF = 1000, 64, 2, 4, 128


# ------------------------------------------------------------------------------------ torchvision
def _torchvision(name: str):
    torchvision = TORCHVISION
    if torchvision is None:
        raise ImportError("torchvision is not installed")
    torch.manual_seed(0)
    return _image_case(getattr(torchvision.models, name)().eval(), (57, 80), (97, 64))


def _image_case(model: torch.nn.Module, other: tuple, another: tuple):
    """An image classifier on a 2x3x64x64 batch, dynamic batch, height and width; the other input
    sets at batch 1 and 3 with images of ``other`` and ``another`` (height, width)."""
    gen = torch.Generator().manual_seed(0)
    return Case(model, (torch.randn(2, 3, 64, 64, generator=gen),), {"x": {0: "batch", 2: "height", 3: "width"}},
                   [(torch.randn(1, 3, *other, generator=gen),), (torch.randn(3, 3, *another, generator=gen),)])


def resnet18():
    """torchvision resnet18, dynamic batch, height and width."""
    return _torchvision("resnet18")


def mobilenet_v3_small():
    """torchvision mobilenet_v3_small, dynamic batch, height and width."""
    return _torchvision("mobilenet_v3_small")


def efficientnet_b0():
    """torchvision efficientnet_b0, dynamic batch, height and width."""
    return _torchvision("efficientnet_b0")


def _timm(name: str):
    if TIMM is None:
        raise ImportError("timm is not installed")
    torch.manual_seed(0)
    return _image_case(TIMM.create_model(name, pretrained=False, num_classes=10).eval(), (40, 72), (96, 64))


def timm_efficientvit_b0():
    """timm efficientvit_b0 (attention under torch.autocast(enabled=False)), dynamic batch, height, width."""
    return _timm("efficientvit_b0")


def timm_convnext_atto():
    """timm convnext_atto (patchify stem, depthwise 7x7 convolutions), dynamic batch, height, width."""
    return _timm("convnext_atto")


# ------------------------------------------------------------------------------------ torchvision detectors
def _detector(name: str):
    """A torchvision detector of ``tests/detectors.py`` (seeded weights spreading its scores) on a
    96x128 image, dynamic height and width; the other images 64x80 and 128x96; the detection count
    named ``num_detections``. Its compiled ops (nms, roi_align) must load beside this torch."""
    from third_party import torchvision_ops_load

    if not torchvision_ops_load():
        raise ImportError("torchvision's compiled ops (nms, roi_align) do not load beside this torch build")
    from detectors import detector, image

    example = image(96, 128, 0)
    return Case(detector(name, example), (example,), {"images": {2: "height", 3: "width"}},
                   [(image(64, 80, 1),), (image(128, 96, 2),)],
                   onnxport_kwargs={"output_dims": {"output_0": {0: "num_detections"}}})


def ssdlite320_mobilenet_v3_large():
    """torchvision ssdlite320_mobilenet_v3_large, dynamic image height and width."""
    return _detector("ssdlite320_mobilenet_v3_large")


def fasterrcnn_mobilenet_v3_large_320_fpn():
    """torchvision fasterrcnn_mobilenet_v3_large_320_fpn, dynamic image height and width."""
    return _detector("fasterrcnn_mobilenet_v3_large_320_fpn")


def fasterrcnn_resnet18_fpn():
    """torchvision FasterRCNN on a resnet18 FPN backbone, dynamic image height and width."""
    return _detector("fasterrcnn_resnet18_fpn")


def retinanet_resnet18_fpn():
    """torchvision RetinaNet on a resnet18 FPN backbone (P6, P7), dynamic image height and width."""
    return _detector("retinanet_resnet18_fpn")


def fcos_resnet18_fpn():
    """torchvision FCOS on a resnet18 FPN backbone (P6, P7), dynamic image height and width."""
    return _detector("fcos_resnet18_fpn")


def maskrcnn_resnet18_fpn():
    """torchvision MaskRCNN on a resnet18 FPN backbone, masks pasted into the image, dynamic height and width."""
    return _detector("maskrcnn_resnet18_fpn")


def keypointrcnn_resnet18_fpn():
    """torchvision KeypointRCNN on a resnet18 FPN backbone, dynamic image height and width."""
    return _detector("keypointrcnn_resnet18_fpn")


# ------------------------------------------------------------------------------------ transformers' detectors
def _rt_detr(version: int):
    """RT-DETR (``version`` 1 or 2) of ``tests/detectors.py`` (tiny config, ResNet backbone from its config,
    spread scores) on two 96x128 images, dynamic batch, height and width; the other inputs one 64x64
    image and three 160x96 ones. Outputs: logits and boxes of the 20 queries."""
    from detectors import image, rt_detr

    example = torch.cat([image(96, 128, 0), image(96, 128, 5)])
    return Case(rt_detr(version, example[:1]), (example,), {"pixel_values": {0: "batch", 2: "height", 3: "width"}},
                   [(image(64, 64, 1),), (torch.cat([image(160, 96, seed) for seed in (2, 3, 4)]),)])


def rt_detr():
    """transformers RTDetrForObjectDetection (tiny config), dynamic batch, image height and width."""
    return _rt_detr(1)


def rt_detr_v2():
    """transformers RTDetrV2ForObjectDetection (tiny config), dynamic batch, image height and width."""
    return _rt_detr(2)


def detr_post_processing():
    """transformers DetrForObjectDetection (tiny config) with its image processor's
    post_process_object_detection in the forward (score threshold 0.5): a 96x128 image, dynamic height and
    width, the other images 64x64 and 160x96; the detection count named ``num_detections``."""
    from detectors import DetrDetections, detr, image

    example = image(96, 128, 0)
    return Case(DetrDetections(detr(example), threshold=0.5).eval(), (example,),
                   {"pixel_values": {2: "height", 3: "width"}}, [(image(64, 64, 1),), (image(160, 96, 2),)],
                   onnxport_kwargs={"output_dims": {f"output_{i}": {0: "num_detections"} for i in range(3)}})


# ------------------------------------------------------------------------------------ Hugging Face
class _Field(torch.nn.Module):
    """A Hugging Face model called with keyword inputs, returning one field of its output."""

    def __init__(self, model: torch.nn.Module, names: tuple[str, ...], field: str):
        super().__init__()
        self.model, self.names, self.field = model, names, field

    def forward(self, *inputs):
        return getattr(self.model(**dict(zip(self.names, inputs))), self.field)


class Wav2Vec2(_Field):
    def forward(self, input_values):
        return super().forward(input_values)


def wav2vec2():
    """Tiny Wav2Vec2Model (conv feature encoder, 2 layers, width 64) on raw audio, dynamic batch and
    samples; last_hidden_state."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.Wav2Vec2Config(hidden_size=WIDTH, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                      intermediate_size=FF, conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3),
                                      num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                                      do_stable_layer_norm=True, feat_extract_norm="layer")
    model = Wav2Vec2(transformers.Wav2Vec2Model(cfg), ("input_values",), "last_hidden_state").eval()
    gen = torch.Generator().manual_seed(0)
    return Case(model, (torch.randn(2, 1600, generator=gen),), {"input_values": {0: "batch", 1: "samples"}},
                   [(torch.randn(3, 2400, generator=gen),), (torch.randn(1, 997, generator=gen),)])


class Seq2Seq(_Field):
    def forward(self, input_ids, attention_mask, decoder_input_ids):
        return super().forward(input_ids, attention_mask, decoder_input_ids)


def t5():
    """Tiny T5ForConditionalGeneration, encoder-decoder forward: logits of decoder_input_ids given the
    source; dynamic batch, source and target lengths."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.T5Config(vocab_size=VOCAB, d_model=WIDTH, d_kv=16, d_ff=FF, num_layers=LAYERS,
                                num_decoder_layers=LAYERS, num_heads=HEADS, decoder_start_token_id=0)
    model = Seq2Seq(transformers.T5ForConditionalGeneration(cfg), ("input_ids", "attention_mask", "decoder_input_ids"),
                    "logits").eval()
    gen = torch.Generator().manual_seed(0)

    def inputs(batch, src, tgt):
        mask = torch.ones(batch, src, dtype=torch.int64)
        mask[0, src - 2:] = 0
        return (torch.randint(0, VOCAB, (batch, src), generator=gen), mask,
                torch.randint(0, VOCAB, (batch, tgt), generator=gen))

    dims = {"input_ids": {0: "batch", 1: "source"}, "attention_mask": {0: "batch", 1: "source"},
            "decoder_input_ids": {0: "batch", 1: "target"}}
    return Case(model, inputs(2, 9, 5), dims, [inputs(3, 13, 7), inputs(1, 4, 2)])


class CausalLM(_Field):
    def forward(self, input_ids, attention_mask):
        return super().forward(input_ids, attention_mask)


def phi():
    """Tiny PhiForCausalLM (2 layers, width 64, partial rotary), logits."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.PhiConfig(vocab_size=VOCAB, hidden_size=WIDTH, intermediate_size=FF, num_hidden_layers=LAYERS,
                                 num_attention_heads=HEADS, max_position_embeddings=128, pad_token_id=0)
    model = CausalLM(transformers.PhiForCausalLM(cfg), ("input_ids", "attention_mask"), "logits").eval()
    gen = torch.Generator().manual_seed(0)

    def inputs(batch, seq):
        mask = torch.ones(batch, seq, dtype=torch.int64)
        mask[-1, seq - 3:] = 0
        return torch.randint(0, VOCAB, (batch, seq), generator=gen), mask

    seq = Dim("seq", max=128)
    return Case(model, inputs(2, 9), {"input_ids": {0: "batch", 1: seq}, "attention_mask": {0: "batch", 1: seq}},
                   [inputs(3, 17), inputs(1, 4)])


class CachedDecoder(torch.nn.Module):
    """One decoding step of a causal LM with its key/value cache as inputs and outputs: the cache
    comes in as one key and one value tensor per layer ``[batch, kv_heads, past, head_dim]`` and
    goes out with the step appended (``past + seq``)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, past_keys, past_values):
        from transformers import DynamicCache

        cache = DynamicCache()
        for layer, (k, v) in enumerate(zip(past_keys, past_values)):
            cache.update(k, v, layer)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
        present = out.past_key_values
        keys = tuple(present.layers[i].keys for i in range(len(past_keys)))
        values = tuple(present.layers[i].values for i in range(len(past_keys)))
        return out.logits, keys, values


def llama_cache():
    """Tiny LlamaForCausalLM (2 layers, 4 heads, 2 key/value heads) decoding with its cache as
    inputs: input_ids [batch, seq], attention_mask [batch, past + seq], past keys/values per layer."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=WIDTH, intermediate_size=FF, num_hidden_layers=LAYERS,
                                   num_attention_heads=HEADS, num_key_value_heads=2, max_position_embeddings=128,
                                   pad_token_id=0)
    model = CachedDecoder(transformers.LlamaForCausalLM(cfg)).eval()
    gen = torch.Generator().manual_seed(0)
    head = WIDTH // HEADS

    def inputs(batch, past, seq):
        ids = torch.randint(0, VOCAB, (batch, seq), generator=gen)
        mask = torch.ones(batch, past + seq, dtype=torch.int64)
        kv = tuple(torch.randn(batch, 2, past, head, generator=gen) for _ in range(LAYERS))
        return ids, mask, kv, tuple(t.clone() for t in kv)

    past_dim = {0: "batch", 2: "past"}
    dims = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
            "past_keys": (past_dim,) * LAYERS, "past_values": (past_dim,) * LAYERS}
    relations = {"relations": {"total": "past + seq"}}  # the mask covers the cached and the new steps
    return Case(model, inputs(2, 5, 3), dims, [inputs(3, 9, 1), inputs(1, 2, 4)], relations)


# ------------------------------------------------------------------------------------ segmentation (smp)
def _vision_package(name: str):
    """A package installed beside torchvision (``<venv>/vision-packages``), imported; ``ImportError`` when absent."""
    import importlib
    import importlib.util

    if TORCHVISION is None or importlib.util.find_spec(name) is None:
        raise ImportError(f"{name} is not installed (bash setup.sh installs it beside torchvision)")
    return importlib.import_module(name)


def _segmentation(architecture: str):
    """segmentation-models-pytorch ``architecture`` on a resnet18 encoder (random weights, 3 classes) on two
    64x96 images, dynamic batch, height and width (the encoder's stride: multiples of 32); the other input
    sets one 96x64 image and three 128x160 ones."""
    smp = _vision_package("segmentation_models_pytorch")
    torch.manual_seed(0)
    model = getattr(smp, architecture)(encoder_name="resnet18", encoder_weights=None, classes=3).eval()
    gen = torch.Generator().manual_seed(0)
    return Case(model, (torch.randn(2, 3, 64, 96, generator=gen),), {"x": {0: "batch", 2: "height", 3: "width"}},
                [(torch.randn(1, 3, 96, 64, generator=gen),), (torch.randn(3, 3, 128, 160, generator=gen),)])


def smp_unet():
    """segmentation-models-pytorch Unet (resnet18 encoder), dynamic batch, height and width."""
    return _segmentation("Unet")


def smp_fpn():
    """segmentation-models-pytorch FPN (resnet18 encoder), dynamic batch, height and width."""
    return _segmentation("FPN")


# ------------------------------------------------------------------------------------ CLIP
class Clip(torch.nn.Module):
    """CLIPModel on token ids and images: logits_per_image [images, texts], text_embeds, image_embeds."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, pixel_values):
        out = self.model(input_ids=input_ids, pixel_values=pixel_values)
        return out.logits_per_image, out.text_embeds, out.image_embeds


def clip():
    """Tiny transformers CLIPModel (text and vision towers of 2 layers, width 64, 32x32 images, 8x8 patches):
    input_ids [texts, seq] and pixel_values [images, 3, 32, 32], the text count, the text length (up to 32)
    and the image count dynamic, each on its own."""
    import transformers

    torch.manual_seed(0)
    tower = dict(hidden_size=WIDTH, intermediate_size=FF, num_hidden_layers=LAYERS, num_attention_heads=HEADS)
    cfg = transformers.CLIPConfig(text_config=dict(vocab_size=VOCAB, max_position_embeddings=32, pad_token_id=0,
                                                                   bos_token_id=1, eos_token_id=2, **tower),
                                  vision_config=dict(image_size=32, patch_size=8, **tower), projection_dim=32)
    model = Clip(transformers.CLIPModel(cfg)).eval()
    gen = torch.Generator().manual_seed(0)

    def inputs(texts, seq, images):
        return (torch.randint(0, VOCAB, (texts, seq), generator=gen), torch.randn(images, 3, 32, 32, generator=gen))

    dims = {"input_ids": {0: "texts", 1: Dim("seq", max=32)}, "pixel_values": {0: "images"}}
    return Case(model, inputs(3, 7, 2), dims, [inputs(2, 12, 4), inputs(5, 3, 1)])


# ------------------------------------------------------------------------------------ speech toolkits
def _speech(name: str):
    """Case ``name`` of ``tests/speech_zoo.py`` (torchaudio, SpeechBrain, ESPnet from ``<venv>/speech-packages``):
    batch and time dynamic, lengths as inputs where the model takes them, its two other input sets."""
    import pytest

    try:
        import speech_zoo

        made = speech_zoo.build(name)
    except pytest.skip.Exception as e:  # the toolkit is not installed
        raise ImportError(str(e)) from None
    return Case(made.model, made.args, made.dynamic_shapes, made.others)


def torchaudio_wav2vec2():
    """torchaudio wav2vec2_model (group-norm extractor, 2 layers, CTC head): waveforms, lengths; batch, samples."""
    return _speech("torchaudio_wav2vec2")


def torchaudio_conformer():
    """torchaudio Conformer (2 layers, d 32): features [B, T, 40], lengths; dynamic batch and time."""
    return _speech("torchaudio_conformer")


def speechbrain_ecapa_tdnn():
    """SpeechBrain ECAPA-TDNN (channels 32): features [B, T, 40], relative lengths; dynamic batch and time."""
    return _speech("speechbrain_ecapa_tdnn")


def espnet_conformer():
    """ESPnet Conformer encoder (conv2d subsampling, relative positions): xs_pad [B, T, 40], ilens."""
    return _speech("espnet_conformer")


# ------------------------------------------------------------------------------------ diffusers
class Denoiser(torch.nn.Module):
    """A conditional UNet's noise prediction as one tensor."""

    def __init__(self, unet: torch.nn.Module):
        super().__init__()
        self.unet = unet

    def forward(self, sample, timestep, encoder_hidden_states):
        return self.unet(sample, timestep, encoder_hidden_states, return_dict=False)[0]


def diffusers_unet():
    """Tiny diffusers UNet2DConditionModel (blocks of 32 and 64 channels, one cross-attention block): latents
    [B, 4, H, W], timesteps [B], text states [B, text, 32]; batch, latent height and width, text length dynamic."""
    diffusers = _vision_package("diffusers")
    torch.manual_seed(0)
    unet = diffusers.UNet2DConditionModel(
        sample_size=32, in_channels=4, out_channels=4, block_out_channels=(32, 64), layers_per_block=1,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32, attention_head_dim=8, norm_num_groups=8)
    gen = torch.Generator().manual_seed(0)

    def inputs(batch, height, width, text):
        return (torch.randn(batch, 4, height, width, generator=gen), torch.rand(batch, generator=gen) * 1000,
                torch.randn(batch, text, 32, generator=gen))

    dims = {"sample": {0: "batch", 2: "height", 3: "width"}, "timestep": {0: "batch"},
            "encoder_hidden_states": {0: "batch", 1: "text"}}
    return Case(Denoiser(unet).eval(), inputs(2, 32, 32, 7), dims, [inputs(1, 40, 48, 5), inputs(3, 24, 16, 9)])


class VaeDecoder(torch.nn.Module):
    """An AutoencoderKL's decode: latents to images."""

    def __init__(self, vae: torch.nn.Module):
        super().__init__()
        self.vae = vae

    def forward(self, latents):
        return self.vae.decode(latents, return_dict=False)[0]


def diffusers_vae_decoder():
    """Tiny diffusers AutoencoderKL decoder (blocks of 32 and 64 channels, mid-block attention): latents
    [B, 4, h, w] to images [B, 3, 2h, 2w]; batch, height and width dynamic."""
    diffusers = _vision_package("diffusers")
    torch.manual_seed(0)
    vae = diffusers.AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                                  up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(32, 64),
                                  layers_per_block=1, latent_channels=4, norm_num_groups=8)
    gen = torch.Generator().manual_seed(0)
    return Case(VaeDecoder(vae).eval(), (torch.randn(2, 4, 16, 16, generator=gen),),
                {"latents": {0: "batch", 2: "height", 3: "width"}},
                [(torch.randn(1, 4, 24, 12, generator=gen),), (torch.randn(3, 4, 9, 20, generator=gen),)])


# ------------------------------------------------------------------------------------ timm ViT
def timm_vit_tiny():
    """timm vit_tiny_patch16_224 at 64x64 with dynamic_img_size (position embeddings resampled to the grid),
    dynamic batch, height and width (multiples of the 16-pixel patch)."""
    if TIMM is None:
        raise ImportError("timm is not installed")
    torch.manual_seed(0)
    model = TIMM.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=10, img_size=64,
                              dynamic_img_size=True).eval()
    return _image_case(model, (48, 96), (80, 32))


THIRD_PARTY = {
    "resnet18": resnet18,
    "mobilenet_v3_small": mobilenet_v3_small,
    "efficientnet_b0": efficientnet_b0,
    "timm_efficientvit_b0": timm_efficientvit_b0,
    "timm_convnext_atto": timm_convnext_atto,
    "ssdlite320_mobilenet_v3_large": ssdlite320_mobilenet_v3_large,
    "fasterrcnn_mobilenet_v3_large_320_fpn": fasterrcnn_mobilenet_v3_large_320_fpn,
    "fasterrcnn_resnet18_fpn": fasterrcnn_resnet18_fpn,
    "retinanet_resnet18_fpn": retinanet_resnet18_fpn,
    "fcos_resnet18_fpn": fcos_resnet18_fpn,
    "maskrcnn_resnet18_fpn": maskrcnn_resnet18_fpn,
    "keypointrcnn_resnet18_fpn": keypointrcnn_resnet18_fpn,
    "rt_detr": rt_detr,
    "rt_detr_v2": rt_detr_v2,
    "detr_post_processing": detr_post_processing,
    "wav2vec2": wav2vec2,
    "t5": t5,
    "phi": phi,
    "llama_cache": llama_cache,
    "timm_vit_tiny": timm_vit_tiny,
    "smp_unet": smp_unet,
    "smp_fpn": smp_fpn,
    "clip": clip,
    "torchaudio_wav2vec2": torchaudio_wav2vec2,
    "torchaudio_conformer": torchaudio_conformer,
    "speechbrain_ecapa_tdnn": speechbrain_ecapa_tdnn,
    "espnet_conformer": espnet_conformer,
    "diffusers_unet": diffusers_unet,
    "diffusers_vae_decoder": diffusers_vae_decoder,
}
