"""Graph size of third-party models: onnxport.to_onnx against torch.onnx.export(dynamo=True).

Each model is exported by both on the same dynamic spec; the table gives the nodes of each graph
(main graph, subgraphs and local functions, ``pipeline.node_count``), the ratio onnxport / torch.onnx
and whether each graph matches eager PyTorch through onnxruntime at two other sizes of every dynamic
dimension (``ok``, ``WRONG`` or ``FAILED``). A model whose package is not installed is left out.

    python benchmarks/graph_size.py [--models efficientnet_b0,bert] [--markdown GRAPH_SIZE.md]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import platform
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import onnx_ir as ir  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from third_party import import_timm, import_torchvision  # noqa: E402

import onnxport  # noqa: E402
from onnxport.optimize.pipeline import node_count  # noqa: E402

logging.getLogger("torch.onnx").setLevel(logging.ERROR)
IMAGE = {"x": {0: "batch", 2: "height", 3: "width"}}
IMAGE_SIZES = [(2, 3, 64, 64), (3, 3, 96, 80), (1, 3, 128, 160)]


def _image(model: torch.nn.Module):
    return model.eval(), IMAGE, [(torch.randn(*s),) for s in IMAGE_SIZES]


def _timm(name: str):
    timm = import_timm()
    return None if timm is None else _image(timm.create_model(name, pretrained=False))


def _torchvision(name: str):
    tv = import_torchvision()
    return None if tv is None else _image(getattr(tv.models, name)(weights=None))


def _smp_unet():
    if import_timm() is None:
        return None
    try:
        import segmentation_models_pytorch as smp
    except ImportError:
        return None
    model = smp.Unet("resnet18", encoder_weights=None, classes=2).eval()
    # the height and width it takes (it raises on others): multiples of 32
    spec = {"x": {0: "batch", 2: 32 * torch.export.Dim("height"), 3: 32 * torch.export.Dim("width")}}
    return model, spec, [(torch.randn(*s),) for s in [(2, 3, 64, 64), (3, 3, 96, 128), (1, 3, 160, 32)]]


def _text(kind: str):
    import transformers

    common = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    if kind == "bert":
        model = transformers.BertModel(transformers.BertConfig(vocab_size=100, **common))
        spec = {"input_ids": {0: "batch", 1: "seq"}}
        sizes = [(2, 8), (3, 5), (1, 13)]
        return model.eval(), spec, [(torch.randint(0, 100, s),) for s in sizes]
    model = transformers.ViTModel(transformers.ViTConfig(image_size=32, patch_size=8, **common))
    spec = {"pixel_values": {0: "batch"}}
    return model.eval(), spec, [(torch.randn(b, 3, 32, 32),) for b in (2, 3, 1)]


MODELS = {
    "timm efficientnet_b0": lambda: _timm("efficientnet_b0"),
    "timm mobilenetv3_small_100": lambda: _timm("mobilenetv3_small_100"),
    "timm resnet18": lambda: _timm("resnet18"),
    "timm convnext_atto": lambda: _timm("convnext_atto"),
    "torchvision resnet18": lambda: _torchvision("resnet18"),
    "torchvision mobilenet_v3_small": lambda: _torchvision("mobilenet_v3_small"),
    "smp Unet resnet18": _smp_unet,
    "transformers BERT (tiny)": lambda: _text("bert"),
    "transformers ViT (tiny)": lambda: _text("vit"),
}


def _outputs(out) -> list[np.ndarray]:
    if isinstance(out, torch.Tensor):
        return [out.detach().numpy()]
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    if isinstance(out, (list, tuple)):
        return [a for o in out for a in _outputs(o)]
    return []


def _right(model: ir.Model, module, inputs: list[tuple]) -> str:
    """'ok' when onnxruntime matches eager at each of ``inputs`` (1e-3 of the output's scale), else 'WRONG'."""
    import onnx

    session = ort.InferenceSession(onnx.ModelProto.SerializeToString(ir.to_proto(model)),
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for args in inputs:
        with torch.no_grad():
            want = _outputs(module(*args))
        got = session.run(None, dict(zip(names, [a.numpy() for a in args])))
        for w, g in zip(want, got):
            if w.shape != g.shape or not np.allclose(g, w, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(w).max()))):
                return "WRONG"
    return "ok"


def _torch_onnx(module, args, spec) -> ir.Model:
    dims: dict[str, torch.export.Dim] = {}
    shapes = {k: {a: dims.setdefault(n, torch.export.Dim(n)) if isinstance(n, str) else n for a, n in v.items()}
              for k, v in spec.items()}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return torch.onnx.export(module, args, dynamo=True, dynamic_shapes=shapes).model


def measure(name: str) -> tuple | None:
    """(onnxport nodes, torch.onnx nodes, onnxport status, torch.onnx status) of one model, None
    when its package is not installed."""
    torch.manual_seed(0)
    case = MODELS[name]()
    if case is None:
        return None
    module, spec, inputs = case
    row = []
    for export in (lambda: onnxport.to_onnx(module, inputs[0], dynamic_shapes=spec).model,
                   lambda: _torch_onnx(module, inputs[0], spec)):
        try:
            model = export()
            row.append((node_count(model), _right(model, module, inputs)))
        except Exception as e:  # noqa: BLE001 - one exporter failing never stops the table
            row.append((None, f"FAILED ({type(e).__name__})"))
    return row[0][0], row[1][0], row[0][1], row[1][1]


def table(names: list[str]) -> str:
    lines = ["| model | onnxport nodes | torch.onnx nodes | ratio | onnxport | torch.onnx |",
             "| --- | ---: | ---: | ---: | --- | --- |"]
    for name in names:
        got = measure(name)
        if got is None:
            print(f"{name}: not installed, left out", file=sys.stderr)
            continue
        ours, theirs, ok_ours, ok_theirs = got
        ratio = f"{ours / theirs:.2f}" if ours and theirs else "-"
        lines.append(f"| {name} | {ours if ours is not None else '-'} | {theirs if theirs is not None else '-'} | "
                     f"{ratio} | {ok_ours} | {ok_theirs} |")
        print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated names (default: all)")
    parser.add_argument("--markdown", help="also write the table to this file")
    a = parser.parse_args()
    names = [n for n in MODELS for want in a.models.split(",") if want.strip() and want.strip() in n]
    warnings.filterwarnings("ignore")
    text = table(list(dict.fromkeys(names)))
    header = (f"{time.strftime('%Y-%m-%d', time.gmtime())}, {platform.machine()} {os.cpu_count()} cores, "
              f"torch {torch.__version__}, onnxruntime {ort.__version__}; dynamic dims checked at two more sizes "
              f"against eager")
    print(header + "\n\n" + text)
    if a.markdown:
        Path(a.markdown).write_text(f"# Graph size against torch.onnx\n\n{header}\n\n{text}\n")


if __name__ == "__main__":
    main()
