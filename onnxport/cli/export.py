"""``onnxport export TARGET``: export a model as a config (or ``--input`` declarations) states it."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time

EPILOG = """\
examples:
  onnxport export mypkg.models:build_conformer --config export.toml --checkpoint ckpt.pt -o conformer.onnx
  onnxport export model.py:Net --input "x: float32[batch, 3, 224, 224]" -o net.onnx
  onnxport export model.py:build --checkpoint model.safetensors.index.json -o model.onnx
      # inputs from example_inputs() in model.py
  onnxport export examples/speech_encoder.py:build_encoder --config examples/speech_encoder.toml \\
      -o enc.onnx --report report.json
  onnxport export --returnn-config returnn.config --checkpoint epoch.100.pt -o model.onnx

exit codes: 0 success; 1 validation mismatch (the ONNX file is written, the table shows where);
2 user error (target, config, checkpoint, contract, export, an output path that cannot be written),
nothing written: a short "onnxport: error:" line, then where and what to do (--debug: the full detail).
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``export`` subcommand and return its parser."""
    p = subparsers.add_parser(
        "export", help="export a model to ONNX from a config or input declarations, check and validate it",
        description="Build the model TARGET returns, load a checkpoint, export it to ONNX with the inputs,\n"
                    "dims and outputs the config declares, check the model honours them, and compare\n"
                    "onnxruntime with eager PyTorch on the config's validation sizes.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="TARGET", nargs="?",
                   help="module.path:callable or path/to/file.py:callable building a torch.nn.Module "
                        "(default: the config's target)")
    p.add_argument("-c", "--config", metavar="TOML", help="export config: [inputs.*], [outputs.*], [dims], [model], "
                   "[export], [validate] (see examples/speech_encoder.toml)")
    p.add_argument("--returnn-config", metavar="CONFIG", help="a RETURNN config (extern_data, model_outputs, get_model, "
                   "forward_step) instead of TARGET and --config; needs pip install 'onnxport[returnn]'")
    p.add_argument("--size", dest="sizes", action="append", default=[], metavar="NAME=N,...",
                   help="with --returnn-config: validation sizes, e.g. batch=1,time=9 (repeatable; default: generated)")
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
    p.add_argument("--no-optimize", dest="optimize", action="store_false", default=None,
                   help="skip the optimization passes")
    p.add_argument("--strict", action="store_true", default=None, help="capture with torch.export's strict mode")
    p.add_argument("--atol", type=float, help="judge every float output by |ONNX - eager| <= atol + rtol |eager| per "
                                               "element (default: the config's; without, float32 outputs against "
                                               "eager PyTorch in float64)")
    p.add_argument("--rtol", type=float, help="relative tolerance of --atol's judgement")
    p.add_argument("--no-validate", dest="validate", action="store_false",
                   help="skip the comparison with onnxruntime (the contract is still checked)")
    p.add_argument("--quantize", metavar="MODE", choices=("int8", "int8-static", "int4"),
                   help="write the model quantized: int8 (dynamic, per-channel weights), int8-static (QDQ, "
                        "calibrated on generated example-like inputs) or int4 (weight-only MatMulNBits); "
                        "embeddings and the final projection stay in float; validation then reports the "
                        "accuracy against eager PyTorch's float model (top-1 agreement, cosine similarity)")
    p.add_argument("--keep-float", dest="keep_float", action="append", default=[], metavar="NAME",
                   help="with --quantize: a weight-name prefix (module path, e.g. lm_head) kept in float (repeatable)")
    p.add_argument("--block-size", type=int, default=32, metavar="N", help="with --quantize int4: block size (default 32)")
    p.add_argument("--report", metavar="JSON", help="write the validation table as JSON")
    p.add_argument("--quiet", action="store_true", help="print neither progress nor the table")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show full tracebacks and details on errors, and the capture steps as they ran")
    return p


class Progress:
    """Step display, fed ``(step, seconds)`` as each step ends (``export_from_config``'s
    ``on_step``): a rich live table on a terminal once a run lasts over a second, plain
    ``onnxport: STEP N.NNs`` lines on stderr otherwise; nothing when ``quiet``."""

    DELAY = 1.0

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.tty = sys.stdout.isatty() and sys.stderr.isatty()
        self.steps: dict[str, float | None] = {}
        self.live = None
        self.timer = None
        self.lock = threading.Lock()
        self.started = time.perf_counter()
        if self.tty and not quiet:
            try:
                import rich  # noqa: F401
            except ImportError:
                self.tty = False
        if self.tty and not quiet:
            self.timer = threading.Timer(self.DELAY, self._start_live)
            self.timer.daemon = True
            self.timer.start()

    def _render(self):
        from rich.table import Table

        t = Table.grid(padding=(0, 2))
        for name, seconds in self.steps.items():
            t.add_row("[green]done[/]", name, f"{seconds:.2f}s")
        if self.timer is not None:
            t.add_row("[yellow]...[/]", "", "")
        return t

    def _start_live(self):
        from rich.console import Console
        from rich.live import Live

        with self.lock:
            if self.live is None and self.timer is not None:
                self.live = Live(self._render(), console=Console(stderr=True), refresh_per_second=8, transient=False,
                                 redirect_stdout=False, redirect_stderr=False)
                self.live.start()

    def __call__(self, step: str, seconds: float) -> None:
        if self.quiet:
            return
        with self.lock:
            self.steps[step] = seconds
            if self.live is not None:
                self.live.update(self._render())
            elif not self.tty:
                print(f"onnxport: {step} {seconds:.2f}s", file=sys.stderr, flush=True)

    def close(self) -> None:
        with self.lock:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            if self.live is not None:
                self.live.update(self._render())
                self.live.stop()
                self.live = None


def _sizes(texts: list[str]) -> list[dict[str, int]]:
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


def _export_returnn(args, progress):
    """The export of ``--returnn-config`` (``onnxport.integrations.returnn_export``)."""
    from onnxport.errors import ConfigError
    from onnxport.integrations.returnn_export import export_returnn_config

    given = [o for o, v in (("TARGET", args.target), ("--config", args.config), ("--input", args.inputs),
                            ("--model-arg", args.model_args)) if v]
    if given:
        raise ConfigError(f"--returnn-config and {', '.join(given)} were both given",
                          hint="the RETURNN config's get_model and extern_data define the model and its inputs")
    return export_returnn_config(args.returnn_config, checkpoint=args.checkpoint, validate=args.validate,
                                 sizes=_sizes(args.sizes) or None, opset=args.opset, atol=args.atol,
                                 rtol=args.rtol, on_step=progress)


def run(args) -> int:
    """Run the export; returns 0, 1 (validation mismatch, file kept) or 2 (user error, nothing written)."""
    from onnxport.cli import error_text
    from onnxport.cli.paths import check_output_paths
    from onnxport.config.export import export_target
    from onnxport.config.target import parse_model_args
    from onnxport.errors import ConfigError, ExportError

    debug = getattr(args, "debug", False)
    progress = Progress(quiet=args.quiet)
    try:
        check_output_paths({"-o": args.output, "--report": args.report})
        if args.returnn_config:
            result = _export_returnn(args, progress)
        else:
            if args.sizes:
                raise ConfigError("--size is for --returnn-config", hint="list validation sizes in the config's [validate]")
            result = export_target(
                args.target, config=args.config, inputs=args.inputs, outputs=args.outputs, dims=args.dims,
                model_args=parse_model_args(args.model_args), checkpoint=args.checkpoint, validate=args.validate,
                on_step=progress, opset=args.opset, inline=args.inline, optimize=args.optimize, strict=args.strict,
                atol=args.atol, rtol=args.rtol)
        if args.quantize:
            result = _quantized(result, args, progress)
        elif args.keep_float:
            raise ConfigError("--keep-float is for --quantize", hint="add --quantize int8 (or int8-static, int4)")
        t0 = time.perf_counter()
        result.save(args.output)
        progress("save", time.perf_counter() - t0)
        if debug and result.captured is not None:
            from onnxport.capture.trace import debug_text

            progress.close()
            print(debug_text(result.captured.attempts))
    except ExportError as e:
        progress.close()
        if debug:
            raise
        print(error_text(e, debug), file=sys.stderr)
        return 2
    finally:
        progress.close()
    report = result.validation
    if result.quantization is not None:
        return _report_accuracy(result, args)
    if not args.quiet:
        print(f"wrote {args.output}: {result!r}")
        if report is not None:
            print(report)
    if args.report:
        payload = report.to_dict() if report is not None else {"ok": None, "checks": []}
        payload.update({"model": os.path.abspath(args.output), "timings": dict(result.timings)})
        with open(args.report, "w") as f:
            json.dump(_finite(payload), f, indent=2, default=str)
    if report is not None and not report.ok:
        bad = [c for c in report.checks if not c.ok and not c.rejected]
        print(f"onnxport: validation mismatch on {len(bad)} of {len(report.checks)} checks "
              f"(first: {bad[0].output} at {bad[0].sizes or bad[0].inputs}); {args.output} was written",
              file=sys.stderr)
        return 1
    return 0


def _quantized(result, args, progress):
    """The exported result quantized as ``--quantize`` asks, its accuracy measured unless
    ``--no-validate`` (the float model's validation has run before)."""
    t0 = time.perf_counter()
    quantized = result.quantize(args.quantize, keep_float=args.keep_float, block_size=args.block_size)
    progress("quantize", time.perf_counter() - t0)
    if args.validate:
        t0 = time.perf_counter()
        quantized = quantized.replace(validation=quantized.validate())
        progress("accuracy", time.perf_counter() - t0)
    return quantized


def _report_accuracy(result, args) -> int:
    """Print and write the accuracy report of a quantized export; 1 when below its tolerance."""
    report = result.validation
    if not args.quiet:
        print(f"wrote {args.output}: {result!r}")
        print(report if report is not None else result.quantization)
    if args.report:
        payload = report.to_dict() if report is not None else {"ok": None, "quantization": str(result.quantization)}
        payload.update({"model": os.path.abspath(args.output), "timings": dict(result.timings)})
        with open(args.report, "w") as f:
            json.dump(_finite(payload), f, indent=2, default=str)
    if report is not None and not report.ok:
        bad = [name for name, s in report.summary().items() if not s["ok"]]
        print(f"onnxport: the quantized model is below its accuracy tolerance on {', '.join(bad)}; "
              f"{args.output} was written", file=sys.stderr)
        return 1
    return 0


def _finite(x):
    """NaN and infinities as null, so that the report is strict JSON."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x
