"""Every runtime target on every runtime: the zoo exported with ``to_onnx(target=...)`` for each target
(``onnxruntime``, ``portable``, ``openvino``), each export validated on each runtime (``onnxruntime``,
``openvino``, ``reference``: ``onnx.reference.ReferenceEvaluator``) against eager PyTorch, one markdown
table out.

Models: the project's own zoo (``benchmarks/models.py``: core, control flow (scan, Python loop, cond,
cond in a scan, while_loop), RNN taggers (packed sequences from lengths), Conformer, U-Net, tiny Hugging
Face BERT, GPT-2, Llama, ViT, Whisper encoder; ``tests/speech_zoo.py``: torchaudio's Conformer, Emformer
and RNN-T predictor, SpeechBrain's CRDNN, ESPnet's Conformer) and third-party classes
(``benchmarks/models_third_party.py``: timm resnet18, mobilenetv3 and efficientvit, Hugging Face Phi,
T5, wav2vec2, a Llama decoding step with its cache; a T5 encoder on a padding mask built here). Seeded
random weights, nothing downloaded.

Each cell: ``right`` (every output within validation's tolerance at the example and the model's other
input sets), ``wrong (max error)`` (the largest |onnx - eager| of the failing outputs), ``no load: ...``
(the runtime's first words on why it cannot load the model), ``run fails: ...`` (it loads, then raises
running it), ``refused: ...`` (the export for that target raises, its first line). The models are small enough
for the reference evaluator on every one (resnet18 at 2x3x64x64: about 1 s). Nodes: every node of the graph, of its
subgraphs and of its local functions.

    python benchmarks/targets.py [--models mlp,bert] [--markdown benchmarks/TARGETS.md]
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import onnx_ir as ir  # noqa: E402
import torch  # noqa: E402

import onnxport  # noqa: E402
from case import Case  # noqa: E402
from models import MODELS  # noqa: E402
from onnxport.verify.runtimes import openvino_available  # noqa: E402

TARGETS = ("onnxruntime", "portable", "openvino")
RUNTIMES = ("onnxruntime", "openvino", "reference")


class T5Encoder(torch.nn.Module):
    """transformers' T5EncoderModel on input_ids and a padding mask, last_hidden_state."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def t5_encoder() -> Case:
    """Tiny T5EncoderModel (2 layers, width 64, relative position buckets), dynamic batch and length,
    the padding mask zero at the end of one row."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.T5Config(vocab_size=1000, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4)
    model = T5Encoder(transformers.T5EncoderModel(cfg)).eval()
    gen = torch.Generator().manual_seed(0)

    def inputs(batch, seq):
        mask = torch.ones(batch, seq, dtype=torch.int64)
        mask[0, seq - 3:] = 0
        return torch.randint(0, 1000, (batch, seq), generator=gen), mask

    dims = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    return Case(model, inputs(2, 9), dims, [inputs(3, 17), inputs(1, 4)])


def _speech(name: str):
    def build() -> Case:
        import speech_zoo

        made = speech_zoo.build(name)
        return Case(made.model, made.args, made.dynamic_shapes, list(made.others))

    build.__doc__ = f"tests/speech_zoo.py {name}"
    return build


def _third_party(name: str):
    def build() -> Case:
        import models_third_party

        return getattr(models_third_party, name)()

    return build


def _timm(name: str):
    def build() -> Case:
        import models_third_party

        return models_third_party._timm(name)

    return build


# name -> the factory of its Case
ZOO = {
    "mlp": MODELS["mlp"],
    "small_cnn": MODELS["small_cnn"],
    "resnet_same_cnn": MODELS["resnet_same_cnn"],
    "transformer_encoder": MODELS["transformer_encoder"],
    "scan_cdist": MODELS["scan_cdist"],
    "loop_cdist (Python loop)": MODELS["loop_cdist"],
    "scan_decoder": MODELS["scan_decoder"],
    "cond": MODELS["cond"],
    "cond_in_scan": MODELS["cond_in_scan"],
    "while_loop": MODELS["while_loop"],
    "lstm_tagger": MODELS["lstm_tagger"],
    "lstm_tagger_state": MODELS["lstm_tagger_state"],
    "lstm_packed_tagger": MODELS["lstm_packed_tagger"],
    "gru_packed_tagger": MODELS["gru_packed_tagger"],
    "conformer": MODELS["conformer"],
    "unet": MODELS["unet"],
    "bert": MODELS["bert"],
    "gpt2": MODELS["gpt2"],
    "llama": MODELS["llama"],
    "phi": _third_party("phi"),
    "vit": MODELS["vit"],
    "whisper_encoder": MODELS["whisper_encoder"],
    "t5_encoder": t5_encoder,
    "t5 (encoder-decoder)": _third_party("t5"),
    "wav2vec2": _third_party("wav2vec2"),
    "llama_cache (decoding step)": _third_party("llama_cache"),
    "timm resnet18": _timm("resnet18"),
    "timm mobilenetv3_small_050": _timm("mobilenetv3_small_050"),
    "timm efficientvit_b0": _timm("efficientvit_b0"),
    "torchaudio_conformer": _speech("torchaudio_conformer"),
    "torchaudio_emformer": _speech("torchaudio_emformer"),
    "torchaudio_rnnt_predictor": _speech("torchaudio_rnnt_predictor"),
    "speechbrain_crdnn": _speech("speechbrain_crdnn"),
    "espnet_conformer": _speech("espnet_conformer"),
}


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    line = text[0] if text else type(error).__name__
    details = [t.strip().removeprefix("detail: ") for t in text if t.strip().startswith("detail: ")]
    if line.endswith("(detail below)") and details:  # OpenVINO's words are in the detail
        parts = details[0].split("; ")  # "Check '...' failed at <source>:", what failed, "Conversion is failed..."
        line = line.removesuffix("(detail below)") + (parts[1] if len(parts) > 2 else parts[-1])
    return line[:160].replace("|", "/")


def node_count(result) -> int:
    """Every node of the model's graph and of its subgraphs (functions' bodies included)."""
    model = result.model
    count = sum(1 for _ in ir.traversal.RecursiveGraphIterator(model.graph))
    for function in model.functions.values():
        count += sum(1 for _ in ir.traversal.RecursiveGraphIterator(function))
    return count


def cell(result, case: Case, runtime: str) -> str:
    """One runtime's verdict on one export: right / wrong (max error) / no load (why)."""
    try:
        report = result.validate(inputs=case.others or None, sizes=[], values=[], runtime=runtime)
    except Exception as e:  # noqa: BLE001 - a runtime that cannot load or run the model: its words
        return f"no load: {_first_line(e).split('could not load the model: ', 1)[-1]}"
    if report.ok:
        return "right"
    failed_checks = [c for c in report.checks if not c.ok and not c.rejected]
    if all(c.output == "*" for c in failed_checks):  # the runtime loaded the model and raised running it
        return f"run fails: {failed_checks[0].note.split(': ', 1)[-1][:160].replace('|', '/')}"
    failed = [c.max_abs for c in failed_checks]
    worst = max((x for x in failed if not math.isnan(x)), default=float("nan"))
    return f"**wrong** ({worst:.2g})"


def run(names: list[str]) -> list[tuple]:
    """For each model and target: (model, target, nodes or None, {runtime: cell}, seconds)."""
    rows = []
    for name in names:
        factory = ZOO[name]
        try:
            case = factory()
        except Exception as e:  # noqa: BLE001 - a package missing: the row says so
            rows.append((name, "-", None, {r: f"not built: {_first_line(e)}" for r in RUNTIMES}, 0.0))
            continue
        for target in TARGETS:
            start = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = onnxport.to_onnx(case.model, case.args, dynamic_shapes=case.dynamic_shapes,
                                              target=target, **case.onnxport_kwargs)
            except Exception as e:  # noqa: BLE001 - the target refuses the model
                rows.append((name, target, None, {r: f"refused: {_first_line(e)}" for r in RUNTIMES},
                             time.perf_counter() - start))
                print(f"{name} / {target}: refused: {_first_line(e)}", flush=True)
                continue
            cells = {}
            for runtime in RUNTIMES:
                if runtime == "openvino" and not openvino_available():
                    cells[runtime] = "OpenVINO not installed"
                else:
                    cells[runtime] = cell(result, case, runtime)
            seconds = time.perf_counter() - start
            rows.append((name, target, node_count(result), cells, seconds))
            print(f"{name} / {target}: {node_count(result)} nodes, {cells} ({seconds:.1f} s)", flush=True)
    return rows


def markdown(rows: list[tuple], command: str, seconds: float) -> str:
    """The table with its heading: date, machine, versions, the command."""
    import onnxruntime

    try:
        import openvino

        ov = openvino.__version__.split("-")[0]
    except ImportError:
        ov = "not installed"
    lines = [
        "# Targets x runtimes",
        "",
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()} "
        f"{platform.processor() or platform.system()}, {os.cpu_count()} cores; torch {torch.__version__}, "
        f"onnxruntime {onnxruntime.__version__}, OpenVINO {ov}. `{command}` ({seconds / 60:.1f} min).",
        "",
        "Each model exported once per target (`to_onnx(target=...)`), each export validated on each runtime "
        "(`result.validate(runtime=...)`) against eager PyTorch at the example and the model's other input "
        "sets. right: every output within tolerance; **wrong** (largest error); no load: the runtime's "
        "first words; run fails: the runtime raised running it; refused: the export for that target raises.",
        "",
        "| model | target | nodes | onnxruntime | OpenVINO | reference |",
        "|---|---|---:|---|---|---|",
    ]
    for name, target, nodes, cells, _ in rows:
        lines.append(f"| {name} | {target} | {'' if nodes is None else nodes} | "
                     + " | ".join(cells[r] for r in RUNTIMES) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(ZOO), help="comma-separated names of ZOO")
    parser.add_argument("--markdown", default=None, help="also write the table to this file")
    args = parser.parse_args()
    names = [n.strip() for n in args.models.split(",")] if args.models != ",".join(ZOO) else list(ZOO)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // 2))
    warnings.filterwarnings("ignore")  # the reference evaluator's NumPy warnings on masked logs
    start = time.perf_counter()
    rows = run(names)
    command = "python benchmarks/targets.py" + (f" --markdown {args.markdown}" if args.markdown else "")
    text = markdown(rows, command, time.perf_counter() - start)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)


if __name__ == "__main__":
    main()
