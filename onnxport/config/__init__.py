"""Config-driven export: an export config (TOML, a dict, or ``--input`` declarations) states the
contract (inputs, dims and how lengths relate to them, outputs); ``export_from_config`` builds the
model (``config.target``), loads a checkpoint (``config.checkpoint``), exports it, checks that it
honours the contract (``config.contract``) and validates it.
"""

from onnxport.config.config import (DimRange, ExportConfig, TensorDecl, config_from_declarations, default_sizes,
                                    dtype_name, dynamic_shapes, input_specs, load_config, make_inputs,
                                    parse_config, parse_declaration, sizes_text)
from onnxport.config.export import export_from_config

__all__ = ["DimRange", "ExportConfig", "TensorDecl", "config_from_declarations", "default_sizes", "dtype_name",
           "dynamic_shapes", "export_from_config", "input_specs", "load_config", "make_inputs", "parse_config",
           "parse_declaration", "sizes_text"]
