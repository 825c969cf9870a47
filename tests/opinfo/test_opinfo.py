"""PyTorch's OpInfo database through onnxport, the way onnxscript's torch_lib is checked.

For every OpInfo (``op_db``), at float32 and int64 where the op supports them, the first sample
becomes a tiny module calling ``op.op(input, *args, **kwargs)`` (``opinfo_harness.py``), exported
with static shapes, run in onnxruntime and compared with eager PyTorch. Rules:

* no op gives a wrong result;
* no op fails with anything but an ``onnxport.ExportError`` (an onnxruntime refusal of the model
  is a failure too);
* an op refused with an ExportError must be in ``EXPECTED_UNSUPPORTED`` with the reason, and an
  op of that list that exports right fails the test, so the list stays honest;
* an op none of whose samples runs must be in ``NOT_RUN`` with the reason, and one of that list
  that runs fails the test.

One sample per op and dtype keeps the whole run near 3 minutes with ``pytest -n 2``; the
benchmark takes more (``--samples``).

``benchmarks/opinfo_sweep.py`` runs the same cases with torch.onnx.export beside onnxport.
"""

from __future__ import annotations

import pytest
import torch

import opinfo_harness as h
from expected_unsupported import EXPECTED_UNSUPPORTED, NOT_IN_EVERY_RELEASE, NOT_RUN, TOLERANCES

SAMPLES = 1  # samples per op and dtype

_OPS = {h.op_id(op): op for op in h.op_db()}
CASES = [pytest.param(name, dtype, id=f"{name}-{dtype}") for name, op in _OPS.items() for dtype in h.op_dtypes(op)]


def _expected(name: str, dtype: str) -> str | None:
    entry = EXPECTED_UNSUPPORTED.get(name)
    if entry is None:
        return None
    reason, dtypes = entry if isinstance(entry, tuple) else (entry, None)
    return reason if dtypes is None or dtype in dtypes else None


@pytest.mark.parametrize("name,dtype", CASES)
def test_opinfo(name, dtype):
    torch.manual_seed(0)
    op = _OPS[name]
    atol, rtol = TOLERANCES.get(name, (None, None))
    outcomes = [(case, h.run_onnxport(case, shape_only=name in h.RANDOM, atol=atol, rtol=rtol,
                                      skip=h.TIE_INDICES.get(name, ())))
                for case in h.cases(op, dtype, SAMPLES)]
    if not outcomes:
        assert name in NOT_RUN, (f"{name} {dtype}: no sample runs (eager PyTorch refuses them, they are too large "
                                 "or take complex tensors); add it to NOT_RUN with the reason")
        pytest.skip(NOT_RUN[name])
    assert name not in NOT_RUN, f"{name} {dtype} runs now: remove it from NOT_RUN (listed as: {NOT_RUN[name]})"
    for case, outcome in outcomes:
        assert outcome.status not in ("wrong", "crash"), \
            f"{name} {dtype} ({case.text}): {outcome.status}: {outcome.detail}"
    refused = [(case, o) for case, o in outcomes if o.status == "unsupported"]
    reason = _expected(name, dtype)
    if refused:
        case, outcome = refused[0]
        assert reason is not None, (f"{name} {dtype} ({case.text}) is refused and not in EXPECTED_UNSUPPORTED: "
                                    f"{outcome.detail}")
    else:
        assert reason is None, (f"{name} {dtype} exports right now: remove it from EXPECTED_UNSUPPORTED "
                                f"(listed as: {reason})")


def test_listed_names_exist():
    for listing, names in (("EXPECTED_UNSUPPORTED", EXPECTED_UNSUPPORTED), ("NOT_RUN", NOT_RUN),
                           ("TOLERANCES", TOLERANCES)):
        unknown = sorted(set(names) - set(_OPS) - NOT_IN_EVERY_RELEASE)
        assert not unknown, f"{listing} names ops that op_db does not have: {unknown}"
