"""``torch.randn(size, generator=None)`` of a symbolic size (UnivNet's noise) is captured: the
keyword is dropped while tracing, the ONNX model draws normal numbers of the dynamic size."""

import numpy as np
import onnxruntime as ort
import torch

from exportcheck import check_export
import onnxport


class Noise(torch.nn.Module):
    def forward(self, x, generator=None):  # x: [n, 4]
        return torch.randn((x.shape[0], 4), generator=generator, dtype=x.dtype)


class Silenced(Noise):
    def forward(self, x, generator=None):
        return x + super().forward(x, generator) * 0


def test_noise_of_a_dynamic_size_with_generator_none():
    check_export(Silenced(), (torch.randn(3, 4),), ({0: "n"},), sizes=[{"n": 1}, {"n": 9}], values=[],
                 expect_outputs={"output": ["n", 4]})
    result = onnxport.to_onnx(Noise(), (torch.randn(3, 4),), dynamic_shapes=({0: "n"},))
    session = ort.InferenceSession(result.model_proto.SerializeToString())
    for n in (500, 2000):
        noise, = session.run(None, {session.get_inputs()[0].name: np.zeros((n, 4), np.float32)})
        assert noise.shape == (n, 4)
        assert abs(noise.mean()) < 0.1 and abs(noise.std() - 1) < 0.1
