"""RWKV (transformers' own classes, tiny config, seeded): on the CPU its attention runs
``rwkv_linear_attention_cpu``, a Python loop over the sequence writing one column of a preallocated
output per step, reached from ``forward`` through the loop-free dispatcher ``rwkv_linear_attention``.
Exported by default (the loop becomes an ONNX Scan) and compared with eager at other lengths."""

import pytest
import torch

from exportcheck import check_export, count_ops

transformers = pytest.importorskip("transformers")


def test_rwkv_exports_its_time_loop_as_a_scan():
    torch.manual_seed(0)
    config = transformers.RwkvConfig(vocab_size=64, context_length=32, hidden_size=16, num_hidden_layers=2,
                                     attention_hidden_size=16, intermediate_size=32)
    model = transformers.RwkvModel(config).eval()
    ids = torch.randint(0, 64, (2, 7))
    with pytest.warns(UserWarning, match="onnxport rewrote"):
        result = check_export(model, (ids,), {"input_ids": {0: "batch", 1: "seq"}},
                              sizes=[{"batch": 1, "seq": 1}, {"batch": 3, "seq": 12}])
    assert count_ops(result, "Scan") >= 1
