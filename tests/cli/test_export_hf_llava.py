"""``onnxport export-hf`` on a tiny Llava written by ``save_pretrained`` (no hub access): the task
``image-text-to-text``, inferred from ``config.architectures``, writes the vision encoder, the
embedding merge and the decoder with its cache, each validated against eager PyTorch, and greedy
decoding chained through the three in onnxruntime matches ``generate``."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest

from onnxport.cli import main
from tests.models.test_hf_llava import tiny_llava

transformers = pytest.importorskip("transformers")


pytestmark = pytest.mark.usefixtures("offline")  # the hub offline, no connection (conftest.py)


@pytest.fixture
def llava(tmp_path):
    """A tiny Llava (CLIP vision tower, Llama text model, 32x32 images: 16 image tokens) saved by
    ``save_pretrained``, seeded."""
    path = tmp_path / "llava"
    tiny_llava().save_pretrained(path)
    return path


@pytest.mark.slow
def test_export_hf_image_text_to_text_writes_three_checked_parts(llava, tmp_path):
    out, report = tmp_path / "out", tmp_path / "report.json"
    assert main(["export-hf", str(llava), "-o", str(out), "--quiet", "--generate", "6", "--report", str(report)]) == 0
    data = json.loads(report.read_text())
    assert data["task"] == "image-text-to-text" and data["ok"]
    assert set(data["validation"]) == {"vision_model", "embedding_model", "text_model"}
    assert all(v["ok"] for v in data["validation"].values())
    assert [g["ok"] for g in data["generation"]] == [True, True]
    assert {p.name for p in out.iterdir()} >= {"vision_model.onnx", "embedding_model.onnx", "text_model.onnx",
                                              "config.json"}
    # the written parts chained by hand: images -> features -> embeddings of a prompt holding them
    vision = ort.InferenceSession(str(out / "vision_model.onnx"), providers=["CPUExecutionProvider"])
    merge = ort.InferenceSession(str(out / "embedding_model.onnx"), providers=["CPUExecutionProvider"])
    features = vision.run(None, {"pixel_values": np.random.default_rng(0).standard_normal((3, 3, 32, 32),
                                                                                       dtype=np.float32)})[0]
    assert features.shape == (48, 64)
    ids = np.full((3, 20), 7, dtype=np.int64)
    ids[:, 2:18] = 3
    embeds = merge.run(None, {"input_ids": ids, "image_features": features})[0]
    np.testing.assert_array_equal(embeds[:, 2:18].reshape(48, 64), features)
