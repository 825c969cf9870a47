"""Verification: the exported model run in onnxruntime against eager PyTorch, on the example and
on other sizes of every dynamic dimension and on values the example does not reach, and the first
divergence between the two.

``validate`` (``verify.validate``) compares, each output judged by ``verify.judge``: float32
outputs against eager PyTorch run in float64 (``verify.reference``, ``verify.float64_bound``);
``make_inputs`` / ``InputSpec`` (``capture.inputs``,
shared with capture's probes and config exports) make the inputs; ``validation_sizes``
(``verify.sizes``) chooses the sizes; ``find_divergence`` (``verify.divergence``) locates the first
differing node; ``check_generation`` (``verify.generation``) compares greedy decoding in
onnxruntime with the model's ``generate``.
"""

from onnxport.capture.inputs import VALUE_KINDS, InputSpec, make_inputs
from onnxport.verify.compare import TOLERANCES, compare, to_numpy
from onnxport.verify.generation import GenerationReport, check_generation
from onnxport.verify.report import Check, ValidationReport
from onnxport.verify.runner import OrtRunner
from onnxport.verify.sizes import respecting, validation_sizes
from onnxport.verify.eager import output_leaves
from onnxport.verify.validate import default_size_sets, default_sizes, tensor_leaves, validate

__all__ = ["Check", "GenerationReport", "InputSpec", "OrtRunner", "TOLERANCES", "VALUE_KINDS", "ValidationReport",
           "check_generation", "compare", "default_size_sets", "default_sizes", "make_inputs", "output_leaves",
           "respecting", "tensor_leaves", "to_numpy", "validate", "validation_sizes"]
