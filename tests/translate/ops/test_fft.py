"""torch.fft in models whose inputs and outputs are real: ONNX DFT on real [..., 2] pairs
(tests ops/fft.py)."""

import pytest
import torch

from exportcheck import check_export, Fn

NORMS = [None, "ortho", "forward"]
DYN = {"x": {0: "batch", 1: "time"}}


@pytest.mark.parametrize("norm", NORMS)
def test_rfft_and_fft_of_real_signals(norm):
    fn = lambda x: (torch.view_as_real(torch.fft.rfft(x, norm=norm)),  # noqa: E731
                    torch.view_as_real(torch.fft.fft(x, dim=1, norm=norm)),
                    torch.fft.rfft(x, n=12, norm=norm).abs())
    check_export(Fn(fn), (torch.randn(3, 10),), DYN)


@pytest.mark.parametrize("norm", NORMS)
def test_inverse_transforms(norm):
    fn = lambda x: (torch.fft.irfft(torch.fft.rfft(x * 2, norm=norm), n=x.shape[1], norm=norm),  # noqa: E731
                    torch.view_as_real(torch.fft.ifft(x, norm=norm).resolve_conj()),
                    torch.fft.irfft(torch.view_as_complex(torch.stack([x, x.flip(1)], -1)), norm=norm))
    # norm="forward" leaves the inverse unscaled: its values grow with the length (53 at 126 samples,
    # the 4x size set) and float32's rounding with them (4e-4 where terms cancel to 0.01)
    check_export(Fn(fn), (torch.randn(3, 10),), DYN, atol=1e-3 if norm == "forward" else None)


def test_odd_and_even_output_lengths_of_irfft():
    fn = lambda x: (torch.fft.irfft(torch.fft.rfft(x), n=7), torch.fft.irfft(torch.fft.rfft(x), n=8),  # noqa: E731
                    torch.fft.hfft(torch.fft.ihfft(x), n=9))
    check_export(Fn(fn), (torch.randn(2, 9),), {"x": {0: "batch"}})


def test_multidimensional_transforms():
    fn = lambda x: (torch.view_as_real(torch.fft.fft2(x)), torch.view_as_real(torch.fft.rfftn(x, dim=(0, 2))),  # noqa: E731
                    torch.fft.irfft2(torch.fft.rfft2(x), s=x.shape[-2:]),
                    torch.view_as_real(torch.fft.ifftn(x, s=(4, 6), norm="ortho")))
    check_export(Fn(fn), (torch.randn(2, 5, 6),), {"x": {0: "batch", 1: "h"}})


def test_complex_arithmetic_between_transforms():
    # a circular convolution by the product of spectra, read back as a real signal
    def fn(x):
        spec = torch.fft.rfft(x)
        kernel = torch.fft.rfft(torch.flip(x, [1]))
        return torch.fft.irfft(spec * kernel * 0.5 + spec - kernel.conj(), n=x.shape[1])

    check_export(Fn(fn), (torch.randn(3, 8),), DYN)


def test_fft_at_opset_18_takes_its_axis_as_an_attribute():
    fn = lambda x: torch.view_as_real(torch.fft.fft(x))  # noqa: E731
    check_export(Fn(fn), (torch.randn(3, 10),), DYN, opset=18)
