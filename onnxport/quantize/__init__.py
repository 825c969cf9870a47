"""Quantization: a stage after finalize. It takes a finished ``ExportResult`` and returns another,
complete when built, whose model computes in int8 or int4 where onnxport's graph says it may.

onnxport's part is choosing what to quantize from the graph it built (``choose``: embeddings, the
final projection and the user's list stay in float) and measuring what quantization did to the
results (``onnxport.verify.accuracy``, through ``result.validate()`` and ``check_generation``); the
arithmetic is onnxruntime.quantization's (``ort``).
"""

from __future__ import annotations

from typing import Any

import onnx
import onnx_ir as ir

from onnxport.errors import ExportError
from onnxport.metadata import QUANTIZATION_KEY
from onnxport.quantize import calibration, ort, tied
from onnxport.quantize.choose import WeightNode, output_kinds, weight_nodes
from onnxport.quantize.info import MODES, AccuracyTolerance, Quantization

__all__ = ["MODES", "AccuracyTolerance", "Quantization", "WeightNode", "quantize", "weight_nodes"]


def quantize(result, mode: str, *, keep_float: list[str] | tuple[str, ...] = (), embeddings: bool = True,
             final_projection: bool = True, calibration_inputs: Any = None, block_size: int = 32,
             accuracy_level: int = 4, tolerance: AccuracyTolerance | None = None,
             kinds: dict[str, str] | None = None, shared_embedding: bool = False):
    """A new ``ExportResult`` whose model is ``result``'s quantized; ``result`` is left as it is.

    Args:
        result: a finished float ``ExportResult``.
        mode: ``"int8"``: dynamic quantization, weights int8 per output channel, activations
            quantized at run time (``MatMul`` -> ``DynamicQuantizeMatMul``);
            ``"int8-static"``: QDQ (``QuantizeLinear``/``DequantizeLinear`` around ``MatMul`` and
            ``Conv``), activations uint8 with ranges calibrated on ``calibration_inputs`` or on 8
            sets generated like the example, weights int8 per channel;
            ``"int4"``: weight-only, ``MatMul`` -> ``MatMulNBits`` with symmetric blocks of
            ``block_size`` input rows, activations in float.
        keep_float: initializer-name prefixes (``"lm_head"``, ``"encoder.layer.0."``) or node names
            kept in float, beside the embeddings and the final projection.
        embeddings, final_projection: keep those in float (default True).
        calibration_inputs: int8-static's input sets (each ``(args, kwargs)``, an args tuple or a
            tensor), default generated.
        block_size: int4's block size (a power of 2, at least 16; default 32).
        accuracy_level: int4's ``MatMulNBits`` compute: 4 quantizes the activations to int8 per
            block on the fly (fastest on CPUs), 0 computes in float.
        tolerance: what ``validate()`` and ``check_generation`` judge the quantized model by
            (default ``AccuracyTolerance()``: top-1 0.99, cosine 0.99, greedy tokens 0.99).
        kinds: output name -> ``"classes"`` (top-1 agreement) or ``"hidden"`` (cosine similarity),
            where the float graph's own reading (``choose.output_kinds``: scores computed directly by
            a projection are classes) is not wanted.
        shared_embedding: quantize too the output projection tied to the token embedding (a
            ``MatMul`` reading the embedding table through a ``Transpose``; ``quantize.tied``), which
            ``embeddings`` would keep in float: in int4 the embedding ``Gather`` then reads the
            projection's int4 blocks (``GatherBlockQuantized``), the table stored once; in the int8
            modes the projection quantizes a transposed copy and the ``Gather`` keeps the float table
            (no int8 gather reads a ``DynamicQuantizeMatMul``'s weight layout).

    Raises:
        ExportError: an unknown mode, a block size that is not a power of 2 >= 16, a result already
            quantized, a model with nothing left to quantize, or onnxruntime's quantizer failing.
    """
    if mode not in MODES:
        raise ExportError(f"unknown quantization mode {mode!r}", hint=f"choose one of {', '.join(MODES)}")
    if getattr(result, "quantization", None) is not None:
        raise ExportError(f"the model is already quantized ({result.quantization.mode})",
                          hint="quantize the float result (the one to_onnx returned)")
    if mode == "int4" and (block_size < 16 or block_size & (block_size - 1)):
        raise ExportError(f"int4 block size {block_size} is not a power of 2 of at least 16",
                          hint="use 16, 32, 64 or 128")
    if any(k not in ("classes", "hidden") for k in (kinds or {}).values()):
        raise ExportError(f"output kinds must be 'classes' or 'hidden', got {kinds}",
                          hint='e.g. kinds={"logits": "classes"}')
    copied = onnx.ModelProto()
    copied.CopyFrom(result.model_proto)  # onnx-ir reads tensors from the proto it is given: quantize a copy
    model = ir.serde.deserialize_model(copied)
    ties = tied.untie(model) if shared_embedding else {}
    # the untied projections are quantized unless final_projection or the user's list keeps them
    nodes = weight_nodes(model, list(keep_float), embeddings=embeddings and not ties,
                         final_projection=final_projection)
    chosen = {n.node for n in nodes if not n.kept and (mode == "int8-static" or n.op_type != "Conv")}
    if not chosen:
        raise ExportError(f"nothing to quantize in {mode}: the model has no "
                          f"MatMul/Gemm{'/Conv' if mode == 'int8-static' else ''} weight outside the layers kept "
                          "in float",
                          hint="check keep_float, or pass final_projection=False / embeddings=False")
    nodes = [n if n.node in chosen or n.kept else WeightNode(n.node, n.op_type, n.weight, f"not quantized in {mode}")
             for n in nodes]
    chosen = ort.unfuse_gemms(model, chosen)
    proto = ir.serde.serialize_model(model)
    described = ""
    try:
        if mode == "int8":
            quantized = ort.dynamic_int8(proto, sorted(chosen))
        elif mode == "int8-static":
            sets, described = calibration.input_sets(result, calibration_inputs)
            names = [v.name for v in proto.graph.input]
            reader = calibration.Reader([calibration.feeds(names, s) for s in sets])
            quantized = ort.static_int8(proto, sorted(chosen), reader)
        else:
            quantized = ort.nbits(proto, sorted(chosen), block_size, accuracy_level)
    except ExportError:
        raise
    except Exception as e:  # noqa: BLE001 - onnxruntime's quantizer failing is reported with its words
        raise ExportError(f"onnxruntime's {mode} quantization failed: "
                          f"{type(e).__name__}: {str(e).splitlines()[0][:200]}",
                          hint="keep the failing layer in float with keep_float=[...]", detail=str(e)) from e
    shared = tied.share_embedding(quantized, ties, block_size) if mode == "int4" and ties else []
    quantized.producer_name = result.model_proto.producer_name
    quantized.producer_version = result.model_proto.producer_version
    out = ir.serde.deserialize_model(quantized)
    out.metadata_props[QUANTIZATION_KEY] = mode
    read = {**output_kinds(result.model), **(kinds or {})}  # on the float graph; the user's word wins
    info = Quantization(mode, tuple(nodes), tolerance or AccuracyTolerance(), block_size if mode == "int4" else 0,
                        described, tuple(sorted(read.items())), tuple(shared))
    return result.replace(model=out, quantization=info, validation=None)
