"""CPM-Ant (transformers' own classes, tiny config, seeded): its left-padding mask is built as
``torch.tensor(list(range(seqlen - prompt_length))[::-1])``, a Python list over the sequence length
that fixes it at the example when captured as written; the rewrite builds it with ``torch.arange``
and the export keeps the length dynamic. Compared with eager at other batch sizes and lengths."""

import pytest
import torch

from exportcheck import check_export

transformers = pytest.importorskip("transformers")


def test_cpmant_keeps_its_sequence_length_dynamic():
    torch.manual_seed(0)
    config = transformers.CpmAntConfig(
        vocab_size=100, hidden_size=32, num_attention_heads=2, dim_head=16, dim_ff=64, num_hidden_layers=1,
        position_bias_num_buckets=32, position_bias_max_distance=64, prompt_types=4, prompt_length=4,
        segment_types=4, use_cache=False)
    model = transformers.CpmAntModel(config).eval()
    with pytest.warns(UserWarning, match=r"torch.tensor\(range\) at .*modeling_cpmant.py"):
        check_export(model, (), {"input_ids": {0: "batch", 1: "seq"}},
                     kwargs={"input_ids": torch.randint(1, 100, (2, 7))}, values=[],
                     sizes=[{"batch": 1, "seq": 2}, {"batch": 3, "seq": 12}])
