"""``onnxport validate MODEL.onnx TARGET``: compare an ONNX file with the PyTorch model it came from."""

from __future__ import annotations

import argparse
import json

from onnxport.cli import report_html
from onnxport.cli.target import add_target_arguments


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "validate",
        help="compare an ONNX file with its PyTorch model at several sizes; locate the first divergence",
        description="Run the ONNX file in onnxruntime and the PyTorch target in eager mode on the target's example "
                    "inputs and on other sizes of every dynamic dimension, and print the comparison. With "
                    "--find-divergence, a mismatch is traced to the first FX node / ONNX node pair that differs. "
                    "With --generate N, a decoder exported with its cache (past_key_values.* in, present.* out) "
                    "also decodes N tokens greedily in onnxruntime, compared step by step with the model's own "
                    "generate. With a config's [stream] section (-c), the file also runs chunk after chunk from the "
                    "initial state, its state outputs fed back, compared with eager doing the same. Exit codes: "
                    "0 all match, 1 mismatch, 2 user error.",
    )
    p.add_argument("onnx_file", metavar="MODEL.onnx", help="the ONNX file to check")
    add_target_arguments(p)
    for action in p._actions:  # the shared MODEL positional is the PyTorch target here
        if action.dest == "model":
            action.metavar = "TARGET"
            action.help = "path/to/file.py:factory or module.path:factory building the PyTorch model"
    p.add_argument("--checkpoint", metavar="PT", help="state dict loaded into the target before comparing "
                                                       "(the weights the ONNX file was exported with)")
    p.add_argument("--find-divergence", action="store_true",
                   help="on a mismatch, report the first node whose values differ, with the model's source line")
    p.add_argument("--atol", type=float, help="judge every float output by |ONNX - eager| <= atol + rtol |eager| per "
                                               "element (default: float32 outputs against eager PyTorch in float64)")
    p.add_argument("--rtol", type=float, help="relative tolerance of --atol's judgement (default by dtype: 1e-3 "
                                              "for float32)")
    p.add_argument("--generate", type=int, metavar="N",
                   help="also decode N tokens greedily in onnxruntime and compare them with the model's generate "
                        "(a transformers model whose decoder was exported with its cache)")
    p.add_argument("--prompt", action="append", default=[], metavar="IDS",
                   help='token ids of a prompt, e.g. "5 17 42" (repeatable: a batch, left-padded to the longest); '
                        "default: the target's example input_ids")
    p.add_argument("--runtime", choices=("onnxruntime", "openvino", "reference"),
                   help="what runs MODEL.onnx: onnxruntime, openvino (CPU, float32; pip install onnxport[openvino]) "
                        "or reference (onnx.reference); default: the runtime of the target the file was exported for")
    p.add_argument("--report", metavar="JSON", help="write the comparison as JSON")
    report_html.add_argument(p)
    return p


@report_html.on_failure(lambda args: f"onnxport validate {args.onnx_file}")
def run(args: argparse.Namespace) -> int:
    from onnxport.cli.paths import check_output_paths
    from onnxport.cli.target import export_from_args
    from onnxport.verify.divergence import validate_file

    check_output_paths({"--report": args.report, "--report-html": args.report_html})
    # the positional after MODEL.onnx is the target (add_target_arguments names it "model")
    reference = export_from_args(args, checkpoint=args.checkpoint)
    report, found = validate_file(args.onnx_file, reference, atol=args.atol, rtol=args.rtol,
                                  divergence=args.find_divergence, runtime=args.runtime)
    print(report)
    _write_html(args, reference, report)
    payload = report.to_dict()
    if not report.ok and args.find_divergence:
        print()
        print(found if found is not None else "no intermediate value differs: the outputs differ only at the end")
        payload["divergence"] = None if found is None else dict(vars(found))
    ok = report.ok
    if args.generate:
        from onnxport.verify.generation import check_generation_of_file

        generated = check_generation_of_file(args.onnx_file, reference, args.generate, _prompts(args.prompt))
        print()
        print(generated)
        payload["generation"] = generated.to_dict()
        ok = ok and generated.ok
    stream = _stream(args, reference)
    if stream is not None:
        print()
        print(stream)
        payload["stream"] = stream.to_dict()
        ok = ok and stream.ok
    if args.report:
        with open(args.report, "w") as f:
            json.dump(payload, f, indent=2, default=str)
    print("\nall outputs match" if ok else "\nMISMATCH")
    return 0 if ok else 1


def _stream(args: argparse.Namespace, reference):
    """The streaming check of the config's ``[stream]`` section (``config.stream.check_config_stream``) run on
    MODEL.onnx, as ``onnxport export`` runs it on its export; None without a config or a ``[stream]``."""
    cfg = getattr(reference, "config", None)
    if cfg is None or getattr(cfg, "stream", None) is None:
        return None
    import onnx_ir as ir

    from onnxport.config.stream import check_config_stream

    return check_config_stream(reference.replace(model=ir.load(args.onnx_file)), cfg)


def _write_html(args: argparse.Namespace, reference, report) -> None:
    """``--report-html``: the ONNX file's graph with the validation table, and what capturing the
    target decided (its constraints and capture steps)."""
    if args.report_html:
        import onnx_ir as ir

        checked = reference.replace(model=ir.load(args.onnx_file), validation=report, optimization={}, timings={})
        report_html.write(args, checked, f"onnxport validate {args.onnx_file} against {args.model}")


def _prompts(texts: list[str]) -> list[list[int]] | None:
    """``["5 17 42", "8, 9"]`` -> ``[[5, 17, 42], [8, 9]]``; None when no ``--prompt`` was given."""
    from onnxport.errors import ValidationError

    out = []
    for text in texts:
        try:
            out.append([int(t) for t in text.replace(",", " ").split()])
        except ValueError as e:
            raise ValidationError(f"--prompt {text!r} is not a list of token ids",
                                  hint='write token ids separated by spaces, e.g. --prompt "5 17 42"') from e
        if not out[-1]:
            raise ValidationError("--prompt is empty", hint='give token ids, e.g. --prompt "5 17 42"')
    return out or None
