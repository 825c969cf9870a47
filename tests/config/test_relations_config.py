"""A config relates dims in [dims]: total = "past + seq"; the example, the generated and the listed
validation sizes satisfy it, and the export decides its guards with it."""

import pytest
import torch

import onnxport
from onnxport.config import parse_config
from onnxport.errors import ConfigError


class MaskedSum(torch.nn.Module):
    """The mask covers the cached and the new steps; shorter masks are padded (a branch on sizes)."""

    def forward(self, past, new, mask):
        both = torch.cat([past, new], dim=1)
        if mask.shape[1] < both.shape[1]:
            mask = torch.nn.functional.pad(mask, (0, both.shape[1] - mask.shape[1]))
        return (both * mask[:, :, None]).sum(1)


def _config(**dims):
    return {"inputs": {"past": {"dtype": "float32", "dims": ["batch", "past", 4]},
                       "new": {"dtype": "float32", "dims": ["batch", "seq", 4]},
                       "mask": {"dtype": "float32", "dims": ["batch", "total"]}},
            "outputs": {"out": {"dtype": "float32", "dims": ["batch", 4]}},
            "dims": {"past": {"example": 7}, "seq": {"example": 3}, **dims}}


def test_a_relation_in_dims_computes_the_example_and_every_validation_size():
    cfg = parse_config(_config(total="past + seq"))
    assert cfg.example_sizes()["total"] == 10
    assert len(cfg.sizes) >= 3 and all(s["total"] == s["past"] + s["seq"] for s in cfg.sizes)


def test_export_target_with_a_relation_validates_at_related_sizes():
    r = onnxport.export_target(MaskedSum(), config=_config(total="past + seq"))
    assert r.validation.ok, r.validation
    compared = [c for c in r.validation.checks if c.inputs.startswith("sizes")]
    assert len(compared) >= 3
    for c in compared:
        sizes = {k: int(v) for k, v in (kv.split("=") for kv in c.sizes.split(", "))}
        assert sizes["total"] == sizes["past"] + sizes["seq"]


@pytest.mark.parametrize("dims,message", [
    ({"total": "past + other"}, "other"),
    ({"total": "past +"}, "not an expression"),
])
def test_a_bad_relation_is_a_config_error(dims, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(_config(**dims))


def test_listed_sizes_that_break_the_relation_are_refused():
    data = _config(total="past + seq")
    data["validate"] = {"sizes": [{"past": 2, "seq": 2}, {"past": 9, "seq": 1}, {"past": 4, "seq": 5, "total": 8}]}
    with pytest.raises(ConfigError, match="breaks the relation total = past \\+ seq"):
        parse_config(data)
    data["validate"]["sizes"][2]["total"] = 9
    assert [s["total"] for s in parse_config(data).sizes] == [4, 10, 9]
