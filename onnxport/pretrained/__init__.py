"""A local ``save_pretrained`` directory exported by task, the way Optimum users export one
(``optimum-cli export onnx --model DIR --task TASK OUT``), with nothing downloaded.

``export_pretrained(directory, task)`` loads the directory's model for the task
(``onnxport.pretrained.load``), exports it (``onnxport.pretrained.tasks``: one model;
``onnxport.pretrained.decoder``: a decoder with its cache; ``onnxport.encoder_decoder``: an encoder
and a decoder with its cache), validates every model against eager PyTorch at other sizes and, for
a generation task, decodes greedily in onnxruntime against the model's own ``generate``. The
result saves as Optimum lays a directory out: ``model.onnx`` (or ``encoder_model.onnx`` and
``decoder_model.onnx``), the config, generation config and tokenizer files copied beside, and for a
decoder a ``genai_config.json`` for onnxruntime-genai (``onnxport.pretrained.genai``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from typing import Any, Callable

import torch

from onnxport.errors import SaveError
from onnxport.export import to_onnx
from onnxport.pretrained.load import load_model, side_files
from onnxport.pretrained.tasks import TASKS, BATCH, DECODER_SEQ, ENCODER_SEQ, PAST_DECODER, EXAMPLE_BATCH, \
    EXAMPLE_SEQ, TaskOutputs, form_of, single_inputs, speech_features, text_inputs
from onnxport.result import ExportResult
from onnxport.saving import write_file

GENAI_CONFIG = "genai_config.json"


@dataclasses.dataclass(frozen=True)
class PretrainedExport:
    """The models of one directory exported for one task, with their checks.

    Attributes:
        task: the task (a ``TASKS`` key).
        source: the directory the model was loaded from.
        models: file stem -> ``ExportResult`` (``model``, or ``encoder_model`` and ``decoder_model``).
        validation: file stem -> ``ValidationReport`` (empty when not validated).
        generation: ``(label, GenerationReport)`` of each greedy decoding compared with ``generate``
            (empty for other tasks, or when not checked).
        genai_config: the ``genai_config.json`` contents of a decoder, or None.
        files: names of the source directory's config and tokenizer files, copied beside the models.
    """

    task: str
    source: str
    models: dict
    validation: dict = dataclasses.field(default_factory=dict)
    generation: tuple = ()
    genai_config: dict | None = None
    files: tuple = ()

    @property
    def ok(self) -> bool:
        """Every validation and every decoding check passed (True when none ran)."""
        return all(r.ok for r in self.validation.values()) and all(g.ok for _, g in self.generation)

    def save(self, directory: str | os.PathLike) -> list[str]:
        """Write the models (``<stem>.onnx``), ``genai_config.json`` for a decoder, and the source's
        config and tokenizer files into ``directory`` (created, with its parents); returns the
        paths written. Each file is replaced whole (``ExportResult.save``; the others through
        ``onnxport.saving.write_file``) and has the mode a plain ``open()`` gives a new file (0o666
        less the umask). Raises ``SaveError`` when ``directory`` is a file or cannot be written."""
        directory = os.fspath(directory)
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise SaveError(f"{directory} is a file: the output of export-hf is a directory")
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as e:
            raise SaveError(f"cannot create the directory {directory}: {e}") from e
        paths = [r.save(os.path.join(directory, f"{stem}.onnx")) for stem, r in self.models.items()]
        if self.genai_config is not None:
            paths.append(write_file(os.path.join(directory, GENAI_CONFIG),
                                    lambda f: f.write(json.dumps(self.genai_config, indent=4).encode())))
        for name in self.files:
            source = os.path.join(self.source, name)
            if os.path.abspath(source) != os.path.abspath(os.path.join(directory, name)):
                paths.append(write_file(os.path.join(directory, name), lambda f, s=source: _copy(s, f)))
        return paths

    def __str__(self) -> str:
        lines = [f"{self.task} from {self.source}"]
        for stem, r in self.models.items():
            lines.append(f"{stem}.onnx: {r!r}")
        for stem, report in self.validation.items():
            lines += [f"\nvalidation of {stem}.onnx:", str(report)]
        for label, report in self.generation:
            lines += [f"\ngreedy decoding, {label}:", str(report)]
        return "\n".join(lines)

    __repr__ = __str__


def _copy(source: str, f: Any) -> None:
    with open(source, "rb") as src:
        shutil.copyfileobj(src, f)


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


def export_pretrained(directory: str | os.PathLike, task: str | None = None, *, validate: bool = True,
                      generate: int = 16, on_step: Callable[[str, float], None] | None = None,
                      **options: Any) -> PretrainedExport:
    """Export the model of a local ``save_pretrained`` directory for ``task``, validate it and,
    for a generation task, check its greedy decoding (see the module docstring).

    Args:
        directory: a directory holding ``config.json`` and the weights (``model.safetensors``...).
        task: one of ``TASKS``: ``feature-extraction``, ``text-classification``,
            ``image-classification``, ``automatic-speech-recognition`` (Whisper-like models as
            encoder + decoder with cache, CTC models as one model), ``text-generation-with-past``,
            ``text2text-generation-with-past``; None: the task of ``config.architectures``.
        validate: compare every model with eager PyTorch at other sizes (``ExportResult.validate``).
        generate: tokens of the decoding checks of a generation task (batch 1, and batch 2 with a
            padded row); 0 skips them.
        on_step: called ``(step, seconds)`` as each step ends: ``load``, the steps of ``to_onnx``,
            ``validate``, ``generate``.
        options: further ``onnxport.to_onnx`` arguments (``opset``, ``optimize``...).

    Returns a ``PretrainedExport`` (``.models``, ``.validation``, ``.generation``, ``.ok``,
    ``.save(dir)``).

    Raises ``TargetError`` (no such directory, no config or weights, a task the model type does not
    serve), ``ValidationError`` when a check cannot run, and the errors of ``to_onnx``.
    """
    directory = os.fspath(directory)
    step = on_step or (lambda name, seconds: None)
    start = time.perf_counter()
    model, spec = load_model(directory, task)
    step("load", time.perf_counter() - start)
    form = form_of(spec, model)
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

        models["model"] = export_decoder_with_cache(model, on_step=on_step, **options)
        genai = genai_config(models["model"], model)
    else:
        from onnxport.encoder_decoder import export_encoder_decoder

        source = _source(model, EXAMPLE_BATCH, EXAMPLE_SEQ, seed=0)
        dims = {name: ({0: BATCH, 1: ENCODER_SEQ} if t.dim() == 2 else {0: BATCH}) for name, t in source.items()}
        pair = export_encoder_decoder(model, source, dynamic_shapes=dims, on_step=on_step, **options, dim_names={
            "batch": BATCH, "seq": DECODER_SEQ, "past": PAST_DECODER, "encoder_seq": ENCODER_SEQ})
        models["encoder_model"], models["decoder_model"] = pair.encoder, pair.decoder

    validation = {}
    if validate:
        start = time.perf_counter()
        validation = {stem: r.validate() for stem, r in models.items()}
        step("validate", time.perf_counter() - start)
    generation: list = []
    if generate and form == "decoder":
        from onnxport.pretrained.decoder import prompts

        start = time.perf_counter()
        ids, mask = prompts(model)
        r = models["model"]
        generation.append(("batch 1", r.check_generation(model, ids[:1], max_new_tokens=generate)))
        generation.append(("batch 2, the second prompt left-padded",
                           r.check_generation(model, ids, attention_mask=mask, max_new_tokens=generate)))
        step("generate", time.perf_counter() - start)
    elif generate and pair is not None:
        start = time.perf_counter()
        for batch in (1, 2):
            label = f"batch {batch}" + (", the second source left-padded" if batch > 1 and
                                        "attention_mask" in pair.encoder.example[1] else "")
            generation.append((label, pair.check_generation(model, _source(model, batch, 9, seed=batch),
                                                            max_new_tokens=generate)))
        step("generate", time.perf_counter() - start)
    return PretrainedExport(spec.name, directory, models, validation, tuple(generation), genai, side_files(directory))


__all__ = ["GENAI_CONFIG", "PretrainedExport", "TASKS", "export_pretrained"]
