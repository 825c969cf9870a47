"""i6-models (the RWTH i6 model parts used with RETURNN): the Conformer encoder with its VGG frontend
and the BLSTM encoder, built from the package's own classes with small configs and seeded weights."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from exportcheck import check_export

i6 = pytest.importorskip("i6_models")

from i6_models.assemblies.conformer.conformer_v1 import (ConformerBlockV1Config, ConformerEncoderV1,  # noqa: E402
                                                         ConformerEncoderV1Config)
from i6_models.config import ModuleFactoryV1  # noqa: E402
from i6_models.parts.blstm import BlstmEncoderV1, BlstmEncoderV1Config  # noqa: E402
from i6_models.parts.conformer import (ConformerConvolutionV1Config, ConformerMHSAV1Config,  # noqa: E402
                                       ConformerPositionwiseFeedForwardV1Config)
from i6_models.parts.frontend.vgg_act import VGG4LayerActFrontendV1, VGG4LayerActFrontendV1Config  # noqa: E402


def build_conformer(dim: int = 64, layers: int = 2, features: int = 80) -> ConformerEncoderV1:
    """ConformerEncoderV1 with the VGG frontend (4x subsampling in time by two max-pools)."""
    torch.manual_seed(0)
    frontend = VGG4LayerActFrontendV1Config(
        in_features=features, conv1_channels=8, conv2_channels=8, conv3_channels=8, conv4_channels=8,
        conv_kernel_size=(3, 3), conv_padding=None, pool1_kernel_size=(2, 1), pool1_stride=(2, 1), pool1_padding=None,
        pool2_kernel_size=(2, 1), pool2_stride=(2, 1), pool2_padding=None, activation=nn.functional.relu,
        out_features=dim)
    block = ConformerBlockV1Config(
        ff_cfg=ConformerPositionwiseFeedForwardV1Config(input_dim=dim, hidden_dim=4 * dim, dropout=0.1,
                                                        activation=nn.functional.silu),
        mhsa_cfg=ConformerMHSAV1Config(input_dim=dim, num_att_heads=4, att_weights_dropout=0.1, dropout=0.1),
        conv_cfg=ConformerConvolutionV1Config(channels=dim, kernel_size=31, dropout=0.1,
                                              activation=nn.functional.silu, norm=nn.BatchNorm1d(dim)))
    cfg = ConformerEncoderV1Config(num_layers=layers, frontend=ModuleFactoryV1(VGG4LayerActFrontendV1, frontend),
                                   block_cfg=block)
    return ConformerEncoderV1(cfg).eval()


def _mask(lengths: torch.Tensor, time: int) -> torch.Tensor:
    return torch.arange(time)[None] < lengths[:, None]


def test_conformer_vgg_frontend_time_not_a_multiple_of_four():
    model = build_conformer()
    x = torch.randn(2, 37, 80)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = check_export(model, (x, _mask(torch.tensor([37, 20]), 37)),
                         {"data_tensor": {0: "batch", 1: "time"}, "sequence_mask": {0: "batch", 1: "time"}},
                         sizes=[{"batch": 2, "time": 250}, {"batch": 1, "time": 513}, {"batch": 3, "time": 4}],
                         expect_inputs={"data_tensor": ["batch", "time", 80], "sequence_mask": ["batch", "time"]},
                         expect_outputs={"output_0": ["batch", "(time//4)", 64], "output_1": ["batch", "(time//4)"]})
    # the two pools need 4 frames: the smallest size the frontend accepts, adopted with a warning
    assert [str(c) for c in r.constraints] == ["time >= 4"]
    assert any("time >= 4" in str(w.message) and "vgg_act.py" in str(w.message) for w in caught)
    with pytest.raises(RuntimeError):
        model(torch.randn(1, 3, 80), _mask(torch.tensor([3]), 3))
    padded = torch.randn(3, 61, 80)
    report = r.validate(inputs=[(padded, _mask(torch.tensor([61, 40, 17]), 61))], sizes=[])
    assert report.ok, report
    assert r.validate().ok  # the default sizes: minimum 4, both sides of the kept 0/1 specializations


@pytest.mark.parametrize("enforce_sorted", [False, True])
def test_blstm_encoder_unpacks_to_the_longest_length(enforce_sorted):
    torch.manual_seed(0)
    model = BlstmEncoderV1(BlstmEncoderV1Config(num_layers=2, input_dim=80, hidden_dim=32, dropout=0.0,
                                                enforce_sorted=enforce_sorted)).eval()
    lengths = torch.tensor([37, 30, 20])
    r = check_export(model, (torch.randn(3, 37, 80), lengths), {"x": {0: "batch", 1: "time"}, "seq_len": {0: "batch"}},
                     sizes=[{"batch": 2, "time": 250}, {"batch": 4, "time": 513}, {"batch": 1, "time": 1}])
    # pad_packed_sequence without total_length: max(lengths) steps, computed from the lengths
    shorter = (torch.randn(2, 50, 80), torch.tensor([33, 21]))
    report = r.validate(inputs=[shorter], sizes=[])
    assert report.ok, report
    assert [c.shape for c in report.checks if c.inputs == "inputs 1"] == [(2, 33, 64)]
