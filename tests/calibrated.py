"""Image classifiers from torchvision and timm, built by their packages' own constructors (seeded
random weights, nothing downloaded), with BatchNorm statistics calibrated on example batches as a
trained model has them: with the raw initialisation (running mean 0, variance 1) the activations
of deep stacks shrink or grow layer by layer and the logits say nothing.

Usable as an ``onnxport`` target too: ``calibrated.py:build`` with ``--model-arg name='resnet18'``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from third_party import import_timm, import_torchvision  # noqa: E402

# model name -> the classifier's bias as the ONNX model names its initializer
CLASSIFIERS = {"resnet18": "fc.bias", "mobilenet_v3_small": "classifier.3.bias",
               "efficientnet_b0": "classifier.1.bias", "convnext_atto": "head.fc.bias"}
SHAPE = (2, 3, 32, 32)  # the example batch: small images keep validation fast


def calibrate(model: torch.nn.Module, shape: tuple = SHAPE, batches: int = 3, seed: int = 1) -> torch.nn.Module:
    """``model`` with each BatchNorm's running statistics the average of ``batches`` standard
    normal batches of ``shape`` (train-mode forward passes, cumulative average, one thread), in
    eval mode."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the batches
    gen = torch.Generator().manual_seed(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same statistics, bit for bit, in every process (the CLI's reference too)
    model.train()
    try:
        with torch.no_grad():
            for _ in range(batches):
                model(torch.randn(shape, generator=gen))
    finally:
        torch.set_num_threads(threads)
    return model.eval()


def build(name: str = "resnet18") -> torch.nn.Module:
    """The calibrated classifier ``name`` (a key of ``CLASSIFIERS``): torchvision's 1000 classes,
    timm's 10."""
    torch.manual_seed(0)
    if name == "convnext_atto":
        timm = import_timm()
        if timm is None:
            raise ImportError("timm is not installed")
        model = timm.create_model(name, pretrained=False, num_classes=10)
    else:
        torchvision = import_torchvision()
        if torchvision is None:
            raise ImportError("torchvision is not installed")
        model = getattr(torchvision.models, name)()
    return calibrate(model)


def example_inputs():
    """``(args, dynamic_shapes)`` of the export: one batch of ``SHAPE``, dynamic batch."""
    return (torch.randn(SHAPE, generator=torch.Generator().manual_seed(0)),), {"x": {0: "batch"}}
