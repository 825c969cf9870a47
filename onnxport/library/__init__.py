"""What onnxport knows of other libraries and models: one module per library or model family.

torch's own submodules (``torch_nn``: ``nn.TransformerEncoder``'s fast path; ``torch_distributions``),
``torchvision/`` (its detection models and ``batched_nms``) and ``transformers/`` (one module per model
family, or per form of code several families share). A module here registers the capture patches
its library needs where it defines them, ``register(Patch(..., when=..., order=...))``
(``capture/patches.py``: when a trace installs it, and where among the others); nothing lists them
elsewhere. An op a library defines is translated under its qualified name in ``translate/ops/``
(``"torchvision::nms.default"``), which never imports the library either. Supporting a model is one
new module here and its test under ``tests/library/``.

A module here never imports its library when it is imported (onnxport does not depend on them): it
reads the library's modules from ``sys.modules`` when a patch is installed, and changes nothing
where they are not loaded. Importing onnxport imports every module of this package (below).
"""

import importlib
import pkgutil

for _info in pkgutil.walk_packages(__path__, f"{__name__}."):
    importlib.import_module(_info.name)
