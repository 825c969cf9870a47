"""Shared pieces of the RETURNN tests: the configs in ``returnn_configs/``, RETURNN-style checkpoints
with seeded random weights, onnxruntime on an exported model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("returnn", reason="RETURNN tests need the returnn extra: pip install 'onnxport[returnn]'")
pytest.importorskip("tree", reason="RETURNN tests need dm-tree (the returnn extra)")

from onnxport.integrations.returnn_config import load_returnn_config  # noqa: E402
from onnxport.integrations.returnn_export import build_returnn_model  # noqa: E402
from onnxport.verify import OrtRunner  # noqa: E402

CONFIGS = Path(__file__).parent / "returnn_configs"
CONFORMER = CONFIGS / "conformer.py"
DEMO_RF = CONFIGS / "demo_rf.py"
DEMO_TORCH = CONFIGS / "demo_torch.py"


def save_checkpoint(config: Path, path: Path, seed: int, epoch: int = 3, step: int = 120) -> dict:
    """A checkpoint as RETURNN's torch engine saves it (``{"model", "epoch", "step"}``), of the config's
    model with weights seeded by ``seed``; returns its state dict."""
    rc = load_returnn_config(config)
    module = build_returnn_model(rc, seed=seed)
    state = {k: v.detach().clone() for k, v in module.model.state_dict().items()}
    torch.save({"model": state, "epoch": epoch, "step": step}, path)
    return state


def run_onnx(model, inputs: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Outputs of an ONNX model (a saved file's path or a ModelProto) on ``inputs``, by output name."""
    runner = OrtRunner(str(model) if isinstance(model, Path) else model)
    return dict(zip(runner.output_names, runner.run([inputs[n] for n in runner.input_names])))
