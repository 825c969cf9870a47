"""Looking at a model: ``pretty_onnx`` (compact text) and ``plot_dot`` (graphviz DOT, rendered by ``dot``)."""

from onnxport.show.dot import RenderError, plot_dot
from onnxport.show.load import ShowInputError, load
from onnxport.show.pretty import pretty_onnx

__all__ = ["RenderError", "ShowInputError", "load", "plot_dot", "pretty_onnx"]
