"""RETURNN config in the style of RETURNN's demos/demo-torch.config: a pure PyTorch model (Conv1d stack),
inputs and outputs declared by their feature dim, the output's lengths set in forward_step."""

import torch
from torch import nn
import returnn.frontend as rf
from returnn.tensor import TensorDict

backend = "torch"
num_inputs = 9
num_outputs = 2
extern_data = {
    "data": {"dim": num_inputs},
    "classes": {"dim": num_outputs, "sparse": True, "available_for_inference": False},
}
model_outputs = {"output": {"dim": num_outputs}}


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv1d(num_inputs, 50, 5, padding=2), nn.ReLU(),
            nn.Conv1d(50, 100, 5, padding=2), nn.ReLU(),
            nn.Conv1d(100, num_outputs, 5, padding=2),
        )

    def forward(self, x):  # (B, T, F)
        return self.layers(x.permute(0, 2, 1)).permute(0, 2, 1)


def get_model(*, epoch, step, **_kwargs):
    return Model()


def forward_step(*, model: Model, extern_data: TensorDict):
    data = extern_data["data"]
    out = model(data.raw_tensor)
    rf.get_run_ctx().expected_outputs["output"].dims[1].dyn_size_ext.raw_tensor = data.dims[1].dyn_size_ext.raw_tensor
    rf.get_run_ctx().mark_as_default_output(tensor=out)
