"""The tasks ``export_pretrained`` exports, what each exports, and the example inputs of a model.

Each task is one auto class of transformers (the model class a directory is loaded with) and one
form of export:

* ``single``: one model, ``model.onnx``, whose outputs are the task's fields of the model's output
  (``last_hidden_state``, ``logits``);
* ``decoder``: a decoder taking and returning its key/value cache (``onnxport.pretrained.decoder``);
* ``encoder-decoder``: the encoder (with the cross-attention cache) and the decoder-with-cache
  (``onnxport.encoder_decoder``);
* ``image-text-to-text``: the vision encoder, the embedding merge and the decoder-with-cache taking
  embeddings (``onnxport.pretrained.vision_language``).

Dims are named as Optimum and onnxruntime-genai name them: ``batch_size``, ``sequence_length``,
``past_sequence_length``, ``total_sequence_length`` (a decoder's attention mask), and for an
encoder-decoder ``encoder_sequence_length``, ``decoder_sequence_length``,
``past_decoder_sequence_length``. An image's size and a spectrogram's length stay the config's
(vision transformers and Whisper take no other).

Sources: Optimum's ``optimum.exporters.onnx`` (task names, ``OnnxConfig.inputs``/``outputs`` dims),
onnxruntime-genai's model builder (decoder input and output names and dims).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import torch

BATCH, SEQ, PAST, TOTAL = "batch_size", "sequence_length", "past_sequence_length", "total_sequence_length"
ENCODER_SEQ, DECODER_SEQ, PAST_DECODER = "encoder_sequence_length", "decoder_sequence_length", \
    "past_decoder_sequence_length"
EXAMPLE_BATCH, EXAMPLE_SEQ = 2, 7
DEFAULT_IMAGE_SIZE = 224


@dataclasses.dataclass(frozen=True)
class Task:
    """One task: its name, the auto classes tried in order, its form of export (``single``,
    ``decoder``, ``encoder-decoder``) and, for ``single``, the output fields exported."""

    name: str
    auto_classes: tuple[str, ...]
    form: str
    outputs: tuple[str, ...] = ()


TASKS = {t.name: t for t in (
    Task("feature-extraction", ("AutoModel",), "single", ("last_hidden_state",)),
    Task("text-classification", ("AutoModelForSequenceClassification",), "single", ("logits",)),
    Task("image-classification", ("AutoModelForImageClassification",), "single", ("logits",)),
    # speech-to-text encoder-decoders (Whisper) first, then CTC models (wav2vec2) as one model
    Task("automatic-speech-recognition", ("AutoModelForSpeechSeq2Seq", "AutoModelForCTC"), "encoder-decoder",
         ("logits",)),
    Task("text-generation-with-past", ("AutoModelForCausalLM",), "decoder"),
    Task("text2text-generation-with-past", ("AutoModelForSeq2SeqLM",), "encoder-decoder"),
    Task("image-text-to-text", ("AutoModelForImageTextToText",), "image-text-to-text"),
)}


def form_of(task: Task, model: torch.nn.Module) -> str:
    """The form of export of ``task`` for ``model``: a CTC model of the speech task is ``single``."""
    if task.form == "encoder-decoder" and not getattr(model.config, "is_encoder_decoder", False):
        return "single"
    return task.form


def parameters(model: torch.nn.Module) -> set[str]:
    """The names of ``model.forward``'s parameters."""
    return set(inspect.signature(model.forward).parameters)


def token_ids(vocab: int, shape: tuple[int, ...], avoid: set, generator: torch.Generator) -> torch.Tensor:
    """int64 token ids of ``shape`` drawn from ``[0, vocab)`` without the ids in ``avoid`` (the
    special tokens: padding, start and end of sequence)."""
    allowed = torch.tensor([i for i in range(min(vocab, 4096)) if i not in avoid] or [0])
    return allowed[torch.randint(0, len(allowed), shape, generator=generator)]


def special_ids(model: torch.nn.Module) -> set[int]:
    """The padding, start and end-of-sequence ids of the model's config and generation config."""
    out = set()
    for source in (model.config, getattr(model, "generation_config", None)):
        for key in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
            value = getattr(source, key, None)
            out |= set(value) if isinstance(value, (list, tuple)) else {value} if isinstance(value, int) else set()
    return out


def vocab_size(model: torch.nn.Module) -> int:
    """The vocabulary of the model's (decoder's) text config."""
    config = model.config
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    return int(getattr(text, "vocab_size", None) or config.vocab_size)


def image_size(config: Any, preprocessor: dict | None = None) -> tuple[int, int]:
    """``(height, width)`` of the model's images: the config's ``image_size``, else the
    preprocessor's crop or resize size, else ``DEFAULT_IMAGE_SIZE``."""
    size = getattr(config, "image_size", None)
    if isinstance(size, int):
        return size, size
    if isinstance(size, (list, tuple)) and len(size) == 2:
        return int(size[0]), int(size[1])
    for key in ("crop_size", "size"):
        value = (preprocessor or {}).get(key)
        if isinstance(value, int):
            return value, value
        if isinstance(value, dict):
            if "height" in value and "width" in value:
                return int(value["height"]), int(value["width"])
            if "shortest_edge" in value:
                return int(value["shortest_edge"]), int(value["shortest_edge"])
    return DEFAULT_IMAGE_SIZE, DEFAULT_IMAGE_SIZE


def text_inputs(model: torch.nn.Module, batch: int, seq: int, seq_name: str, seed: int = 0) -> tuple[dict, dict]:
    """``(inputs, dynamic_shapes)`` of a text model: ``input_ids`` and ``attention_mask``
    ``[batch_size, seq_name]`` (and ``token_type_ids`` when ``forward`` takes them)."""
    gen = torch.Generator().manual_seed(seed)
    ids = token_ids(vocab_size(model), (batch, seq), special_ids(model), gen)
    inputs = {"input_ids": ids, "attention_mask": torch.ones(batch, seq, dtype=torch.int64)}
    if "token_type_ids" in parameters(model):
        inputs["token_type_ids"] = torch.zeros(batch, seq, dtype=torch.int64)
    return inputs, {name: {0: BATCH, 1: seq_name} for name in inputs}


def single_inputs(model: torch.nn.Module, preprocessor: dict | None = None) -> tuple[dict, dict]:
    """``(inputs, dynamic_shapes)`` of a one-model task, by the model's main input:

    * ``input_ids``: token ids, mask (and token types) ``[batch_size, sequence_length]``;
    * ``pixel_values``: float ``[batch_size, num_channels, height, width]``, the image size the
      config's (``image_size``);
    * ``input_values``: a waveform ``[batch_size, sequence_length]`` (CTC speech models);
    * ``input_features``: a spectrogram ``[batch_size, ...]`` of the config's size.
    """
    name = getattr(model, "main_input_name", "input_ids")
    gen = torch.Generator().manual_seed(0)
    config = model.config
    if name == "pixel_values":
        h, w = image_size(config, preprocessor)
        channels = int(getattr(config, "num_channels", 3) or 3)
        return {name: torch.randn(EXAMPLE_BATCH, channels, h, w, generator=gen)}, {name: {0: BATCH}}
    if name == "input_values":
        return ({name: torch.randn(EXAMPLE_BATCH, 1600, generator=gen)}, {name: {0: BATCH, 1: SEQ}})
    if name == "input_features":
        features = speech_features(model, EXAMPLE_BATCH, gen)
        return {name: features}, {name: {0: BATCH}}
    return text_inputs(model, EXAMPLE_BATCH, EXAMPLE_SEQ, SEQ)


def speech_features(model: torch.nn.Module, batch: int, generator: torch.Generator) -> torch.Tensor:
    """A float spectrogram ``[batch, mel_bins, frames]`` of the length the encoder takes (Whisper:
    twice ``max_source_positions``)."""
    config = model.config
    bins = int(getattr(config, "num_mel_bins", 80))
    frames = 2 * int(getattr(config, "max_source_positions", 1500))
    return torch.randn(batch, bins, frames, generator=generator)


class TaskOutputs(torch.nn.Module):
    """The model, returning only the task's output fields by name (``{"logits": ...}``), with
    its cache off."""

    def __init__(self, model: torch.nn.Module, fields: tuple[str, ...]):
        super().__init__()
        self.model = model
        self.fields = fields
        self.use_cache = "use_cache" in parameters(model)

    def forward(self, **inputs: Any) -> dict:
        """``{field: tensor}`` of the model's output on ``inputs``."""
        extra = {"use_cache": False} if self.use_cache else {}
        out = self.model(**inputs, **extra, return_dict=True)
        return {name: out[name] for name in self.fields}
