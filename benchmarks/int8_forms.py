"""int8 forms of a decoder's projections in onnxruntime, side by side: latency and error.

``export-hf --quantize int8`` writes onnxruntime's dynamic int8 (``DynamicQuantizeLinear`` +
``MatMulInteger``, fused into ``DynamicQuantizeMatMul`` when onnxruntime loads the model: weights int8
per output channel, activations int8 per tensor at run time). onnxruntime-genai's model builder
writes its int8 as weight-only ``MatMulNBits`` with ``bits=8`` (symmetric blocks of 32 input rows,
``accuracy_level=4``). Both are measured here on the projection shapes of Qwen2-0.5B (hidden 896,
4864 intermediate; q/o 896x896, k/v 896x128, gate/up 896x4864, down 4864x896), each one ONNX
``MatMul`` with a seeded N(0, 0.02) weight, quantized by onnxruntime.quantization (the arithmetic
onnxport calls), beside float32 and int4 (``MatMulNBits``, ``bits=4``):

- latency: onnxruntime on one thread, ``M`` rows of activations (1: a decoding step, 64: a
  prompt), the forms alternated (order reversed every other round) after one warm-up each, median
  with min and max over ``--rounds`` rounds of ``--calls`` calls, summed over the seven projections
  of one layer;
- error: ``max |y - y64| / max |y64|`` against the float64 product, worst over the projections.

    python benchmarks/int8_forms.py [--rounds 9] [--calls 100] [--markdown benchmarks/INT8_FORMS.md]
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import statistics
import sys
import time
from contextlib import redirect_stderr, redirect_stdout

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

PROJECTIONS = {"q": (896, 896), "k": (896, 128), "v": (896, 128), "o": (896, 896), "gate": (896, 4864),
               "up": (896, 4864), "down": (4864, 896)}
FORMS = ("float32", "dynamic int8", "MatMulNBits int8", "MatMulNBits int4")


def _matmul(weight: np.ndarray) -> onnx.ModelProto:
    k, n = weight.shape
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m", k])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", n])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"], name="proj")], "proj", [x], [y],
                              [numpy_helper.from_array(weight, "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def _form(name: str, weight: np.ndarray) -> onnx.ModelProto:
    from onnxport.quantize import ort as q

    proto = _matmul(weight)
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        if name == "dynamic int8":
            return q.dynamic_int8(proto, ["proj"])
        if name.startswith("MatMulNBits"):
            return q.nbits(proto, ["proj"], block_size=32, accuracy_level=4, bits=int(name[-1]))
    return proto


def measure(rounds: int, calls: int, rows: tuple[int, ...]) -> dict:
    """``{(form, m): (median, min, max) ms per layer}`` and ``{form: worst relative error}``."""
    rng = np.random.default_rng(0)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    sessions, errors = {}, {f: 0.0 for f in FORMS}
    for proj, (k, n) in PROJECTIONS.items():
        weight = (rng.standard_normal((k, n)) * 0.02).astype(np.float32)
        x = rng.standard_normal((max(rows), k)).astype(np.float32)
        exact = x.astype(np.float64) @ weight.astype(np.float64)
        for form in FORMS:
            s = ort.InferenceSession(_form(form, weight).SerializeToString(), options,
                                     providers=["CPUExecutionProvider"])
            sessions[form, proj] = (s, x)
            got = s.run(None, {"x": x})[0]
            errors[form] = max(errors[form], float(np.abs(got - exact).max() / np.abs(exact).max()))
    times = {}
    for m in rows:
        per_round = {f: [] for f in FORMS}
        for r in range(rounds + 1):
            for form in (FORMS if r % 2 else FORMS[::-1]):
                total = 0.0
                for proj in PROJECTIONS:
                    s, x = sessions[form, proj]
                    feed = {"x": x[:m]}
                    t = time.perf_counter()
                    for _ in range(calls):
                        s.run(None, feed)
                    total += (time.perf_counter() - t) / calls * 1e3
                if r:  # round 0 warms every form up
                    per_round[form].append(total)
        for form, ms in per_round.items():
            times[form, m] = (statistics.median(ms), min(ms), max(ms))
    return {"times": times, "errors": errors}


def render(result: dict, rows: tuple[int, ...]) -> str:
    times, errors = result["times"], result["errors"]
    head = "| form | " + " | ".join(f"ms per layer, M={m}" for m in rows) + " | " + \
        " | ".join(f"/ dynamic int8, M={m}" for m in rows) + " | relative error |"
    lines = [head, "|" + "---|" * (2 + 2 * len(rows))]
    for form in FORMS:
        cells = [f"{times[form, m][0]:.3f} ({times[form, m][1]:.3f}-{times[form, m][2]:.3f})" for m in rows]
        ratios = [f"{times[form, m][0] / times['dynamic int8', m][0]:.2f}" for m in rows]
        lines.append(f"| {form} | " + " | ".join(cells + ratios) + f" | {errors[form]:.1e} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="timed rounds per form (default 9)")
    parser.add_argument("--calls", type=int, default=100, help="calls per round (default 100)")
    parser.add_argument("--markdown", default=None, help="also write the table as markdown to this path")
    ns = parser.parse_args(argv)
    rows = (1, 64)
    start, load = time.time(), os.getloadavg()
    table = render(measure(ns.rounds, ns.calls, rows), rows)
    print(table)
    if ns.markdown:
        from onnxport.saving import write_file

        text = (
            "# int8 forms of a decoder's projections\n\n"
            f"From one run of `python benchmarks/int8_forms.py --rounds {ns.rounds} --calls {ns.calls} --markdown "
            f"{ns.markdown}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(start))} "
            f"({(time.time() - start) / 60:.1f} min), {platform.machine()} with {os.cpu_count()} cores (load average "
            f"{load[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end), onnxruntime {ort.__version__}, one "
            "thread. Every figure below comes from that run; what is measured is in the script's docstring.\n\n"
            + table + "\n")
        write_file(ns.markdown, lambda f: f.write(text.encode()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
