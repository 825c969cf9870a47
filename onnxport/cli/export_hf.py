"""``onnxport export-hf DIR -o OUT --task TASK``: a local ``save_pretrained`` directory exported by task
(``onnxport.pretrained.export_pretrained``)."""

from __future__ import annotations

import argparse
import os
import time

from onnxport.cli import report_html
from onnxport.cli.common import add_target_argument, add_verbose_argument

EPILOG = """\
tasks:
  feature-extraction               model.onnx: last_hidden_state
  text-classification              model.onnx: logits
  image-classification             model.onnx: logits
  automatic-speech-recognition     encoder_model.onnx + decoder_model.onnx with its cache (Whisper);
                                   model.onnx: logits (CTC models)
  text-generation-with-past        model.onnx with its cache + genai_config.json (onnxruntime-genai)
  text2text-generation-with-past   encoder_model.onnx + decoder_model.onnx with its cache (T5, BART)
  image-text-to-text               vision_model.onnx + embedding_model.onnx + text_model.onnx with its
                                   cache (Llava)

examples:
  onnxport export-hf ./tiny-llama -o out/llama --task text-generation-with-past
  onnxport export-hf ./bert-sst2 -o out/bert --task text-classification --report out/bert/report.json

Nothing is downloaded: DIR is a directory save_pretrained() wrote (config.json, model.safetensors).
exit codes: 0 success; 1 a validation or decoding mismatch (the files are written, the tables show
where); 2 user error (directory, task, export), nothing written.
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``export-hf`` subcommand and return its parser."""
    from onnxport.pretrained import TASKS

    p = subparsers.add_parser(
        "export-hf", help="export a Hugging Face model directory by task, validate it, check its decoding",
        description="Load the model of a local save_pretrained() directory for a task, export it to ONNX with\n"
                    "dims named as Optimum and onnxruntime-genai name them, compare onnxruntime with eager\n"
                    "PyTorch at other sizes, and for a generation task compare greedy decoding with generate().",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("directory", metavar="DIR", help="the model directory (config.json and weights)")
    p.add_argument("-o", "--output", metavar="OUT", required=True, help="directory to write the models into (created)")
    p.add_argument("--task", choices=list(TASKS), help="the task (default: the head config.json's architectures names)")
    p.add_argument("--opset", type=int, default=20,
                   help="ONNX opset (18 to 23; default 20); 24: a decoder with a fixed-buffer cache (TensorScatter, "
                        "Attention with nonpad_kv_seqlen), checked against eager by steps and by decoding")
    add_target_argument(p)
    p.add_argument("--quantize", choices=["int4", "int8"],
                   help="quantize the decoder for onnxruntime-genai on CPU: int4 MatMulNBits (accuracy level 4) or "
                        "int8 dynamic (MatMulInteger), lm_head included; accuracy reported against the float model")
    p.add_argument("--block-size", type=int, default=32, metavar="N", help="int4 block size (default 32)")
    p.add_argument("--no-validate", dest="validate", action="store_false",
                   help="skip the comparison with eager PyTorch")
    p.add_argument("--generate", type=int, default=16, metavar="N",
                   help="tokens of the greedy decoding checks of a generation task (default 16; 0 skips them)")
    p.add_argument("--report", metavar="JSON", help="write the checks as JSON")
    report_html.add_argument(p)
    p.add_argument("--quiet", action="store_true", help="print neither progress nor the tables")
    add_verbose_argument(p)
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show full tracebacks on errors")
    return p


@report_html.on_failure(lambda args: f"onnxport export-hf {args.directory}")
def run(args) -> int:
    """Export, save and report; returns 0 or 1 (a check failed, files written). Errors are
    ``onnxport.ExportError`` (exit code 2, nothing written)."""
    from onnxport.cli.common import Progress, write_json
    from onnxport.cli.quiet import terminal
    from onnxport.cli.paths import check_output_paths
    from onnxport.errors import SaveError
    from onnxport.pretrained import export_pretrained

    progress = Progress(quiet=args.quiet)
    try:
        if os.path.exists(args.output) and not os.path.isdir(args.output):
            raise SaveError(f"-o {args.output} is a file: the output of export-hf is a directory")
        check_output_paths({"--report": args.report, "--report-html": args.report_html})
        result = export_pretrained(args.directory, args.task, validate=args.validate, generate=args.generate,
                                   opset=args.opset, on_step=progress, target=args.runtime_target,
                                   quantize=args.quantize, block_size=args.block_size)
        start = time.perf_counter()
        paths = result.save(args.output)
        progress("save", time.perf_counter() - start)
        report_html.write(args, result, f"onnxport export-hf {args.directory}")
    finally:
        progress.close()
    if not args.quiet:
        print(result)
        print()
        for path in paths:
            print(f"wrote {path}")
    validation = {stem: part.validation for stem, part in result.parts.items() if part.validation is not None}
    if args.report:
        write_json(args.report, {
            "task": result.task, "source": os.path.abspath(result.source), "ok": result.ok, "files": paths,
            "validation": {k: v.to_dict() for k, v in validation.items()},
            "generation": [{"label": label, **g.to_dict()} for label, g in result.generation]})
    if not result.ok:
        failed = [f"validation of {k}.onnx" for k, v in validation.items() if not v.ok]
        failed += [f"decoding ({label})" for label, g in result.generation if not g.ok]
        print(f"onnxport: {', '.join(failed)} failed; {args.output} was written", file=terminal())
        return 1
    return 0
