"""onnxport: export PyTorch models to ONNX, keeping dynamic dimensions and control flow.

One door per job, each returning an ``ExportResult``: ``to_onnx`` (a module), ``export_target`` (a
model target with a config, ``--input`` declarations or its ``example_inputs()``: ``onnxport export``),
``export_pretrained`` (a ``save_pretrained`` directory, encoder-decoders as ``parts``: ``onnxport
export-hf``), ``export_returnn_config`` (a RETURNN config: ``onnxport export-returnn``). ``observe(model)`` records
calls of a model and gives ``to_onnx`` its example and dynamic shapes.
"""

from onnxport.errors import (
    CaptureError,
    CaptureTimeoutError,
    CheckpointError,
    ConfigError,
    ContractError,
    ControlFlowError,
    DataDependentError,
    DynamicShapesError,
    ExportError,
    NegativeSizeError,
    RenderError,
    ReturnnError,
    RewriteError,
    RuntimeTargetError,
    SaveError,
    ShowInputError,
    SpecializationError,
    TargetError,
    TranslationError,
    UnsupportedOpError,
    ValidationError,
)
from onnxport.export import to_onnx
from onnxport.config.export import export_from_config, export_target  # noqa: F401 - export_from_config: deprecated
from onnxport.integrations.returnn_export import export_returnn_config
from onnxport.observation import Observed, observe
from onnxport.pretrained import export_pretrained
from onnxport.quantize import AccuracyTolerance
from onnxport.result import ExportResult
from onnxport.translate.registry import Registry
from onnxport.translate.registry import user_translates as translates
from onnxport.verify import ValidationReport, validate
from onnxport.verify.stream import StreamReport, check_stream
from onnxport import library  # noqa: F401 - every library's capture patches registered (onnxport/library/)

__version__ = "0.1.0"


def find_divergence(model, onnx_model, inputs, **kwargs):
    """First FX node / ONNX node pair whose values differ; see ``onnxport.verify.divergence.find_divergence``."""
    from onnxport.verify.divergence import find_divergence as impl

    return impl(model, onnx_model, inputs, **kwargs)


def export_encoder_decoder(model, encoder_inputs, **kwargs):
    """Deprecated: export the model's ``save_pretrained`` directory with ``export_pretrained(directory,
    task=...)``, whose result holds the encoder and the decoder as ``parts``. Warns with a
    ``DeprecationWarning``, then exports as ``onnxport.encoder_decoder.export_encoder_decoder`` (an
    ``ExportResult`` of parts ``encoder`` and ``decoder``); raises as it does."""
    import warnings

    from onnxport.encoder_decoder import export_encoder_decoder as impl

    warnings.warn("onnxport.export_encoder_decoder(model, ...) is deprecated: save the model with "
                  "model.save_pretrained(directory) and use onnxport.export_pretrained(directory, task=...) "
                  "(the encoder and decoder are result.parts)", DeprecationWarning, stacklevel=2)
    return impl(model, encoder_inputs, **kwargs)


def pretty_onnx(model, **kwargs):
    """Compact text rendering of an ONNX model; see ``onnxport.show.pretty.pretty_onnx``."""
    from onnxport.show.pretty import pretty_onnx as impl

    return impl(model, **kwargs)


def plot_dot(model, **kwargs):
    """Graphviz DOT text of an ONNX model; see ``onnxport.show.dot.plot_dot``."""
    from onnxport.show.dot import plot_dot as impl

    return impl(model, **kwargs)


__all__ = [
    "AccuracyTolerance", "CaptureError", "CaptureTimeoutError", "CheckpointError", "ConfigError", "ContractError",
    "ControlFlowError",
    "DataDependentError", "DynamicShapesError", "ExportError", "ExportResult", "Registry", "RenderError",
    "ReturnnError",
    "NegativeSizeError", "RewriteError", "RuntimeTargetError", "SaveError", "ShowInputError",
    "SpecializationError", "TargetError", "TranslationError", "UnsupportedOpError", "ValidationError",
    "StreamReport", "ValidationReport", "check_stream", "export_pretrained", "export_returnn_config", "export_target",
    "find_divergence", "observe", "Observed", "plot_dot", "pretty_onnx", "to_onnx", "translates", "validate",
]
