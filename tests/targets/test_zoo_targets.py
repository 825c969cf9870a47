"""Representative zoo models on ``target="portable"`` and ``target="openvino"``, run in OpenVINO against
eager PyTorch at the example and at another size: a CNN (convolutions, batch norm, pooling), the packed
LSTM tagger (``pack_padded_sequence`` from lengths: OpenVINO's LSTM ignores ``sequence_lens``, so only
``target="openvino"`` is right there), tiny BERT with a padding mask, and a per-step ``torch.cond``
inside a scan (``If`` inside ``Scan``). ``benchmarks/targets.py`` runs the whole zoo on every target
and runtime (``benchmarks/TARGETS.md``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

import onnxport

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _benchmark_models():
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    name = "_bench_models"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / "models.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules[name]


def _case(name: str):
    case = _benchmark_models().MODELS[name]()
    if name == "small_cnn":  # no other input set of its own: another batch, height and width
        case.others = [(torch.randn(1, 3, 20, 28, generator=torch.Generator().manual_seed(1)),)]
    return case


CASES = ["small_cnn", "lstm_packed_tagger", "bert", "cond_in_scan"]


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_zoo_model_is_right_in_openvino(name, openvino):
    case = _case(name)
    for target in ("portable", "openvino"):
        result = onnxport.to_onnx(case.model, case.args, dynamic_shapes=case.dynamic_shapes, target=target,
                                  **case.onnxport_kwargs)
        assert result.target == target
        report = result.validate(inputs=case.others[:1], sizes=[], values=[], runtime="openvino")
        assert report.runtime.startswith("OpenVINO")
        assert {c.inputs for c in report.checks} == {"example", "inputs 1"}
        # another size: some dynamic dimension differs from the example
        assert any(a.shape != b.shape for a, b in zip(case.args, case.others[0]) if isinstance(a, torch.Tensor))
        if target == "portable" and name == "lstm_packed_tagger":
            # OpenVINO runs sequence_lens as if every sequence had the full length: the portable model is wrong there
            assert not report.ok, report
            assert "FAILED in OpenVINO" in str(report)
        else:
            assert report.ok, f"{target}: {report}"
