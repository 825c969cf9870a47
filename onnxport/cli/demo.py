"""``onnxport demo``: export real models with dynamic dimensions, validate them, write the files."""

from __future__ import annotations

import argparse
import os
import time


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "demo",
        help="export a CNN with padding='same' convs and a Transformer encoder, validate, write .onnx files",
        description="Export the demo models (a ResNet-style CNN with padding='same' convolutions and a 2-layer "
                    "Transformer encoder, both with dynamic batch and time), validate each against eager "
                    "PyTorch at three sizes, print the tables and write the .onnx files.",
    )
    p.add_argument("--out", default="out", help="directory for the .onnx files (default: out)")
    p.add_argument("--opset", type=int, default=20, help="ONNX opset (default 20)")
    return p


def run(args: argparse.Namespace) -> int:
    import warnings

    from onnxport import demo_models
    from onnxport.export import to_onnx

    warnings.filterwarnings("ignore", category=UserWarning)  # torch's notes on even 'same' kernels

    os.makedirs(args.out, exist_ok=True)
    ok = True
    for name, build, example in demo_models.DEMOS:
        model = build()
        inputs, dynamic_shapes = example()
        t0 = time.perf_counter()
        result = to_onnx(model, inputs, dynamic_shapes=dynamic_shapes, opset=args.opset)
        seconds = time.perf_counter() - t0
        path = result.save(os.path.join(args.out, f"{name}.onnx"))
        report = result.validate()
        ok = ok and report.ok
        print(f"== {name}: exported in {seconds:.1f}s -> {path}")
        print(f"   {result!r}")
        print(report)
        print()
    print("all models match eager PyTorch" if ok else "MISMATCH: see the tables above")
    return 0 if ok else 1
