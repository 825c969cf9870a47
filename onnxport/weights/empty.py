"""Building a model without memory for its parameters, its buffers computed as ``__init__`` computes
them (the way ``accelerate.init_empty_weights`` builds one)."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import torch

_LOCK = threading.Lock()


@contextlib.contextmanager
def empty_weights() -> Iterator[None]:
    """While the block runs, every parameter a module registers is moved to the meta device as it
    is registered (its initialization then costs nothing); buffers (rotary tables, position ids)
    are computed on the CPU as usual, so a checkpoint need not hold them.

    Example::

        with onnxport.weights.empty_weights():
            model = LlamaForCausalLM(config)   # parameters on meta, rotary inv_freq computed
        result = onnxport.to_onnx(model, (ids,), weights="ckpt/model.safetensors.index.json")

    Changes ``torch.nn.Module.register_parameter`` for the whole process while the block runs
    (one such block at a time); restored on exit, whatever ends the block.
    """
    with _LOCK:
        original = torch.nn.Module.register_parameter

        def register_parameter(self, name, param):
            original(self, name, param)
            if param is not None and not param.is_meta:
                kind = type(self._parameters[name])
                self._parameters[name] = kind(self._parameters[name].to("meta"), requires_grad=param.requires_grad)

        torch.nn.Module.register_parameter = register_parameter
        try:
            yield
        finally:
            torch.nn.Module.register_parameter = original
