"""A local ``save_pretrained`` directory exported by task, the way Optimum users export one
(``optimum-cli export onnx --model DIR --task TASK OUT``), with nothing downloaded.

``export_pretrained(directory, task)`` loads the directory's model for the task
(``onnxport.pretrained.load``), exports it (``onnxport.pretrained.tasks``: one model;
``onnxport.pretrained.decoder``: a decoder with its cache; ``onnxport.encoder_decoder``: an encoder
and a decoder with its cache), validates every model against eager PyTorch at other sizes and, for
a generation task, decodes greedily in onnxruntime against the model's own ``generate``. The
result is an ``ExportResult`` of ``parts``, saved as Optimum lays a directory out: ``model.onnx`` (or
``encoder_model.onnx`` and ``decoder_model.onnx``), the config, generation config and tokenizer
files copied beside, and for a decoder a ``genai_config.json`` for onnxruntime-genai
(``onnxport.pretrained.genai``), all of them its ``files``.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable

import torch

from onnxport.errors import ExportError
from onnxport.export import to_onnx
from onnxport.pretrained.fixed_cache import FIXED_CACHE_OPSET
from onnxport.pretrained.load import load_model, side_files
from onnxport.pretrained.tasks import TASKS, BATCH, DECODER_SEQ, ENCODER_SEQ, PAST_DECODER, EXAMPLE_BATCH, \
    EXAMPLE_SEQ, TaskOutputs, form_of, single_inputs, speech_features, text_inputs
from onnxport.result import ExportResult

GENAI_CONFIG = "genai_config.json"


def _preprocessor(directory: str) -> dict | None:
    path = os.path.join(directory, "preprocessor_config.json")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def _source(model: torch.nn.Module, batch: int, length: int, seed: int) -> dict:
    """Encoder inputs of the decoding check: a spectrogram, or token ids whose second row is 3
    tokens shorter (left padding)."""
    if getattr(model, "main_input_name", "input_ids") == "input_features":
        return {"input_features": speech_features(model, batch, torch.Generator().manual_seed(seed))}
    inputs, _ = text_inputs(model, batch, length, ENCODER_SEQ, seed=seed)
    inputs.pop("token_type_ids", None)
    if batch > 1:
        pad = model.generation_config.pad_token_id
        inputs["input_ids"][1, :3], inputs["attention_mask"][1, :3] = pad if pad is not None else 0, 0
    return inputs


def _left_padding_unsupported(result: Any) -> bool:
    """Whether the decoder ``result`` (an ``ExportResult``) computes a left-padded first prompt otherwise
    than eager by design: target ``genai-cpu`` with the rotary inside ``GroupQueryAttention``
    (``onnxport.targets.genai_cpu``), right for the prompts onnxruntime-genai feeds (padded on the right)."""
    from onnxport.targets.genai_cpu import ROTARY_INSIDE, genai_fusions

    return ROTARY_INSIDE in genai_fusions(result.model).get("rotary", "")


def export_pretrained(directory: str | os.PathLike, task: str | None = None, *, validate: bool = True,
                      generate: int = 16, on_step: Callable[[str, float], None] | None = None,
                      quantize: str | None = None, block_size: int = 32, **options: Any) -> ExportResult:
    """Export the model of a local ``save_pretrained`` directory for ``task``, validate it and,
    for a generation task, check its greedy decoding (see the module docstring).

    Args:
        directory: a directory holding ``config.json`` and the weights (``model.safetensors``...).
        task: one of ``TASKS``: ``feature-extraction``, ``text-classification``,
            ``image-classification``, ``automatic-speech-recognition`` (Whisper-like models as
            encoder + decoder with cache, CTC models as one model), ``text-generation-with-past``,
            ``text2text-generation-with-past``, ``image-text-to-text`` (Llava-like models as
            ``vision_model``, ``embedding_model`` and ``text_model`` with its cache,
            ``onnxport.pretrained.vision_language``); None: the task of ``config.architectures``.
        validate: compare every model with eager PyTorch at other sizes (``ExportResult.validate``).
        generate: tokens of the decoding checks of a generation task (batch 1, and batch 2 with a
            padded row); 0 skips them.
        on_step: called ``(step, seconds)`` as each step ends: ``load``, the steps of ``to_onnx``,
            ``quantize``, ``validate``, ``generate``.
        quantize: ``"int4"`` or ``"int8"``: the decoder of ``text-generation-with-past`` quantized
            (``onnxport.pretrained.quantized``): every ``MatMul`` with a weight, the ``lm_head``
            included, as ``MatMulNBits`` (int4, symmetric blocks of ``block_size``,
            ``accuracy_level=4``) or dynamic int8 (``MatMulInteger``, weights per channel); an embedding tied
            to the ``lm_head`` read from its int4 blocks (``GatherBlockQuantized``). Validation and
            the decoding checks then report accuracy against the float model (top-1 agreement and
            largest error of the logits, greedy-token agreement) with the tolerance they judge by.
        block_size: int4's block size (a power of 2, at least 16; default 32).
        options: further ``onnxport.to_onnx`` arguments (``opset``, ``optimize``...). ``opset=24``: a
            decoder with opset 24's fixed-buffer cache (``TensorScatter`` and ``Attention``,
            ``onnxport.pretrained.fixed_cache``), validated by steps against eager at other sizes
            (``onnxport.pretrained.fixed_cache_check``), written without ``genai_config.json``.

    Returns an ``ExportResult`` of ``parts`` (file stem -> the model's result, its ``validation``
    set when validated): ``model``, or ``encoder_model`` and ``decoder_model``, or the three parts of
    ``image-text-to-text``; with ``files`` (the source's config and tokenizer files,
    ``genai_config.json`` of a decoder), ``generation`` (each decoding check), ``task``, ``source``,
    ``.ok`` and ``.save(directory)``.

    Raises ``TargetError`` (no such directory, no config or weights, a task the model type does not
    serve, ``quantize`` for a task other than ``text-generation-with-past``), ``ExportError`` for an
    unknown ``quantize`` mode or block size, ``ValidationError`` when a check cannot run, and the errors of ``to_onnx``.
    """
    directory = os.fspath(directory)
    step = on_step or (lambda name, seconds: None)
    start = time.perf_counter()
    model, spec = load_model(directory, task)
    step("load", time.perf_counter() - start)
    form = form_of(spec, model)
    if options.get("opset") == FIXED_CACHE_OPSET and (form != "decoder" or quantize is not None):
        what = spec.name + (f" quantized {quantize}" if quantize else "")
        raise ExportError(f"opset {FIXED_CACHE_OPSET} is the fixed-buffer key/value cache of a decoder "
                          f"(text-generation-with-past, not quantized); this is {what}",
                          hint="export at opset 23 or lower (default 20)")
    if quantize is not None:
        from onnxport.pretrained.quantized import check_quantize

        check_quantize(quantize, block_size, form, spec.name)
    models: dict[str, ExportResult] = {}
    genai = pair = None
    if form == "single":
        inputs, dims = single_inputs(model, _preprocessor(directory))
        fields = spec.outputs
        models["model"] = to_onnx(TaskOutputs(model, fields).eval(), kwargs=inputs, dynamic_shapes=dims,
                                  output_names=list(fields), on_step=on_step, **options)
    elif form == "decoder":
        from onnxport.pretrained.decoder import export_decoder_with_cache
        from onnxport.pretrained.genai import genai_config

        if options.get("opset") == FIXED_CACHE_OPSET:  # the fixed-buffer cache (onnxport.pretrained.fixed_cache)
            from onnxport.pretrained.fixed_cache import export_fixed_cache_decoder as export_decoder_with_cache
        models["model"] = export_decoder_with_cache(model, on_step=on_step, **options)
        if quantize is not None:
            from onnxport.pretrained.quantized import quantize_decoder

            start = time.perf_counter()
            models["model"] = quantize_decoder(models["model"], quantize, block_size)
            step("quantize", time.perf_counter() - start)
        if options.get("opset") != FIXED_CACHE_OPSET:  # onnxruntime-genai would feed a growing cache to its buffers
            genai = genai_config(models["model"], model)
    elif form == "image-text-to-text":
        from onnxport.pretrained.vision_language import export_image_text_to_text

        models, generated = export_image_text_to_text(model, _preprocessor(directory), validate=validate,
                                                      generate=generate, on_step=on_step, **options)
        return ExportResult(None, parts=models, files={n: os.path.join(directory, n) for n in side_files(directory)},
                            generation=generated, task=spec.name, source=directory)
    else:
        from onnxport.encoder_decoder import export_encoder_decoder

        source = _source(model, EXAMPLE_BATCH, EXAMPLE_SEQ, seed=0)
        dims = {name: ({0: BATCH, 1: ENCODER_SEQ} if t.dim() == 2 else {0: BATCH}) for name, t in source.items()}
        pair = export_encoder_decoder(model, source, dynamic_shapes=dims, on_step=on_step, **options, dim_names={
            "batch": BATCH, "seq": DECODER_SEQ, "past": PAST_DECODER, "encoder_seq": ENCODER_SEQ})
        models["encoder_model"], models["decoder_model"] = pair.parts["encoder"], pair.parts["decoder"]

    if validate:
        start = time.perf_counter()
        if options.get("opset") == FIXED_CACHE_OPSET:  # inputs other than the eager call's: its own step check
            from onnxport.pretrained.fixed_cache_check import check_fixed_cache

            models = {stem: r.replace(validation=check_fixed_cache(r.model_proto, model)) for stem, r in models.items()}
        else:
            models = {stem: r.replace(validation=r.validate()) for stem, r in models.items()}
        step("validate", time.perf_counter() - start)
    generation: list = []
    if generate and form == "decoder":
        from onnxport.pretrained.decoder import prompts

        start = time.perf_counter()
        ids, mask = prompts(model)
        r = models["model"]
        generation.append(("batch 1", r.check_generation(model, ids[:1], max_new_tokens=generate)))
        if _left_padding_unsupported(r):  # as onnxruntime-genai feeds it: rows not left-padded
            ids[1, :2], mask[1, :2] = ids[0, :2], 1
            generation.append(("batch 2, prompts of one length",
                               r.check_generation(model, ids, attention_mask=mask, max_new_tokens=generate)))
        else:
            generation.append(("batch 2, the second prompt left-padded",
                               r.check_generation(model, ids, attention_mask=mask, max_new_tokens=generate)))
        step("generate", time.perf_counter() - start)
    elif generate and pair is not None:
        start = time.perf_counter()
        for batch in (1, 2):
            label = f"batch {batch}" + (", the second source left-padded" if batch > 1 and
                                        "attention_mask" in pair.parts["encoder"].example[1] else "")
            generation.append((label, pair.check_generation(model, _source(model, batch, 9, seed=batch),
                                                            max_new_tokens=generate)))
        step("generate", time.perf_counter() - start)
    files: dict[str, Any] = {name: os.path.join(directory, name) for name in side_files(directory)}
    if genai is not None:
        files[GENAI_CONFIG] = genai
    return ExportResult(None, parts=models, files=files, generation=tuple(generation), task=spec.name,
                        source=directory)


__all__ = ["GENAI_CONFIG", "TASKS", "export_pretrained"]
