"""A small CNN trained for a few seconds on synthetic shapes (``benchmarks/trained.py``), exported
with a dynamic batch, quantized in each mode, and judged against eager PyTorch's float model on 256
held-out images: top-1 agreement (the default tolerance 0.99) and the largest error of the scores.

    python examples/quantize_cnn.py
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import onnxport  # noqa: E402
from trained import shapes_cnn, shapes_data  # noqa: E402

torch.manual_seed(0)
model = shapes_cnn()
images, labels = shapes_data(512, seed=7)
result = onnxport.to_onnx(model, (images[:8],), dynamic_shapes={"x": {0: "batch"}})
for mode in ("int8", "int8-static", "int4"):
    calibration = [(images[i:i + 32],) for i in range(256, 512, 32)] if mode == "int8-static" else None
    quantized = result.quantize(mode, calibration_inputs=calibration)
    report = quantized.validate(inputs=[(images[:256],)], sizes=[{"batch": 1}, {"batch": 32}])
    print(report, end="\n\n")
