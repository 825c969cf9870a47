"""A decoder exported with its cache, quantized for onnxruntime-genai on CPU.

Every ``MatMul`` with a weight is quantized, the ``lm_head`` included (``final_projection=False``):

- ``int4``: ``MatMulNBits`` with symmetric blocks of ``block_size`` input rows and
  ``accuracy_level=4`` (the activations quantized to int8 per block on the fly: onnxruntime's
  fastest CPU kernels), the form onnxruntime-genai's model builder writes for CPU; an embedding
  tied to the ``lm_head`` is read from the ``lm_head``'s int4 blocks (``GatherBlockQuantized``,
  ``onnxport.quantize.tied``), the table stored once;
- ``int8``: onnxruntime's dynamic quantization (``DynamicQuantizeLinear`` + ``MatMulInteger``,
  which onnxruntime fuses into ``DynamicQuantizeMatMul`` when it loads the model): weights int8 per
  output channel, activations per tensor at run time; a tied embedding keeps its float ``Gather``.
  Not the builder's weight-only ``MatMulNBits`` with ``bits=8``: on the projections of a 0.5B
  decoder, one thread, that form is 1.12x slower per decoding step and 7.7x slower on a 64-token
  prompt, for 0.6x the error (``benchmarks/INT8_FORMS.md``, ``benchmarks/int8_forms.py``).

The arithmetic is ``onnxport.quantize``'s; the accuracy checks are the quantized result's
``validate()`` and ``check_generation`` (``onnxport.verify.accuracy``), against eager PyTorch's
float model: ``logits`` are token scores, judged by top-1 agreement (a tied ``lm_head`` reads its
weight through a ``Transpose``, which the float graph's own reading does not take for a
projection), the cache by cosine similarity, greedy decoding by token agreement. Reference:
onnxruntime-genai's ``src/python/py/models/builder.py`` (``int4``, ``int4_accuracy_level=4`` on CPU,
``int4_tied_embeddings``).
"""

from __future__ import annotations

from onnxport.errors import ExportError, TargetError
from onnxport.result import ExportResult

QUANTIZE_MODES = ("int4", "int8")
ACCURACY_LEVEL = 4


def check_quantize(mode: str, block_size: int, form: str, task: str) -> None:
    """Refuse, before anything is exported, a mode other than ``QUANTIZE_MODES``, an int4 block
    size that is not a power of 2 of at least 16 (``ExportError``) or a task whose export is not a
    decoder (``TargetError``)."""
    if mode not in QUANTIZE_MODES:
        raise ExportError(f"unknown quantization {mode!r} for export-hf", hint=f"use {' or '.join(QUANTIZE_MODES)}")
    if block_size < 16 or block_size & (block_size - 1):
        raise ExportError(f"int4 block size {block_size} is not a power of 2 of at least 16",
                          hint="use 16, 32, 64 or 128")
    if form != "decoder":
        raise TargetError(f"quantization of export-hf serves decoders (text-generation-with-past), not {task}",
                          hint="export without --quantize, then quantize the model with onnxport.quantize")


def quantize_decoder(result: ExportResult, mode: str, block_size: int = 32) -> ExportResult:
    """``result`` (a decoder with its cache, ``onnxport.pretrained.decoder``) quantized in
    ``mode`` (``"int4"``, ``"int8"``; module docstring). Raises ``ExportError`` as
    ``onnxport.quantize.quantize`` does."""
    return result.quantize(mode, final_projection=False, shared_embedding=True, block_size=block_size,
                           accuracy_level=ACCURACY_LEVEL, kinds={"logits": "classes"})
