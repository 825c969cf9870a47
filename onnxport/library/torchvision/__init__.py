"""torchvision: its detection models (``detection``) and ``torchvision.ops.batched_nms`` (``ops``) while
torch.export traces them; the translations of its compiled ops are ``translate/ops/detection.py``."""
