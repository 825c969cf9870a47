"""Samples of normal, uniform, exponential, geometric, log_normal, cauchy, randint(_like): the ONNX
model draws its own numbers, so their shape, dtype and sample statistics are checked against the
distribution (tests ops/distributions.py)."""

import numpy as np
import pytest
import torch

import onnxport
from exportcheck import Fn
from onnxport.verify import OrtRunner

N = 40000

CASES = [
    ("normal", lambda t: torch.normal(t * 0 + 2.0, 3.0), 2.0, 3.0),
    ("normal_of_size", lambda t: torch.normal(2.0, 3.0, t.shape) + t, 2.0, 3.0),
    ("normal_", lambda t: torch.empty_like(t).normal_(-1.0, 0.5), -1.0, 0.5),
    ("uniform_", lambda t: torch.empty_like(t).uniform_(-1.0, 3.0), 1.0, 4 / 12 ** 0.5),
    ("exponential_", lambda t: torch.empty_like(t).exponential_(2.0), 0.5, 0.5),
    ("geometric_", lambda t: torch.empty_like(t).geometric_(0.25), 4.0, (0.75 / 0.25 ** 2) ** 0.5),
    ("log_normal_", lambda t: torch.log(torch.empty_like(t).log_normal_(0.5, 0.25)), 0.5, 0.25),
    ("cauchy_", lambda t: torch.atan(torch.empty_like(t).cauchy_(0.0, 1.0)), 0.0, np.pi / 12 ** 0.5),
    ("randint_like", lambda t: torch.randint_like(t, 3, 9).float(), 5.5, (35 / 12) ** 0.5),
    ("randint", lambda t: torch.randint(3, 9, t.shape).float() + t, 5.5, (35 / 12) ** 0.5),
    ("randint_high", lambda t: torch.randint(6, t.shape, dtype=torch.float32) + t, 2.5, (35 / 12) ** 0.5),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,fn,mean,std", CASES, ids=[c[0] for c in CASES])
def test_sample_statistics(name, fn, mean, std):
    x = torch.zeros(N)
    result = onnxport.to_onnx(Fn(fn).eval(), (x,), dynamic_shapes={"x": {0: "n"}})
    (got,) = OrtRunner(result.model_proto).run([torch.zeros(N + 7)])
    expected = fn(x)
    assert got.shape == (N + 7,) and got.dtype == expected.numpy().dtype
    assert abs(got.mean() - mean) < 5 * std / N ** 0.5 + 1e-3, (got.mean(), mean)
    assert abs(got.std() - std) < 0.05 * std, (got.std(), std)
