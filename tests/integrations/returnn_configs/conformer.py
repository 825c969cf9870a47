"""RETURNN config: the smallest RF Conformer encoder, built as RETURNN's tests/test_rf_encoder_conformer.py
builds it (ConformerConvSubsample frontend, relative-position self-attention), 2 layers, 64 dims, 4 heads."""

from returnn.tensor import Dim, TensorDict, batch_dim
import returnn.frontend as rf
from returnn.frontend.encoder.conformer import ConformerConvSubsample, ConformerEncoder

backend = "torch"
time_dim = Dim(None, name="time")
in_dim = Dim(40, name="in")
out_dim = Dim(64, name="out")
out_time_dim = Dim(None, name="out_time")
extern_data = {"data": {"dims": (batch_dim, time_dim, in_dim), "dtype": "float32"}}
model_outputs = {"output": {"dims": (batch_dim, out_time_dim, out_dim), "dtype": "float32"}}


def get_model(*, epoch, step, **_kwargs):
    return ConformerEncoder(
        in_dim, out_dim, ff_dim=Dim(128, name="ff"), num_heads=4, num_layers=2,
        input_layer=ConformerConvSubsample(in_dim, out_dims=[Dim(32, name="conv1"), Dim(64, name="conv2")],
                                           filter_sizes=[(3, 3), (3, 3)], pool_sizes=[(2, 1), (2, 1)]))


def forward_step(*, model, extern_data: TensorDict):
    out, out_spatial_dim = model(extern_data["data"], in_spatial_dim=time_dim)
    out_time_dim.dyn_size_ext.raw_tensor = out_spatial_dim.get_size_tensor().raw_tensor
    out, _ = rf.replace_dim(out, in_dim=out_spatial_dim, out_dim=out_time_dim)
    out.mark_as_default_output(shape=(batch_dim, out_time_dim, out_dim))
