"""What the export subcommands share: the step display (``Progress``), the options and the ending of
an export that writes one model (``add_result_arguments``, ``save_export``, ``report_export``:
quantize, save, print the table, write the JSON report, the exit code), and strict JSON."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
from typing import Any

from onnxport.cli.quiet import terminal


class Progress:
    """Step display, fed ``(step, seconds)`` as each step ends (an export door's ``on_step``): a rich
    live table on a terminal once a run lasts over a second, plain ``onnxport: STEP N.NNs`` lines on
    stderr otherwise (the terminal's: ``cli.quiet.terminal``); nothing when ``quiet``."""

    DELAY = 1.0

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.screen = terminal()
        self.tty = sys.stdout.isatty() and self.screen.isatty()
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
                self.live = Live(self._render(), console=Console(file=self.screen), refresh_per_second=8,
                                 transient=False, redirect_stdout=False, redirect_stderr=False)
                self.live.start()

    def __call__(self, step: str, seconds: float) -> None:
        if self.quiet:
            return
        with self.lock:
            self.steps[step] = seconds
            if self.live is not None:
                self.live.update(self._render())
            elif not self.tty:
                print(f"onnxport: {step} {seconds:.2f}s", file=self.screen, flush=True)

    def close(self) -> None:
        with self.lock:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            if self.live is not None:
                self.live.update(self._render())
                self.live.stop()
                self.live = None


def add_result_arguments(p: argparse.ArgumentParser) -> None:
    """The options of what is done with one exported model: ``--quantize`` (with ``--keep-float``,
    ``--block-size``), ``--report``, ``--quiet``, ``--verbose``, ``--debug``."""
    p.add_argument("--quantize", metavar="MODE", choices=("int8", "int8-static", "int4"),
                   help="write the model quantized: int8 (dynamic, per-channel weights), int8-static (QDQ, "
                        "calibrated on generated example-like inputs) or int4 (weight-only MatMulNBits); "
                        "embeddings and the final projection stay in float; validation then reports the "
                        "accuracy against eager PyTorch's float model (top-1 agreement, cosine similarity)")
    p.add_argument("--keep-float", dest="keep_float", action="append", default=[], metavar="NAME",
                   help="with --quantize: a weight-name prefix (module path, e.g. lm_head) kept in float (repeatable)")
    p.add_argument("--block-size", type=int, default=32, metavar="N",
                   help="with --quantize int4: block size (default 32)")
    p.add_argument("--report", metavar="JSON", help="write the validation table as JSON")
    p.add_argument("--quiet", action="store_true", help="print neither progress nor the table")
    add_verbose_argument(p)
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show full tracebacks and details on errors, and the capture steps as they ran")


def add_verbose_argument(p: argparse.ArgumentParser) -> None:
    """``--verbose``: show what other libraries print during the command (``cli.quiet``)."""
    p.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="show what other libraries print (their warnings and log lines), held back otherwise")


def save_export(result: Any, args: argparse.Namespace, progress: Progress) -> Any:
    """Quantize ``result`` as ``--quantize`` asks, write it to ``-o`` and, with ``--debug``, print
    the capture steps as they ran; returns the result written. Raises ``ConfigError`` for
    ``--keep-float`` without ``--quantize``, and ``SaveError``."""
    from onnxport.errors import ConfigError

    if args.quantize:
        result = _quantized(result, args, progress)
    elif args.keep_float:
        raise ConfigError("--keep-float is for --quantize", hint="add --quantize int8 (or int8-static, int4)")
    t0 = time.perf_counter()
    result.save(args.output)
    progress("save", time.perf_counter() - t0)
    if getattr(args, "debug", False) and result.captured is not None:
        from onnxport.capture.trace import debug_text

        progress.close()
        print(debug_text(result.captured.attempts))
    return result


def report_export(result: Any, args: argparse.Namespace, stream: Any = None) -> int:
    """Print the written model and its validation table, write ``--report``; returns 0, or 1 when
    the validation found a mismatch (the file is written). ``stream``: the ``StreamReport`` of a
    config's ``[stream]`` check (``onnxport.verify.stream_report``), its table printed after the
    validation's, written under ``"stream"`` in the report; 1 as well when it failed."""
    report = result.validation
    if result.quantization is not None:
        return _report_accuracy(result, args, stream)
    if not args.quiet:
        print(f"wrote {args.output}: {result!r}")
        if report is not None:
            print(report)
        _print_stream(stream)
    if args.report:
        payload = report.to_dict() if report is not None else {"ok": None, "checks": []}
        payload.update({"model": os.path.abspath(args.output), "timings": dict(result.timings)})
        _write_report(args.report, payload, stream)
    code = 0
    if report is not None and not report.ok:
        bad = [c for c in report.checks if not c.ok and not c.rejected]
        print(f"onnxport: validation mismatch on {len(bad)} of {len(report.checks)} checks "
              f"(first: {bad[0].output} at {bad[0].sizes or bad[0].inputs}); {args.output} was written",
              file=terminal())
        code = 1
    return max(code, _stream_code(stream, args))


def _print_stream(stream: Any) -> None:
    if stream is not None:
        print()
        print(stream)


def _write_report(path: str, payload: dict, stream: Any) -> None:
    """``payload`` to ``path``, with the streaming check's report under ``"stream"`` when it ran."""
    if stream is not None:
        payload["stream"] = stream.to_dict()
    write_json(path, payload)


def _stream_code(stream: Any, args: argparse.Namespace) -> int:
    """1 with a line on stderr when the streaming check failed, else 0."""
    if stream is None or stream.ok:
        return 0
    bad = [c for c in stream.checks if not c.ok]
    first = stream.first_failure
    where = f"first: {first.output} at {first.inputs}, {first.sizes}" if first is not None else "no step compared"
    print(f"onnxport: streaming mismatch on {len(bad)} of {len(stream.checks)} checks ({where}); "
          f"{args.output} was written", file=terminal())
    return 1


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


def _report_accuracy(result, args, stream=None) -> int:
    """Print and write the accuracy report of a quantized export (and the float model's streaming
    check, ``stream``); 1 when below its tolerance or when the stream failed."""
    report = result.validation
    if not args.quiet:
        print(f"wrote {args.output}: {result!r}")
        print(report if report is not None else result.quantization)
        _print_stream(stream)
    if args.report:
        payload = report.to_dict() if report is not None else {"ok": None, "quantization": str(result.quantization)}
        payload.update({"model": os.path.abspath(args.output), "timings": dict(result.timings)})
        _write_report(args.report, payload, stream)
    code = 0
    if report is not None and not report.ok:
        bad = [name for name, s in report.summary().items() if not s["ok"]]
        print(f"onnxport: the quantized model is below its accuracy tolerance on {', '.join(bad)}; "
              f"{args.output} was written", file=terminal())
        code = 1
    return max(code, _stream_code(stream, args))


def write_json(path: str, payload: Any) -> None:
    """Write ``payload`` to ``path`` as strict JSON (``finite``), indented."""
    with open(path, "w") as f:
        json.dump(finite(payload), f, indent=2, default=str)


def finite(x: Any) -> Any:
    """NaN and infinities as null, so that the report is strict JSON."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    return x


def add_target_argument(p: argparse.ArgumentParser, config: bool = False) -> None:
    """``--target`` (``args.runtime_target``: ``TARGET`` is the model): the runtime an export is for
    (``to_onnx``'s ``target``, ``onnxport.targets``), ``targets.DEFAULT_TARGET`` where not given; for a
    command reading a config (``config``), None where not given: the config's ``[export] target`` decides."""
    from onnxport.targets import DEFAULT_TARGET, TARGET_NAMES

    default = f"a config's [export] target, else {DEFAULT_TARGET}" if config else DEFAULT_TARGET
    p.add_argument("--target", dest="runtime_target", choices=TARGET_NAMES, default=None if config else DEFAULT_TARGET,
                   help=f"the runtime the model is for (default: {default}): "
                        "onnxruntime (the export as it is), portable (no "
                        "local functions, loop bodies reading only their inputs, standard operators: it loads in "
                        "other runtimes) or openvino (portable, and the forms OpenVINO computes right); validation "
                        "runs on that runtime")
