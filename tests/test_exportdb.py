"""torch's own export examples (ExportDB, ``torch._export.db.examples.all_examples()``) as a test
source: every example whose support level is SUPPORTED is exported with onnxport as given (static),
and, where it has ``dynamic_shapes``, with them; each export runs in onnxruntime against eager
PyTorch at the example and, with dynamic shapes, at other sizes of each dynamic dim (validation's
default sets: below and above the example, at least two other sizes each).

Out of scope, because torch.export itself does not support them (``SupportLevel.NOT_SUPPORTED_YET``):

* ``dynamic_shape_round``: ``x[: round(x.shape[0] / 2)]``: Python's ``round`` of a size divided by
  2 is a float torch.export cannot keep symbolic; it fails with "Constraints violated (dim0_x)"
  (the guard ``round(x.shape[0] / 2) <= x.shape[0]`` over the declared range).

Any other example that torch lists as not supported is skipped the same way, by its level.
"""

from __future__ import annotations

import copy

import pytest
import torch

from exportcheck import check_export

pytestmark = pytest.mark.slow  # 35 exports, each validated at every default set

try:
    from torch._export.db.case import SupportLevel
    from torch._export.db.examples import all_examples

    EXAMPLES = dict(sorted(all_examples().items()))
except Exception:  # noqa: BLE001 - a torch without ExportDB's examples
    EXAMPLES = {}

# example name -> why onnxport's export fails it, a fix owed elsewhere (each xfail strict)
XFAIL: dict[str, str] = {}


def _cases():
    for name, case in EXAMPLES.items():
        supported = case.support_level == SupportLevel.SUPPORTED
        for dynamic in ([False, True] if case.dynamic_shapes else [False]):
            marks = [pytest.mark.skip(reason="torch.export does not support it (NOT_SUPPORTED_YET)")] \
                if not supported else []
            if name in XFAIL:
                marks.append(pytest.mark.xfail(reason=XFAIL[name], strict=True))
            yield pytest.param(name, dynamic, marks=marks, id=f"{name}-{'dynamic' if dynamic else 'static'}")


@pytest.mark.parametrize("name,dynamic", list(_cases()))
def test_exportdb_example(name, dynamic):
    case = EXAMPLES[name]
    model = copy.deepcopy(case.model)  # some examples change their module's attributes when run
    args, kwargs = copy.deepcopy((case.example_args, case.example_kwargs))
    model = model.eval() if isinstance(model, torch.nn.Module) else model
    check_export(model, args, case.dynamic_shapes if dynamic else None, kwargs=kwargs or None)


def test_every_supported_example_is_exported():
    """The examples torch lists (36 in torch 2.13): all but those torch.export does not support run above."""
    if not EXAMPLES:
        pytest.skip("this torch ships no ExportDB examples")
    supported = [n for n, c in EXAMPLES.items() if c.support_level == SupportLevel.SUPPORTED]
    assert len(supported) >= 30 and not set(XFAIL) - set(supported)
