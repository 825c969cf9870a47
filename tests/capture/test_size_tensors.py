"""Tensors built from sizes (``capture/size_tensors.py``): ``torch.as_tensor`` of feature-map
sizes and ``torch.linspace`` to a size (Deformable DETR's ``spatial_shapes`` and reference points) keep the
sizes dynamic; the ONNX model matches eager PyTorch at other sizes, odd, even and 1."""

import pytest
import torch

from exportcheck import check_export
from onnxport.capture.patches import installed
from onnxport.capture.size_tensors import SIZE_TENSORS


class Levels(torch.nn.Module):
    """Two feature maps of a ``(B, C, H, W)`` image, their sizes as a tensor, the start of each level in the
    flattened sequence, and a ``linspace`` grid of reference points over every level."""

    def forward(self, x):
        maps = [x, torch.nn.functional.avg_pool2d(x, 2)]
        shapes_list = [(m.shape[2], m.shape[3]) for m in maps]
        shapes = torch.as_tensor(shapes_list, dtype=torch.long, device=x.device)
        starts = torch.cat((shapes.new_zeros((1,)), shapes.prod(1).cumsum(0)[:-1]))
        points = []
        for height, width in shapes_list:
            ys, xs = torch.meshgrid(torch.linspace(0.5, height - 0.5, height, dtype=x.dtype),
                                    torch.linspace(0.5, width - 0.5, width, dtype=x.dtype), indexing="ij")
            points.append(torch.stack((xs.reshape(-1) / width, ys.reshape(-1) / height), -1))
        flat = torch.cat([m.flatten(2).mean(1) for m in maps], 1)  # (B, positions)
        return shapes, starts, torch.cat(points, 0) * flat.mean(), flat


@pytest.mark.slow
def test_feature_map_sizes_and_reference_points_follow_the_image():
    result = check_export(Levels(), (torch.randn(2, 3, 8, 12),), ({0: "batch", 2: "height", 3: "width"},),
                          sizes=[{"batch": 1, "height": 5, "width": 7}, {"height": 16, "width": 2},
                                 {"height": 2, "width": 3}])
    shapes = result.model.graph.outputs[0]
    assert [d if isinstance(d, int) else str(d) for d in shapes.shape] == [2, 2]


class Row(torch.nn.Module):
    """``torch.as_tensor`` of a size and a float: a float tensor, as ``torch.as_tensor`` infers it."""

    def forward(self, x):
        return x * torch.as_tensor([x.shape[1], 0.5])[None, :1]


def test_tensor_of_a_size_and_a_float_is_float():
    check_export(Row(), (torch.randn(2, 6),), ({1: "n"},), sizes=[{"n": 1}, {"n": 9}])


def test_numbers_and_tensors_keep_the_factories():
    with installed(SIZE_TENSORS):
        assert torch.as_tensor([(3, 4)], dtype=torch.long).tolist() == [[3, 4]]
        assert torch.as_tensor([1, 2.5]).dtype == torch.float32
        same = torch.arange(3)
        assert torch.as_tensor(same) is same
        assert torch.as_tensor([]).dtype == torch.float32
        assert torch.equal(torch.linspace(0.5, 6.5, 7), torch.linspace.__onnxport_original__(0.5, 6.5, 7))


@pytest.mark.parametrize("steps", [1, 2, 7, 8])
def test_linspace_formula_matches_pytorch(steps):
    """The ONNX model's ``linspace`` to a dynamic count equals PyTorch's at that count and three more, within
    float rounding; a count of 1 gives ``[start]``."""

    class Grid(torch.nn.Module):
        def forward(self, x):
            return torch.linspace(-1.25, x.shape[0] * 0.75, x.shape[0])

    check_export(Grid(), (torch.randn(steps if steps > 1 else 2),), ({0: "n"},),
                 sizes=[{"n": steps}, {"n": steps + 3}], min_sets=2)
