"""Tracing a model whose parameters are on the meta device: torch.export fakes every parameter and
buffer before it traces; one on the meta device is faked as a CPU tensor of its shape and dtype
(the device of the inputs), so the trace runs as it would with the weights loaded, reading none.

The ONNX initializers of such a model come from its checkpoint (``onnxport.weights``)."""

from __future__ import annotations

import torch

from onnxport.capture.patches import Patch, SetCode, register


def _fakify_with_meta_on_cpu(fake_mode, mod):
    """``torch._export.utils._fakify_params_buffers``, a meta tensor faked on the CPU."""
    params_buffers = {**dict(mod.named_parameters(remove_duplicate=False)),
                      **dict(mod.named_buffers(remove_duplicate=False))}
    memo: dict[int, torch.Tensor] = {}
    out = {}
    for key, value in params_buffers.items():
        if id(value) not in memo:
            if value.is_meta:
                memo[id(value)] = fake_mode.fake_tensor_converter.from_meta_and_device(
                    fake_mode, value, torch.device("cpu"))
            else:
                memo[id(value)] = fake_mode.from_tensor(value, static_shapes=True)
        out[key] = memo[id(value)]
    return out


def _changes() -> list:
    from torch._export import utils

    return [SetCode(utils._fakify_params_buffers, _fakify_with_meta_on_cpu)]


META_WEIGHTS_ON_CPU = register(Patch(
    "meta weights traced on the CPU", _changes,
    "torch._export.utils._fakify_params_buffers: a parameter or buffer on the meta device becomes a fake CPU "
    "tensor of its shape and dtype (a model built without its weights traces as with them)",
    when=lambda trace: has_meta_weights(trace.request.model), order=340))


def has_meta_weights(model) -> bool:
    """True when ``model`` (an ``nn.Module``) holds a parameter or buffer on the meta device."""
    if not isinstance(model, torch.nn.Module):
        return False
    return any(t.is_meta for t in (*model.parameters(), *model.buffers()))
