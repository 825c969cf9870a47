"""``onnxport show MODEL``: print the compact text rendering of a model (``onnxport.pretty_onnx``)."""

from __future__ import annotations

import argparse

EPILOG = """\
examples:
  onnxport show model.onnx
  onnxport show model.onnx --no-shapes --max-values 0
  onnxport show model.py:build            # model.py defines example_inputs() -> (args, dynamic_shapes)
  onnxport show model.py:Net --input "x: float32[batch, 16]"
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``show`` subcommand and return its parser."""
    from onnxport.cli.target import add_target_arguments

    p = subparsers.add_parser(
        "show", help="print a compact text rendering of an ONNX model or of a Python target",
        description="Print the opsets, inputs, outputs, initializers and one line per node of the model,\n"
                    "then each subgraph and local function.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_target_arguments(p)
    p.add_argument("--no-shapes", dest="shapes", action="store_false",
                   help="do not run shape inference nor print the dtype/shape of node outputs")
    p.add_argument("--max-values", type=int, default=5, metavar="N",
                   help="leading values printed for small initializers and constants (default 5)")
    return p


def run(args: argparse.Namespace) -> int:
    """Print the rendering; returns 0. Errors are ``onnxport.ExportError`` (exit code 2)."""
    from onnxport.cli.target import model_from_args
    from onnxport.show.pretty import pretty_onnx

    text = pretty_onnx(model_from_args(args), shapes=args.shapes, max_values=args.max_values)
    print(text, end="")
    return 0
