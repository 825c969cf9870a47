"""``onnxport plot MODEL -o model.png|model.svg``: draw a model with graphviz (``onnxport.plot_dot``)."""

from __future__ import annotations

import argparse

EPILOG = """\
examples:
  onnxport plot model.onnx -o model.svg
  onnxport plot model.onnx -o model.png
  onnxport plot model.onnx > model.dot     # DOT text only, no graphviz needed
  onnxport plot model.py:build -o model.png
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``plot`` subcommand and return its parser."""
    from onnxport.cli.target import add_target_arguments

    p = subparsers.add_parser(
        "plot", help="draw an ONNX model or a Python target as a graphviz picture (PNG, SVG, PDF)",
        description="Write the graphviz picture of the model to -o (format from its suffix or --format);\n"
                    "without -o, print the DOT text. Rendering needs graphviz's `dot` program.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_target_arguments(p)
    p.add_argument("-o", "--output", metavar="PATH", help="picture to write: model.png, model.svg or model.pdf")
    p.add_argument("--format", choices=["png", "svg", "pdf"],
                   help="picture format (default: the suffix of -o, else png)")
    p.add_argument("--dot", metavar="PATH", help="also write the DOT text to PATH")
    p.add_argument("--no-shapes", dest="shapes", action="store_false",
                   help="do not run shape inference (edges show only stored dtypes/shapes)")
    return p


def run(args: argparse.Namespace) -> int:
    """Render (or print) the picture; returns 0. Errors are ``onnxport.ExportError`` (exit code 2)."""
    import os

    from onnxport.cli.paths import check_output_paths
    from onnxport.cli.target import model_from_args
    from onnxport.show.dot import FORMATS, RenderError, plot_dot, render

    suffix = os.path.splitext(args.output)[1].lower().lstrip(".") if args.output else ""
    if args.output and not args.format and suffix not in FORMATS:
        raise RenderError(f"cannot tell the picture format of {args.output!r} from its suffix",
                          hint=f"name it .{', .'.join(sorted(FORMATS))}, or pass --format")
    check_output_paths({"-o": args.output, "--dot": args.dot})
    text = plot_dot(model_from_args(args), shapes=args.shapes)
    if args.output is None:
        print(text, end="")
    else:
        render(text, args.output, format=args.format or suffix)
        print(f"wrote {args.output}")
    if args.dot:
        with open(args.dot, "w") as f:
            f.write(text)
    return 0
