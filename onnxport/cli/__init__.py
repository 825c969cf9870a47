"""The ``onnxport`` command: one module per subcommand, each with ``add_parser(sub)`` and ``run(args)``;
``main`` turns every ``ExportError`` a subcommand raises into the short error text and exit code 2
(``cli.common`` holds what the export subcommands share)."""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = ["demo", "export", "export-hf", "export-returnn", "show", "plot", "validate"]


def build_parser() -> argparse.ArgumentParser:
    from onnxport import __version__

    parser = argparse.ArgumentParser(
        prog="onnxport",
        description="Export PyTorch models to ONNX with dynamic dimensions and control flow, and check them.",
    )
    parser.add_argument("--version", action="version", version=f"onnxport {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    parser.add_argument("--verbose", action="store_true",
                        help="show what other libraries print (warnings, log lines), held back otherwise")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        path = f"onnxport.cli.{name.replace('-', '_')}"  # export-hf: onnxport.cli.export_hf
        try:
            module = importlib.import_module(path)
        except ModuleNotFoundError as e:
            if e.name == path:
                continue
            raise
        p = module.add_parser(sub)
        p.set_defaults(_run=module.run)
    return parser


def error_text(e: Exception, debug: bool = False) -> str:
    """What the command prints for an ``ExportError``: ``onnxport: error: <short first line>``,
    then ``at <user's line>`` and ``fix: <hint>``; the detail (torch's full message) with ``--debug``."""
    lines = [f"onnxport: error: {getattr(e, 'summary', None) or str(e).splitlines()[0]}"]
    if getattr(e, "where", None):
        lines.append(f"  at {e.where}")
    if getattr(e, "hint", None):
        lines.append(f"  fix: {e.hint}")
    detail = getattr(e, "detail", None)
    if detail and debug:
        lines.append("  detail: " + detail.replace("\n", "\n    "))
    elif detail:
        lines.append("  (--debug shows the full message)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point. Exit codes: 0 success, 1 validation mismatch, 2 user error. What other libraries
    print while the command runs is held back (``cli.quiet``) unless ``--verbose`` or ``--debug``; after an
    ``ExportError``, the error says how many of their lines were held."""
    from onnxport.cli.quiet import hold_foreign_output
    from onnxport.errors import ExportError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    with hold_foreign_output(show=args.verbose or args.debug, quiet=getattr(args, "quiet", False)) as held:
        try:
            return int(args._run(args) or 0)
        except ExportError as e:
            if args.debug:
                import traceback

                traceback.print_exc()
            text = error_text(e, args.debug)
        except KeyboardInterrupt:
            return 130
    if held.lines:  # torch's warnings and log lines may say why: where to see them
        n = len(held.lines)
        said = "1 line other libraries printed was" if n == 1 else f"{n} lines other libraries printed were"
        text += f"\n  ({said} held back; --verbose shows them)"
    print(text, file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
