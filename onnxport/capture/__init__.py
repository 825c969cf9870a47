"""Capture: the model traced by torch.export, its dynamic dimensions checked, its shape guards
decided, the ops without a translation decomposed.

Hands forward a ``Captured`` (``capture.captured``). Nothing here imports a later stage: the
translation registry's capture hooks come in as an argument. Importing the package imports each
of its modules, so that each registers its capture patches (``capture.patches.register``).
"""

import importlib
import pkgutil

from onnxport.capture.captured import Captured, UserInput
from onnxport.capture.decompose import decompose
from onnxport.capture.trace import capture

for _info in pkgutil.walk_packages(__path__, f"{__name__}."):
    importlib.import_module(_info.name)

__all__ = ["Captured", "UserInput", "capture", "decompose"]
