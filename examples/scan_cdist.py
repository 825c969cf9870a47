"""Pairwise distances with a scan: one ONNX Scan that runs at every size.

``forward(x, y)`` scans over the rows of ``x``; each step computes the distances from one row to
every row of ``y``. Exported once with three named dynamic dimensions, the ONNX model has inputs
``x: float[x_rows, dim]``, ``y: float[y_rows, dim]`` and output ``float[x_rows, y_rows]``, and is
checked against ``scipy.spatial.distance.cdist`` at several sizes.

Run::

    python examples/scan_cdist.py            # the Scan body calls a local function
    python examples/scan_cdist.py --inline   # the Scan body holds the nodes directly
"""

from __future__ import annotations

import argparse

import numpy as np
import onnxruntime as ort
import scipy.spatial.distance
import torch
from torch.export import Dim

import onnxport


class PairwiseDistance(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        def combine_fn(y, xi):
            return [y.clone(), torch.sqrt(((y - xi.reshape(1, -1)) ** 2).sum(1))]

        _, out = torch.ops.higher_order.scan(combine_fn, [y], [x], additional_inputs=[])
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inline", action="store_true", help="inline the body function into the Scan")
    parser.add_argument("-o", "--output", default="scan_cdist.onnx")
    args = parser.parse_args()

    x_rows, y_rows, dim = Dim("x_rows"), Dim("y_rows"), Dim("dim")
    result = onnxport.to_onnx(PairwiseDistance(), (torch.randn(3, 4), torch.randn(5, 4)),
                              dynamic_shapes={"x": {0: x_rows, 1: dim}, "y": {0: y_rows, 1: dim}},
                              inline=args.inline)
    result.save(args.output)
    graph = result.model.graph
    signature = ", ".join(f"{v.name}: float[{', '.join(map(str, v.shape))}]" for v in graph.inputs)
    outputs = ", ".join(f"float[{', '.join(map(str, v.shape))}]" for v in graph.outputs)
    print(f"saved {args.output}: ({signature}) -> {outputs}; nodes: {[n.op_type for n in graph]}; "
          f"local functions: {len(result.model.functions)}")

    session = ort.InferenceSession(args.output, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    print(f"{'x_rows':>6} {'y_rows':>6} {'dim':>4}  {'max abs error vs cdist':>22}")
    worst = 0.0
    for nx, ny in [(3, 5), (1, 1), (20, 7), (64, 3)]:
        for d in (4, 17):
            x = rng.standard_normal((nx, d)).astype(np.float32)
            y = rng.standard_normal((ny, d)).astype(np.float32)
            (got,) = session.run(None, {"x": x, "y": y})
            err = float(np.abs(got - scipy.spatial.distance.cdist(x, y)).max())
            worst = max(worst, err)
            print(f"{nx:>6} {ny:>6} {d:>4}  {err:>22.2e}")
    print("ok" if worst < 1e-5 else "MISMATCH")


if __name__ == "__main__":
    main()
