"""Weights that stay on disk: export a model built on the meta device from its checkpoint.

``open_checkpoint(path)`` reads a checkpoint's headers (safetensors file, sharded index,
``torch.save`` file memory-mapped); ``bind(module, checkpoint)`` matches the module's parameters
and buffers with it by qualified name; the ONNX initializers are ``onnx_ir.LazyTensor``s reading
one tensor from the checkpoint when the model is saved (``Weights.lazy``). ``empty_weights()``
builds a model with its parameters on the meta device and its buffers computed.
``materialize(module, weights)`` loads the checkpoint into a real copy of the module (for
validation against eager PyTorch).
"""

from onnxport.weights.binding import Weights, bind, ir_tensor, on_meta
from onnxport.weights.checkpoint import Checkpoint, Entry, open_checkpoint
from onnxport.weights.empty import empty_weights
from onnxport.weights.materialize import materialize

__all__ = ["Checkpoint", "Entry", "Weights", "bind", "empty_weights", "ir_tensor", "materialize", "on_meta",
           "open_checkpoint"]
