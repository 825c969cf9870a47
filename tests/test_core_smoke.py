import torch

from exportcheck import check_export


class _MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(4, 8)
        self.l2 = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.l2(self.l1(x) * 2 + 1).reshape(x.shape[0], -1)


def test_mlp_dynamic_batch_and_time():
    r = check_export(_MLP(), (torch.randn(2, 5, 4),), {"x": {0: "batch", 1: "time"}},
                     expect_inputs={"x": ["batch", "time", 4]}, expect_outputs={"output": ["batch", "3*time"]})
    assert {"l1.weight.T", "l1.bias", "l2.weight.T", "l2.bias"} <= set(r.model.graph.initializers)
