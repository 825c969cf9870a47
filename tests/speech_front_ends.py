"""Spectral front ends (torchaudio's MelSpectrogram, SpeechBrain's Fbank) compared with eager PyTorch in
onnxruntime within ``1e-4 * max(1, |eager|)``, element by element, at the example and at two other
(batch, time)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import torch

import onnxport

BOUND = 1e-4
HOP = 160  # 10 ms at 16 kHz


class Stft(torch.nn.Module):
    """torch.stft as a speech front end: Hann window, hop 160, centred (reflect), view_as_real."""

    def __init__(self, n_fft: int):
        super().__init__()
        self.n_fft = n_fft
        self.register_buffer("window", torch.hann_window(n_fft))

    def forward(self, x):
        return torch.view_as_real(torch.stft(x, self.n_fft, HOP, window=self.window, return_complex=True))


def check_front_end(case) -> None:
    result = onnxport.to_onnx(case.model, case.args, dynamic_shapes=case.dynamic_shapes)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(result.model_proto.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    for (wave,) in [case.args, *case.others]:
        with torch.no_grad():
            eager = case.model(wave).numpy().astype(np.float64)
        got = session.run(None, {name: wave.numpy()})[0].astype(np.float64)
        assert got.shape == eager.shape
        excess = np.abs(got - eager) / np.maximum(1.0, np.abs(eager))
        worst = float(excess.max())
        assert worst <= BOUND, (f"batch {wave.shape[0]}, {wave.shape[-1]} samples: |onnx - eager| reaches "
                                f"{worst:.2e} * max(1, |eager|), over {BOUND:g}")
