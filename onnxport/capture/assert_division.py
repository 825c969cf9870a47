"""A size divided by a size in torch.export's runtime asserts (a capture patch every trace installs,
and the whole-program decomposition too).

torch.export writes each deferred runtime assert into the graph by interpreting its sympy condition
with ``torch.utils._sympy.reference.PythonReferenceAnalysis``, whose handlers build FX nodes from
Python operators. That class lacks the handler of an int's true division (``IntTrueDiv``): it
inherits ``ReferenceAnalysis.int_truediv``, which builds a sympy ``IntTrueDiv`` of FX proxies and
fails (``symbolically traced variables cannot be used as inputs to control flow``). A model that
divides a number by a size (torchvision's detection transform resizes by ``min_size / min(h, w)``)
then cannot be captured. ``ASSERTED_DIVISION`` gives the class Python's true division
(``operator.truediv``), the handler its float division already has; a torch whose class defines
``int_truediv`` itself is left unchanged.

Semantics: ``torch/utils/_sympy/reference.py``, ``torch/fx/passes/runtime_assert.py``.
"""

from __future__ import annotations

import operator

from onnxport.capture.patches import Patch, SetAttribute, always, register


def _asserted_division_changes() -> list:
    from torch.utils._sympy.reference import PythonReferenceAnalysis

    if "int_truediv" in vars(PythonReferenceAnalysis):  # a torch that writes it as Python division itself
        return []
    return [SetAttribute(PythonReferenceAnalysis, "int_truediv", lambda original: staticmethod(operator.truediv))]


ASSERTED_DIVISION = register(Patch(
    "true division in runtime asserts", _asserted_division_changes,
    "torch.utils._sympy.reference.PythonReferenceAnalysis.int_truediv: torch.export writes a deferred runtime "
    "assert into the graph through this class, which lacks the Python form of an int's true division (its parent "
    "builds a sympy IntTrueDiv of FX proxies and fails: 'symbolically traced variables cannot be used as inputs to "
    "control flow'), so an assert on a size divided by a size (torchvision's resize by min_size / min(h, w)) is "
    "written as operator.truediv, as its float division already is", when=always, order=11))
