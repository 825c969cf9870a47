"""A check on the inputs' values (one image per placeholder token, as transformers' vision-language models
check ``input_ids`` against the image features) refuses the inputs onnxport makes at any size, the
example's too: eager PyTorch refusing them at size 1 says nothing about size 1. Such a refusal excludes
no size (``guards.probe.same_refusal``: the size-1 probe, the check of a size decided from torch.export's
default minimum, the search for the model's own minimum), so the export promises size 1 and is right
there."""

import pytest
import torch
from torch.export import Dim

from onnxport.capture.guards.probe import REFUSES
from onnxport.verify.default_floor import REFUSED_ALIKE
from tests.exportcheck import check_export

TOKEN = 3


class Placeholders(torch.nn.Module):
    """Token embeddings ``[batch, seq, 8]`` with each ``TOKEN`` replaced by one image's projection
    (``images``: ``[batch, 4]``, one per row); ValueError where the tokens do not count the images."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(100, 8)
        self.proj = torch.nn.Linear(4, 8)

    def forward(self, ids, images):
        embeds = self.embed(ids)
        features = self.proj(images)
        mask = ids == TOKEN
        torch._check_tensor_all_with(ValueError, mask.sum() * embeds.shape[-1] == features.numel(),
                                     lambda: "image tokens and images do not match")
        out = embeds.masked_scatter(mask.unsqueeze(-1), features)
        if ids.shape[1] == 1:  # decided from torch.export's default minimum of 2 (a kept seq >= 2, run at seq = 1)
            return out[:, 0].sum(-1, keepdim=True)
        return out.sum(-1)


def prompt(batch, seq, seed):
    """Ids ``[batch, seq]`` holding ``TOKEN`` once per row, at a place of the row's own, and images."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 100, (batch, seq), generator=gen)
    ids[torch.arange(batch), torch.randint(0, seq, (batch,), generator=gen)] = TOKEN
    return ids, torch.randn(batch, 4, generator=gen)


@pytest.mark.parametrize("named", [True, False], ids=["named dims", "Dim(min=1)"])
def test_a_refusal_of_the_made_up_values_at_every_size_excludes_no_size(named):
    batch, seq = ("batch", "seq") if named else (Dim("batch", min=1), Dim("seq", min=1))
    model = Placeholders().eval()
    with pytest.raises(ValueError, match="do not match"):  # the check is the model's: eager refuses wrong counts
        model(torch.randint(4, 100, (2, 6)), torch.randn(2, 4))
    sets = [prompt(1, 5, 1), prompt(3, 1, 2), prompt(1, 1, 3), prompt(4, 9, 4)]
    result = check_export(model, prompt(2, 6, 0), ({0: batch, 1: seq}, {0: batch}), inputs=sets, sizes=[],
                          values=[], min_sets=5)
    assert result.constraints == []
    assert not any(g.method.startswith(REFUSES) for g in result.guards)
    assert not result.pieces
    floor = [g for g in result.guards if g.text == "seq >= 2"]
    assert floor and floor[0].method.endswith(REFUSED_ALIKE)  # size 1 kept, compared above on real inputs
