"""Config-driven export: an export config (TOML, a dict, or ``--input`` declarations) states the
contract (inputs, dims and how lengths relate to them, outputs); ``export_target`` (``config.export``)
builds the model (``config.target``), loads its checkpoint (``onnxport.weights``), exports it,
checks that it honours the contract (``config.contract``) and validates it.

The config itself: ``config.schema`` (what a parsed config is, and the file's format),
``config.parse`` (reading and checking one), ``config.inputs`` (its inputs, dynamic shapes and
validation sizes), ``config.declarations`` (the command line's ``--input`` texts), ``config.stream``
(the ``[stream]`` section and its streaming check).
"""

from onnxport.config.declarations import config_from_declarations, parse_declaration
from onnxport.config.export import export_from_config, export_target  # noqa: F401 - export_from_config: deprecated
from onnxport.config.inputs import default_sizes, dynamic_shapes, input_specs, make_inputs
from onnxport.config.parse import load_config, parse_config
from onnxport.config.schema import DimRange, ExportConfig, StreamConfig, TensorDecl, dtype_name, sizes_text
from onnxport.config.stream import check_config_stream

__all__ = ["DimRange", "ExportConfig", "StreamConfig", "TensorDecl", "check_config_stream",
           "config_from_declarations", "default_sizes", "dtype_name", "dynamic_shapes", "export_target", "input_specs",
           "load_config", "make_inputs", "parse_config", "parse_declaration", "sizes_text"]
