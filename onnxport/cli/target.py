"""What ``onnxport show`` and ``onnxport plot`` look at: an ONNX file, or a Python target exported on the fly.

The arguments naming it; what they name is built and exported by ``onnxport.export_target``.
"""

from __future__ import annotations

import argparse
from typing import Any

from onnxport.config.export import export_target
from onnxport.config.target import is_onnx_file, parse_model_args
from onnxport.errors import TargetError


def add_target_arguments(p: argparse.ArgumentParser) -> None:
    """The positional ``MODEL`` and the options that export a Python target on the fly."""
    p.add_argument("model", metavar="MODEL",
                   help="an .onnx file, or a target path/to/file.py:factory or module.path:factory "
                        "building a torch.nn.Module, exported on the fly")
    p.add_argument("-c", "--config", metavar="TOML", help="export config of the target (as `onnxport export`)")
    p.add_argument("--input", dest="inputs", action="append", default=[], metavar="DECL",
                   help='declare an input of the target, e.g. "x: float32[batch, 16]" (repeatable)')
    p.add_argument("--model-arg", dest="model_args", action="append", default=[], metavar="KEY=VALUE",
                   help="keyword argument of the factory, read as a Python literal (repeatable)")
    p.add_argument("--opset", type=int, help="ONNX opset of an on-the-fly export (default 20)")


def model_from_args(args: argparse.Namespace) -> Any:
    """The object to render for the parsed command line: the ``.onnx`` path as is, or the
    ``ExportResult`` of exporting the target. Raises ``TargetError`` and export errors."""
    if is_onnx_file(args.model):
        if args.config or args.inputs or args.model_args:
            raise TargetError(f"{args.model} is an ONNX file: --config, --input and --model-arg apply to "
                              "Python targets only", hint="drop those options, or give file.py:factory")
        return args.model
    return export_from_args(args)


def export_from_args(args: argparse.Namespace, checkpoint: Any = None):
    """``export_target`` of the target and options ``add_target_arguments`` parsed (without
    validation), loading ``checkpoint`` when given. Returns the ``ExportResult``; raises
    ``TargetError`` for a MODEL that is neither an ONNX file nor a target, and as ``export_target``."""
    if ":" not in args.model:
        raise TargetError(f"{args.model!r} is neither an ONNX file nor a Python target",
                          hint="give model.onnx, path/to/file.py:factory or module.path:factory")
    return export_target(args.model, config=args.config, inputs=args.inputs,
                         model_args=parse_model_args(args.model_args), opset=args.opset, checkpoint=checkpoint,
                         validate=False)
