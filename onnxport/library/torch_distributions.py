"""torch.distributions without their argument checks while torch.export traces.

A distribution built with the default ``validate_args`` checks its parameters' values when made
(``Categorical(logits=x)``: every logit finite; ``Normal(loc, scale)``: every scale positive) and
raises ``ValueError`` where one fails: a branch on the inputs' data, which torch.export refuses
(``GuardOnDataDependentSymNode``; transformers' BLT patcher computes its entropies so). The checks
compute nothing the model returns: with them off the program is the model's on every input the
checks accept, which is what the ONNX model is for. A distribution given ``validate_args=True``
keeps its checks (torch then decides whether they export).

Semantics: ``torch.distributions.Distribution.set_default_validate_args`` (PyTorch doc).
"""

from __future__ import annotations

from onnxport.capture.patches import Patch, SetAttribute, always, register


def _changes() -> list:
    import torch.distributions

    return [SetAttribute(torch.distributions.Distribution, "_validate_args", lambda original: False)]


DISTRIBUTION_CHECKS_OFF = register(Patch(
    "distributions' argument checks off", _changes,
    "torch.distributions.Distribution._validate_args (the default of validate_args) is False while torch.export "
    "traces: the checks of a distribution's parameter values branch on the inputs' data and compute nothing "
    "the model returns", when=always, order=290))
