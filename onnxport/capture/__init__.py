"""Capture: the model traced by torch.export, its dynamic dimensions checked, its shape guards
decided, the ops without a translation decomposed.

Hands forward a ``Captured`` (``capture.captured``). Nothing here imports a later stage: the
translation registry's capture hooks come in as an argument.
"""

from onnxport.capture.captured import Captured, UserInput
from onnxport.capture.decompose import decompose
from onnxport.capture.trace import capture

__all__ = ["Captured", "UserInput", "capture", "decompose"]
