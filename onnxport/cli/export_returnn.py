"""``onnxport export-returnn CONFIG -o model.onnx``: the model of a RETURNN config exported, checked
against its ``model_outputs`` and validated against RETURNN eager
(``onnxport.integrations.returnn_export.export_returnn_config``)."""

from __future__ import annotations

import argparse

from onnxport.cli import report_html
from onnxport.cli.common import add_target_argument

EPILOG = """\
examples:
  onnxport export-returnn returnn.config --checkpoint epoch.100.pt -o model.onnx
  onnxport export-returnn returnn.config --checkpoint epoch.100.pt -o model.onnx \\
      --size batch=1,time=9 --size batch=2,time=23 --size batch=5,time=301

exit codes: 0 success; 1 validation mismatch (the ONNX file is written, the table shows where);
2 user error (config, checkpoint, outputs unlike model_outputs, export, an output path that cannot
be written), nothing written.
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``export-returnn`` subcommand and return its parser."""
    from onnxport.cli.common import add_result_arguments

    p = subparsers.add_parser(
        "export-returnn", help="export the model of a RETURNN config to ONNX, check and validate it",
        description="Read a RETURNN config (extern_data, model_outputs, get_model, forward_step), build its\n"
                    "model with the checkpoint's weights, export forward_step to ONNX with RETURNN's input and\n"
                    "output names, check the outputs against model_outputs and compare onnxruntime with eager\n"
                    "RETURNN at other sizes. Needs pip install 'onnxport[returnn]'.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("returnn_config", metavar="CONFIG", help="the RETURNN config file")
    p.add_argument("-o", "--output", metavar="ONNX", required=True, help="path of the ONNX file to write")
    p.add_argument("--checkpoint", metavar="PATH",
                   help="RETURNN checkpoint ({'model': state_dict, 'epoch': ..., 'step': ...}) or a state dict, read "
                        "with torch.load(weights_only=True); a safetensors file or sharded index too")
    p.add_argument("--size", dest="sizes", action="append", default=[], metavar="NAME=N,...",
                   help="validation sizes, e.g. batch=1,time=9 (repeatable; default: generated)")
    p.add_argument("--opset", type=int, help="ONNX opset (18 or newer; default 20)")
    add_target_argument(p)
    p.add_argument("--atol", type=float, help="judge every float output by |ONNX - eager| <= atol + rtol |eager| per "
                                               "element (default: float32 outputs against eager in float64)")
    p.add_argument("--rtol", type=float, help="relative tolerance of --atol's judgement")
    p.add_argument("--no-validate", dest="validate", action="store_false",
                   help="skip the comparison with onnxruntime (the outputs are still checked)")
    add_result_arguments(p)
    report_html.add_argument(p)
    return p


def parse_sizes(texts: list[str]) -> list[dict[str, int]]:
    """``["batch=1,time=9"]`` -> ``[{"batch": 1, "time": 9}]``; ``ConfigError`` when malformed."""
    from onnxport.errors import ConfigError

    out = []
    for text in texts:
        sizes = {}
        for part in text.split(","):
            name, sep, value = part.partition("=")
            if not sep or not name.strip().isidentifier() or not value.strip().isdigit():
                raise ConfigError(f"--size {text!r} is not NAME=N,NAME=N", hint="e.g. --size batch=1,time=9")
            sizes[name.strip()] = int(value)
        out.append(sizes)
    return out


def export(args: argparse.Namespace, progress, default_target: bool = False) -> object:
    """``export_returnn_config`` of the parsed arguments; returns the ``ExportResult``. ``default_target``:
    ``--target`` not given is ``options.DEFAULT_TARGET`` (a command whose ``--target`` defaults to a
    config's, which a RETURNN config never names)."""
    from onnxport.integrations.returnn_export import export_returnn_config
    from onnxport.options import DEFAULT_TARGET

    target = DEFAULT_TARGET if default_target and args.runtime_target is None else args.runtime_target
    return export_returnn_config(args.returnn_config, checkpoint=args.checkpoint, validate=args.validate,
                                 sizes=parse_sizes(args.sizes) or None, opset=args.opset, atol=args.atol,
                                 rtol=args.rtol, on_step=progress, target=target)


@report_html.on_failure(lambda args: f"onnxport export-returnn {args.returnn_config}")
def run(args: argparse.Namespace) -> int:
    """Export, save and report; returns 0 or 1 (validation mismatch, file kept). Errors are
    ``onnxport.ExportError`` (exit code 2, nothing written)."""
    from onnxport.cli.common import Progress, report_export, save_export
    from onnxport.cli.paths import check_output_paths

    progress = Progress(quiet=args.quiet)
    try:
        check_output_paths({"-o": args.output, "--report": args.report, "--report-html": args.report_html})
        result = save_export(export(args, progress), args, progress)
        report_html.write(args, result, f"onnxport export-returnn {args.returnn_config}")
    finally:
        progress.close()
    return report_export(result, args)
