"""Build-time fixes of a tiny model's seeded weights (``hf_tiny.build`` applies them), where the
model's own initialization leaves eager PyTorch's outputs undefined or degenerate at the tiny sizes:

* weight matrices the initialization leaves all zero (a mixture-of-experts router's gate, for one)
  drawn from N(0, 0.02), so that the router's scores do not tie and which experts eager PyTorch picks
  is defined;
* batch norms' scales the initialization draws near zero (RT-DETR's: N(0, initializer_range)) set to
  one;
* a batch-normed conv's weights it draws far below a variance-keeping scale scaled up;

else the features of a detector's stacked conv blocks vanish and its top-k queries are picked among
tied scores.
"""

from __future__ import annotations

import torch


def fix_weights(model: torch.nn.Module) -> None:
    """``model``'s weights fixed in place as the module docstring says (drawn from a generator seeded 1)."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and p.is_floating_point() and not p.any():
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
        for module in model.modules():  # batch norms' scales drawn small (RT-DETR: N(0, initializer_range))
            scale = getattr(module, "weight", None)
            if _batch_norm(module) and isinstance(scale, torch.Tensor) and scale.any() \
                    and float(scale.abs().max()) < 0.1:
                scale.fill_(1.0)
            _scale_normed_conv(module)


def _batch_norm(module: torch.nn.Module) -> bool:
    """A batch norm, trained or frozen (HGNetV2's keeps its scale as a buffer)."""
    return isinstance(module, torch.nn.modules.batchnorm._BatchNorm) or "BatchNorm" in type(module).__name__


def _scale_normed_conv(module: torch.nn.Module) -> None:
    """A conv followed by a batch norm (a conv-norm block: HGNetV2's, D-FINE's) whose weights the
    initialization draws far below a variance-keeping scale (N(0, initializer_range) for a 3-channel
    stem: std 0.02 against 1 / sqrt(27)) scaled up to std ``1 / sqrt(fan_in)``: else the features
    vanish block after block and a detector's top-k queries are picked among tied scores."""
    children = list(module.children())
    for conv, norm in zip(children, children[1:]):
        if not isinstance(conv, torch.nn.Conv2d) or not _batch_norm(norm):
            continue
        weight = conv.weight
        target = (weight[0].numel()) ** -0.5
        std = float(weight.std()) if weight.numel() > 1 else 0.0
        if 0.0 < std < target / 4:
            weight.mul_(target / std)
