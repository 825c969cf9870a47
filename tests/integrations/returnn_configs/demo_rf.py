"""RETURNN config in the style of RETURNN's demos/demo-rf.config: three RF Conv1d layers over the time axis,
a target not available for inference, the output on the input's time axis."""

from returnn.tensor import Dim, TensorDict, batch_dim
import returnn.frontend as rf

backend = "torch"
time_dim = Dim(None, name="time")
in_dim = Dim(9, name="in")
out_dim = Dim(2, name="out")
extern_data = {
    "data": {"dims": (batch_dim, time_dim, in_dim), "dtype": "float32"},
    "classes": {"dims": (batch_dim, time_dim), "sparse_dim": out_dim, "dtype": "int32",
                "available_for_inference": False},
}
model_outputs = {"output": {"dims": (batch_dim, time_dim, out_dim), "dtype": "float32"}}


class Model(rf.Module):
    def __init__(self):
        super().__init__()
        hidden_dim = Dim(50, name="hidden")
        hidden2_dim = Dim(100, name="hidden2")
        self.layers = rf.ModuleList(
            rf.Conv1d(in_dim, hidden_dim, 5, padding="same"),
            rf.Conv1d(hidden_dim, hidden2_dim, 5, padding="same"),
            rf.Conv1d(hidden2_dim, out_dim, 5, padding="same"),
        )

    def __call__(self, x, *, spatial_dim: Dim):
        for layer in self.layers[:-1]:
            x, _ = layer(x, in_spatial_dim=spatial_dim)
            x = rf.relu(x)
        x, _ = self.layers[-1](x, in_spatial_dim=spatial_dim)
        return x


def get_model(*, epoch, step, **_kwargs):
    return Model()


def forward_step(*, model: Model, extern_data: TensorDict):
    out = model(extern_data["data"], spatial_dim=time_dim)
    out.mark_as_default_output(shape=(batch_dim, time_dim, out_dim))
