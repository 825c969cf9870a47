"""``onnxport export TARGET``: export a model as a config, ``--input`` declarations or the target's
``example_inputs()`` state it (``onnxport.export_target``); this module only parses the arguments."""

from __future__ import annotations

import argparse

from onnxport.cli import report_html
from onnxport.cli.common import add_target_argument

EPILOG = """\
examples:
  onnxport export mypkg.models:build_conformer --config export.toml --checkpoint ckpt.pt -o conformer.onnx
  onnxport export model.py:Net --input "x: float32[batch, 3, 224, 224]" -o net.onnx
  onnxport export model.py:build --checkpoint model.safetensors.index.json -o model.onnx
      # inputs from example_inputs() in model.py
  onnxport export examples/speech_encoder.py:build_encoder --config examples/speech_encoder.toml \\
      -o enc.onnx --report report.json
  onnxport export-returnn returnn.config --checkpoint epoch.100.pt -o model.onnx    # a RETURNN config

a config's [stream] section adds the streaming check after the validation: the model run chunk after
chunk in onnxruntime and eager PyTorch, its state outputs fed back, every step compared.

exit codes: 0 success; 1 validation or streaming mismatch (the ONNX file is written, the table shows where);
2 user error (target, config, checkpoint, contract, export, an output path that cannot be written),
nothing written: a short "onnxport: error:" line, then where and what to do (--debug: the full detail).
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``export`` subcommand and return its parser."""
    from onnxport.cli.common import add_result_arguments

    p = subparsers.add_parser(
        "export", help="export a model to ONNX from a config or input declarations, check and validate it",
        description="Build the model TARGET returns, load a checkpoint, export it to ONNX with the inputs,\n"
                    "dims and outputs the config (or --input) declares, check the model honours them, and compare\n"
                    "onnxruntime with eager PyTorch on the config's validation sizes. Without a config or --input,\n"
                    "the inputs come from an example_inputs() function in TARGET's module.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="TARGET", nargs="?",
                   help="module.path:callable or path/to/file.py:callable building a torch.nn.Module "
                        "(default: the config's target)")
    p.add_argument("-c", "--config", metavar="TOML", help="export config: [inputs.*], [outputs.*], [dims], [model], "
                   "[export], [validate], [stream] (see examples/speech_encoder.toml)")
    p.add_argument("--returnn-config", metavar="CONFIG", help="deprecated: use onnxport export-returnn CONFIG")
    p.add_argument("--size", dest="sizes", action="append", default=[], metavar="NAME=N,...",
                   help="with --returnn-config (deprecated): validation sizes, e.g. batch=1,time=9 (repeatable)")
    p.add_argument("-o", "--output", metavar="ONNX", required=True, help="path of the ONNX file to write")
    p.add_argument("--checkpoint", metavar="PATH", help="the model's weights: a torch.save state dict (read with "
                   "weights_only=True; its 'model' or 'state_dict' entry when it holds several things), a safetensors "
                   "file, or a sharded checkpoint's *.safetensors.index.json")
    p.add_argument("--input", dest="inputs", action="append", default=[], metavar="DECL",
                   help='declare an input instead of a config, e.g. "x: float32[batch, 3, 224, 224]" (repeatable)')
    p.add_argument("--declare-output", dest="outputs", action="append", default=[], metavar="DECL",
                   help='declare an output with --input, e.g. "logits: float32[batch, 1000]" (repeatable)')
    p.add_argument("--dim", dest="dims", action="append", default=[], metavar="NAME=MIN:MAX",
                   help="size range of a named dim with --input, e.g. batch=1:64 (repeatable)")
    p.add_argument("--model-arg", dest="model_args", action="append", default=[], metavar="KEY=VALUE",
                   help="keyword argument of TARGET, value read as a Python literal (repeatable; over [model])")
    p.add_argument("--opset", type=int, help="ONNX opset (18 or newer; default: config's, else 20)")
    p.add_argument("--inline", action="store_true", default=None, help="inline control-flow bodies")
    add_target_argument(p, config=True)
    p.add_argument("--no-optimize", dest="optimize", action="store_false", default=None,
                   help="skip the optimization passes")
    p.add_argument("--strict", action="store_true", default=None, help="capture with torch.export's strict mode")
    p.add_argument("--atol", type=float, help="judge every float output by |ONNX - eager| <= atol + rtol |eager| per "
                                               "element (default: the config's; without, float32 outputs against "
                                               "eager PyTorch in float64)")
    p.add_argument("--rtol", type=float, help="relative tolerance of --atol's judgement")
    p.add_argument("--no-validate", dest="validate", action="store_false",
                   help="skip the comparisons with onnxruntime, the config's [stream] check too (the contract "
                        "is still checked)")
    add_result_arguments(p)
    report_html.add_argument(p)
    return p


@report_html.on_failure(lambda args: f"onnxport export {args.target or args.config}")
def run(args) -> int:
    """Run the export and, with a config's ``[stream]`` section, its streaming check; returns 0 or 1
    (validation or streaming mismatch, file kept). Errors are ``onnxport.ExportError`` (exit code 2,
    nothing written)."""
    from onnxport.cli.common import Progress, report_export, save_export
    from onnxport.cli.paths import check_output_paths
    from onnxport.config.export import export_target
    from onnxport.config.target import parse_model_args
    from onnxport.errors import ConfigError

    progress = Progress(quiet=args.quiet)
    try:
        check_output_paths({"-o": args.output, "--report": args.report, "--report-html": args.report_html})
        if args.returnn_config:
            result = _export_returnn(args, progress)
        else:
            if args.sizes:
                raise ConfigError("--size is for onnxport export-returnn",
                                  hint="list validation sizes in the config's [validate]")
            result = export_target(
                args.target, config=args.config, inputs=args.inputs, outputs=args.outputs, dims=args.dims,
                model_args=parse_model_args(args.model_args), checkpoint=args.checkpoint, validate=args.validate,
                on_step=progress, opset=args.opset, inline=args.inline, optimize=args.optimize, strict=args.strict,
                atol=args.atol, rtol=args.rtol, runtime_target=args.runtime_target)
        stream = _stream_check(result, args, progress)
        result = save_export(result, args, progress)
        report_html.write(args, result, f"onnxport export {args.target or args.config}")
    finally:
        progress.close()
    return report_export(result, args, stream=stream)


def _stream_check(result, args, progress):
    """The streaming check of the config's ``[stream]`` section (``config.stream.check_config_stream``),
    after the validation and before the file is written; None without the section or with ``--no-validate``."""
    import time

    from onnxport.config.stream import check_config_stream

    cfg = getattr(result, "config", None)
    if not args.validate or getattr(cfg, "stream", None) is None:
        return None
    t0 = time.perf_counter()
    report = check_config_stream(result, cfg)
    progress("stream", time.perf_counter() - t0)
    return report


def _export_returnn(args, progress):
    """``--returnn-config``, deprecated: ``onnxport export-returnn`` (``cli.export_returnn``), said on stderr."""
    from onnxport.cli import export_returnn
    from onnxport.cli.quiet import terminal
    from onnxport.errors import ConfigError

    print("onnxport: warning: onnxport export --returnn-config CONFIG is deprecated and will be removed: "
          "use onnxport export-returnn CONFIG", file=terminal(), flush=True)
    given = [o for o, v in (("TARGET", args.target), ("--config", args.config), ("--input", args.inputs),
                            ("--model-arg", args.model_args)) if v]
    if given:
        raise ConfigError(f"--returnn-config and {', '.join(given)} were both given",
                          hint="the RETURNN config's get_model and extern_data define the model and its inputs")
    # this command leaves --target to a config (None where not given); a RETURNN config names none
    return export_returnn.export(args, progress, default_target=True)
