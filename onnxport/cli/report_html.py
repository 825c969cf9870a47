"""``--report-html PATH`` of ``onnxport export``, ``export-hf``, ``export-returnn`` and ``validate``: the HTML report of
the export (``ExportResult.report``), and of its failure: a command that fails with an
``ExportError`` writes the page of the error (``onnxport.show.report_html.failure_html``: what
failed, the user's line, the fix, the capture steps tried) before the error is printed."""

from __future__ import annotations

import argparse
import functools
from typing import Any, Callable


def add_argument(p: argparse.ArgumentParser) -> None:
    """The ``--report-html PATH`` option."""
    p.add_argument("--report-html", metavar="HTML",
                   help="write an HTML report: the graph, inputs and outputs with their dim names, the constraints "
                        "adopted with your line, the capture steps, the optimizer's node counts, the validation "
                        "table; on an error, the error with your line, the fix and the steps tried (one file, "
                        "nothing loaded from the network)")


def write(args: argparse.Namespace, result: Any, title: str) -> None:
    """The report of ``result`` to ``--report-html``, when given (``SaveError`` when it cannot be written)."""
    if getattr(args, "report_html", None):
        result.report(args.report_html, title=title)


def on_failure(title: Callable[[argparse.Namespace], str]) -> Callable:
    """Decorate a subcommand's ``run(args)``: an ``ExportError`` it raises writes the failure's page
    to ``--report-html`` (when given), then goes on to ``main()``; ``title(args)`` names the command."""

    def decorate(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        @functools.wraps(run)
        def wrapped(args: argparse.Namespace) -> int:
            from onnxport.errors import ExportError

            try:
                return run(args)
            except ExportError as error:
                if getattr(args, "report_html", None):
                    _write_failure(args.report_html, error, f"{title(args)}: failed")
                raise
        return wrapped
    return decorate


def _write_failure(path: str, error: BaseException, title: str) -> None:
    """The failure's page to ``path``; a failure to write it is said on the terminal (``cli.quiet.terminal``: not
    held with other libraries' output), the error stays the one shown."""
    from onnxport.cli.quiet import terminal
    from onnxport.errors import ExportError
    from onnxport.saving import write_file
    from onnxport.show.report_html import failure_html

    text = failure_html(error, title=title).encode("utf-8")
    try:
        write_file(path, lambda f: f.write(text))
    except ExportError as cannot:
        print(f"onnxport: --report-html {path} not written: {cannot.summary}", file=terminal())
