"""The ``onnxport`` command: one module per subcommand, each with ``add_parser(sub)`` and ``run(args)``."""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = ["demo", "export", "show", "plot", "validate"]


def build_parser() -> argparse.ArgumentParser:
    from onnxport import __version__

    parser = argparse.ArgumentParser(
        prog="onnxport",
        description="Export PyTorch models to ONNX with dynamic dimensions and control flow, and check them.",
    )
    parser.add_argument("--version", action="version", version=f"onnxport {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"onnxport.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"onnxport.cli.{name}":
                continue
            raise
        p = module.add_parser(sub)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point. Exit codes: 0 success, 1 validation mismatch, 2 user error."""
    from onnxport.errors import ExportError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except ExportError as e:
        if args.debug:
            import traceback

            traceback.print_exc()
        print(f"onnxport: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
