"""The runtimes validation runs an exported model on, behind one interface (``input_names``,
``output_names``, ``run(tensors) -> list[np.ndarray]``, ``label``):

* ``"onnxruntime"``: ``verify.runner.OrtRunner`` (CPU provider);
* ``"openvino"``: OpenVINO's CPU plugin with float32 precision forced (``INFERENCE_PRECISION_HINT:
  f32``; its CPU default on machines with bfloat16 units is bf16), an optional extra
  (``pip install onnxport[openvino]``);
* ``"reference"``: ``onnx.reference.ReferenceEvaluator``, the ONNX specification's own Python
  implementation (slow; small models and sizes).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import torch

from onnxport.errors import ValidationError
from onnxport.verify.compare import to_numpy

RUNTIMES = ("onnxruntime", "openvino", "reference")


def openvino_available() -> bool:
    """Whether the ``openvino`` package imports."""
    try:
        import openvino  # noqa: F401
    except ImportError:
        return False
    return True


def runtime_runner(runtime: str, source: Any):
    """The runner of ``runtime`` over ``source`` (an ``onnx.ModelProto`` or the path of a saved
    model). Raises ``ValidationError`` for an unknown runtime, OpenVINO not installed, or a model
    the runtime cannot load (its words, the runtime named)."""
    if runtime not in RUNTIMES:
        raise ValidationError(f"runtime {runtime!r} is not one validation runs on", hint=f"choose one of {RUNTIMES}")
    if runtime == "onnxruntime":
        from onnxport.verify.runner import OrtRunner

        return OrtRunner(source)
    if runtime == "openvino":
        return OpenVinoRunner(source)
    return ReferenceRunner(source)


def _proto_names(source: Any) -> tuple[list[str], list[str]]:
    import onnx

    graph = (onnx.load(source, load_external_data=False) if isinstance(source, str) else source).graph
    initializers = {t.name for t in graph.initializer}
    return [v.name for v in graph.input if v.name not in initializers], [v.name for v in graph.output]


class OpenVinoRunner:
    """A model compiled by OpenVINO for its CPU plugin in float32 (``INFERENCE_PRECISION_HINT: f32``)."""

    def __init__(self, source: Any):
        try:
            import openvino as ov
        except ImportError as e:
            raise ValidationError("validation on OpenVINO needs the openvino package, which is not installed",
                                  hint="pip install onnxport[openvino] (or validate(runtime='onnxruntime'))") from e
        self.label = f"OpenVINO {ov.__version__.split('-')[0]}"
        self.input_names, self.output_names = _proto_names(source)
        core = ov.Core()
        try:
            model = core.read_model(source if isinstance(source, str) else io.BytesIO(source.SerializeToString()))
            self.compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        except Exception as e:  # noqa: BLE001 - OpenVINO raises RuntimeError / OpConversionFailure
            raise ValidationError(f"{self.label} could not load the model: {openvino_reason(str(e))}",
                                  hint="export with target='portable' or target='openvino' (onnxport.targets)") from e
        self.request = self.compiled.create_infer_request()

    def run(self, tensors: list[torch.Tensor]) -> list[np.ndarray]:
        feeds = {n: to_numpy(t) for n, t in zip(self.input_names, tensors)}
        results = self.request.infer(feeds)
        return [np.array(results[out]) for out in self.compiled.outputs]


def openvino_reason(text: str) -> str:
    """What an OpenVINO error says failed (its operator lines), without its source locations and
    its pointers to documentation."""
    skip = ("Exception from", "Check '", "FrontEnd API failed", "Model wasn't fully", "Failed operations", "Summary:",
            "To facilitate")
    kept = [line.strip().lstrip("- ").strip() for line in text.splitlines()
            if line.strip() and not line.startswith(skip)]
    return "; ".join(kept)[:400] or text.splitlines()[0][:400]


class ReferenceRunner:
    """``onnx.reference.ReferenceEvaluator`` over the model (the ONNX specification in NumPy)."""

    def __init__(self, source: Any):
        from onnx.reference import ReferenceEvaluator

        self.label = "the ONNX reference evaluator"
        self.input_names, self.output_names = _proto_names(source)
        try:
            self.session = ReferenceEvaluator(source)
        except Exception as e:  # noqa: BLE001
            raise ValidationError(f"{self.label} could not load the model: {str(e).splitlines()[0][:300]}",
                                  hint="the model uses an operator or form onnx.reference does not implement") from e

    def run(self, tensors: list[torch.Tensor]) -> list[np.ndarray]:
        feeds = {n: to_numpy(t) for n, t in zip(self.input_names, tensors)}
        return [np.asarray(v) for v in self.session.run(None, feeds)]
