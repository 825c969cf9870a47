"""Pairwise distances written as a plain Python loop, exported with ``rewrite_control_flow=True``.

The loop runs over ``x.shape[0]``: captured as is, torch.export would unroll it at the example's
row count. With ``rewrite_control_flow=True`` onnxport rewrites it into a scan first, so the ONNX
model has one Scan and runs at every size. Checked against ``scipy.spatial.distance.cdist``.

Run::

    python examples/loop_cdist.py
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import scipy.spatial.distance
import torch
from torch.export import Dim

import onnxport
from onnxport.rewrite import rewrite_module


class Loop(torch.nn.Module):
    def forward(self, x, y):
        dist = torch.empty(x.shape[0], y.shape[0])
        for i in range(x.shape[0]):
            dist[i, :] = torch.sqrt(((y - x[i:i + 1]) ** 2).sum(1))
        return dist


def main() -> None:
    x_rows, y_rows, dim = Dim("x_rows"), Dim("y_rows"), Dim("dim")
    example = (torch.randn(3, 4), torch.randn(5, 4))
    # what rewrite_control_flow=True does to the loop, line by line
    for note in rewrite_module(Loop(), example).onnxport_rewrite_notes:
        print(note)
    result = onnxport.to_onnx(Loop(), example, dynamic_shapes={"x": {0: x_rows, 1: dim}, "y": {0: y_rows, 1: dim}},
                              rewrite_control_flow=True)
    graph = result.model.graph
    print("inputs:", [(v.name, [str(d) for d in v.shape]) for v in graph.inputs],
          "output:", [str(d) for d in graph.outputs[0].shape], "nodes:", [n.op_type for n in graph])

    session = ort.InferenceSession(result.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    worst = 0.0
    print(f"{'x_rows':>6} {'y_rows':>6} {'dim':>4}  {'max abs error vs cdist':>22}")
    for nx, ny, d in [(3, 5, 4), (1, 1, 4), (20, 7, 17), (64, 3, 2)]:
        x = rng.standard_normal((nx, d)).astype(np.float32)
        y = rng.standard_normal((ny, d)).astype(np.float32)
        (got,) = session.run(None, {"x": x, "y": y})
        err = float(np.abs(got - scipy.spatial.distance.cdist(x, y)).max())
        worst = max(worst, err)
        print(f"{nx:>6} {ny:>6} {d:>4}  {err:>22.2e}")
    print("ok" if worst < 1e-5 else "MISMATCH")


if __name__ == "__main__":
    main()
