"""2-layer nn.TransformerEncoder (demo_models.transformer_encoder): dynamic batch and time, three
sizes, max abs error < 1e-4, with and without a key padding mask."""

import pytest
import torch

from exportcheck import check_export, count_ops
from onnxport.demo_models import TRANSFORMER_D_MODEL, transformer_encoder, transformer_example


def test_transformer_encoder_dynamic_batch_and_time():
    args, dims = transformer_example()
    r = check_export(transformer_encoder(), args, dims, atol=1e-4, rtol=0.0,
                     sizes=[{"batch": 3, "time": 7}, {"batch": 1, "time": 20}],
                     expect_inputs={"src": ["batch", "time", TRANSFORMER_D_MODEL]},
                     expect_outputs={"output": ["batch", "time", TRANSFORMER_D_MODEL]})
    assert count_ops(r, "Softmax") == 2


class _Padded(torch.nn.Module):
    """The encoder with ``src_key_padding_mask`` built from ``lengths``; with nested tensors eager
    PyTorch returns zeros at padded frames, otherwise the model zeroes them itself."""

    def __init__(self, nested: bool):
        super().__init__()
        self.encoder = transformer_encoder(enable_nested_tensor=nested)
        self.nested = nested

    def forward(self, src, lengths):
        pad = torch.arange(src.shape[1]).unsqueeze(0) >= lengths.unsqueeze(1)
        out = self.encoder(src, src_key_padding_mask=pad)
        return out if self.nested else out.masked_fill(pad.unsqueeze(-1), 0.0)


@pytest.mark.parametrize("nested", [False, True], ids=["dense", "nested_tensor"])
def test_transformer_encoder_key_padding_mask(nested):
    args, _ = transformer_example(batch=3)
    lengths = torch.tensor([12, 5, 9])
    check_export(_Padded(nested), (args[0], lengths), {"src": {0: "batch", 1: "time"}, "lengths": {0: "batch"}},
                 atol=1e-4, rtol=0.0, sizes=[{"batch": 4, "time": 7}, {"batch": 2, "time": 19}],
                 inputs=[(torch.randn(2, 6, TRANSFORMER_D_MODEL), torch.tensor([6, 1]))])
