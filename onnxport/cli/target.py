"""What ``onnxport show`` and ``onnxport plot`` look at: an ONNX file, or a Python target exported on the fly.

A target is ``path/to/file.py:factory`` or ``module.path:factory`` (resolved by
``onnxport.cli.loader``), ``factory`` building a ``torch.nn.Module``. Its inputs come from, in order:

1. an export config (``--config export.toml``) or ``--input`` declarations, exported exactly as
   ``onnxport export`` does (``onnxport.config_export.export_from_config``, without validation);
2. otherwise an ``example_inputs()`` function in the factory's module, returning
   ``(args, dynamic_shapes)`` as ``onnxport.to_onnx`` takes them.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from onnxport.cli.loader import TargetError, build_model, parse_model_args, resolve_target

ONNX_SUFFIXES = (".onnx", ".onnxtxt", ".pb")


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


def is_onnx_file(spec: str) -> bool:
    """True when ``spec`` names an ONNX file (by suffix, or an existing file that is not Python)."""
    if spec.lower().endswith(ONNX_SUFFIXES):
        return True
    return os.path.isfile(spec) and not spec.endswith(".py")


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
    """``export_target`` of the target and options ``add_target_arguments`` parsed, loading
    ``checkpoint`` when given. Returns the ``ExportResult``; raises as ``export_target``."""
    return export_target(args.model, config=args.config, inputs=args.inputs,
                         model_args=parse_model_args(args.model_args), opset=args.opset, checkpoint=checkpoint)


def export_target(target: str, *, config: Any = None, inputs: list[str] | None = None,
                  model_args: dict | None = None, opset: int | None = None, checkpoint: Any = None):
    """Build the module ``target`` names and export it with ``onnxport.to_onnx``.

    Args:
        target: ``file.py:factory`` or ``module.path:factory``.
        config: an export config (path, dict) as ``onnxport export --config`` takes it.
        inputs: ``--input`` declarations (``"x: float32[batch, 16]"``) instead of a config.
        model_args: keyword arguments of the factory.
        opset: ONNX opset (default: the config's, else 20).
        checkpoint: a state dict file loaded into the built module (``torch.load(weights_only=True)``).

    Returns:
        ``onnxport.ExportResult``.

    Raises:
        TargetError: the target does not resolve, or neither a config, ``--input`` declarations nor
            an ``example_inputs()`` function gives the inputs; ``example_inputs()`` returns no
            ``(args, dynamic_shapes)`` pair. ``ConfigError`` and export errors as raised by the export.
    """
    if ":" not in target:
        raise TargetError(f"{target!r} is neither an ONNX file nor a Python target",
                          hint="give model.onnx, path/to/file.py:factory or module.path:factory")
    if config is not None or inputs:
        from onnxport.config import config_from_declarations
        from onnxport.config_export import export_from_config

        data = config if config is not None else config_from_declarations(list(inputs))
        return export_from_config(data, model=target, checkpoint=checkpoint, model_args=model_args, validate=False,
                                  opset=opset)
    factory = resolve_target(target)
    module_obj = sys.modules.get(getattr(factory, "__module__", ""), None)
    example = getattr(module_obj, "example_inputs", None)
    where = getattr(module_obj, "__file__", None) or target.rpartition(":")[0]
    if not callable(example):
        raise TargetError(
            f"no inputs to export {target}: its module defines no example_inputs()",
            hint=f"define example_inputs() in {where} returning (args, dynamic_shapes), "
                 f"or declare inputs with --input \"x: float32[batch, 16]\" or --config export.toml")
    module = build_model(factory, model_args or {})
    if checkpoint is not None:
        from onnxport.checkpoint import load_checkpoint

        module = load_checkpoint(module, checkpoint)
    try:
        pair = example()
    except Exception as e:  # noqa: BLE001 - the user's function raised
        raise TargetError(f"example_inputs() of {where} failed: {type(e).__name__}: {e}") from e
    if not (isinstance(pair, tuple) and len(pair) == 2):
        raise TargetError(f"example_inputs() of {where} returned a {type(pair).__name__}, not (args, dynamic_shapes)",
                          hint="return a pair, e.g. ((torch.randn(2, 16),), {'x': {0: 'batch'}})")
    args, dynamic_shapes = pair
    from onnxport.export import to_onnx

    return to_onnx(module, args, dynamic_shapes=dynamic_shapes, opset=opset or 20)
