"""Building a model without memory for its parameters, its buffers computed as ``__init__`` computes
them (the way ``accelerate.init_empty_weights`` builds one)."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

from torch.nn.modules.module import register_module_parameter_registration_hook

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

    Through torch's global parameter registration hook
    (``torch.nn.modules.module.register_module_parameter_registration_hook``), for the whole
    process while the block runs (one such block at a time); removed on exit, whatever ends it.
    """
    with _LOCK:
        def to_meta(module, name, param):
            if param is None or param.is_meta:
                return None
            return type(param)(param.to("meta"), requires_grad=param.requires_grad)

        handle = register_module_parameter_registration_hook(to_meta)
        try:
            yield
        finally:
            handle.remove()
