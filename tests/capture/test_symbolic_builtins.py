"""``len(t)`` of a tensor with a dynamic first axis and ``int(n)`` of a size read from the data stay symbolic
in the non-strict capture (``capture/symbolic_builtins.py``, the step ``KeepSizesSymbolic``): the masks
SpeechBrain and torchaudio build from the lengths, exported right at several sizes; a size still fixed where
the code converts it (``range(len(t))``) is refused at that line."""

from __future__ import annotations

import builtins
import sys

import pytest
import torch

import onnxport
from exportcheck import check_export
from onnxport.capture.symbolic_builtins import symbolic_int, symbolic_len

DIMS = {"x": {0: "batch", 1: "time"}, "lengths": {0: "batch"}}


def _lengths_mask(length: torch.Tensor, max_len) -> torch.Tensor:
    """SpeechBrain's ``length_to_mask``: the batch counted with Python's ``len``."""
    return torch.arange(max_len, dtype=length.dtype).expand(len(length), max_len) < length.unsqueeze(1)


def _padding_mask(lengths: torch.Tensor) -> torch.Tensor:
    """torchaudio's ``_lengths_to_padding_mask``: the mask's length read from the lengths' values."""
    max_length = int(lengths.max().item())
    return torch.arange(max_length, dtype=lengths.dtype).expand(lengths.shape[0], max_length) >= lengths.unsqueeze(1)


class MeanOverLengths(torch.nn.Module):
    def forward(self, x, lengths):  # x: [batch, time, 4], lengths: [batch]
        mask = _lengths_mask(lengths, x.shape[1]).unsqueeze(-1)
        return (x * mask).sum(1) / lengths.unsqueeze(-1)


class MaskedMean(torch.nn.Module):
    def forward(self, x, lengths):  # max(lengths) == time
        keep = ~_padding_mask(lengths).unsqueeze(-1)
        return (x * keep).sum(1) / lengths.unsqueeze(-1), keep.sum(1)


class LoopOverBatch(torch.nn.Module):
    def forward(self, x, lengths):
        rows = [x[i, : lengths[i]].sum() for i in range(len(lengths))]
        return torch.stack(rows)


def _inputs(batch: int, time: int, seed: int) -> tuple:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, time + 1, (batch,), generator=gen)
    lengths[batch // 2] = time
    return torch.randn(batch, time, 4, generator=gen), lengths


OTHERS = [_inputs(2, 9, 1), _inputs(5, 31, 2), _inputs(4, 3, 3)]


def _steps(result: onnxport.ExportResult) -> str:
    return "\n".join(str(a) for a in result.captured.attempts)


def test_len_of_a_tensor_keeps_the_batch_dynamic():
    result = check_export(MeanOverLengths(), _inputs(3, 17, 0), DIMS, inputs=OTHERS, rewrite_control_flow=False)
    assert result.captured.strategy == "non-strict"  # the capture step kept it symbolic, not strict mode
    assert f"len() in {__name__} symbolic" in _steps(result)
    assert "len" not in vars(sys.modules[__name__])  # the shadow is gone once the export is done


def test_int_of_a_size_read_from_the_lengths_is_a_data_dependent_size():
    result = check_export(MaskedMean(), _inputs(3, 17, 0), DIMS, inputs=OTHERS, rewrite_control_flow=False)
    assert result.captured.strategy == "non-strict"
    assert f"int() in {__name__} symbolic" in _steps(result)
    assert "int" not in vars(sys.modules[__name__])


class UpsampleToPatchGrid(torch.nn.Module):
    """Depth Anything's head: a map of ``image // 4`` patches resized to ``int(patches * 4)`` pixels."""

    def forward(self, x):  # x: [batch, 2, image, image]
        patches = x.shape[-1] // 4
        pooled = torch.nn.functional.avg_pool2d(x, 4)
        return torch.nn.functional.interpolate(pooled, (int(patches * 4), int(patches * 4)), mode="bilinear",
                                               align_corners=True)


def test_int_of_a_size_fixing_a_range_of_sizes_stays_symbolic():
    # int(patches * 4) guards image // 4 to the example's: a branch on the size, not one constant
    gen = torch.Generator().manual_seed(0)
    result = check_export(UpsampleToPatchGrid(), (torch.randn(2, 2, 16, 16, generator=gen),),
                          {"x": {0: "batch", 2: "image", 3: "image"}},
                          sizes=[{"batch": 3, "image": 23}, {"batch": 1, "image": 40}], values=[],
                          rewrite_control_flow=False)
    assert f"int() in {__name__} symbolic" in _steps(result)


def test_a_size_fixed_where_the_code_converts_it_names_that_line():
    with pytest.raises(onnxport.SpecializationError, match="declared dynamic as 'batch'") as info:
        onnxport.to_onnx(LoopOverBatch(), _inputs(3, 17, 0), dynamic_shapes=DIMS, rewrite_control_flow=False)
    assert "for i in range(len(lengths))" in info.value.where


def test_the_replacements_are_the_builtins_elsewhere():
    assert symbolic_len([1, 2, 3]) == 3 and symbolic_len(torch.zeros(4, 2)) == 4
    with pytest.raises(TypeError):
        symbolic_len(torch.tensor(1.0))
    assert symbolic_int(3.7) == 3 and symbolic_int(-3.7) == -3 and symbolic_int("ff", 16) == 255
    assert symbolic_int() == 0 and symbolic_int(torch.tensor(5)) == 5
    assert isinstance(5, symbolic_int) and isinstance(True, symbolic_int) and not isinstance(2.0, symbolic_int)
    assert issubclass(bool, symbolic_int) and type(symbolic_int.from_bytes(b"\x01", "big")) is builtins.int


def test_int_around_item_where_its_module_is_not_found_offers_dropping_it():
    from onnxport.capture.data_dependent import _number_fixes

    assert "drop the int() around .item()" in _number_fixes("max_length = int(torch.max(lengths).item())")
    assert ".item() instead of int(...)" in _number_fixes("n = int((x > 0).sum())")


def test_int_used_as_a_type_is_left_the_builtin(tmp_path):
    from onnxport.capture.symbolic_builtins import _int_called_only

    source = tmp_path / "uses.py"
    source.write_text("def f(x: int, n) -> int:\n    return int(n) if isinstance(n, (float, int)) else len(x)\n")
    assert _int_called_only(str(source))
    for used in ("torch.zeros(3, dtype=int)", "type(n) is int", "np.zeros(3, dtype=int)"):
        source.write_text(f"def f(n):\n    k = int(n)\n    return {used}\n")
        assert not _int_called_only(str(source)), used
    assert _int_called_only(__file__)  # this module's MaskedMean is captured with int() symbolic


def test_a_module_fixing_sizes_at_several_lines_is_shadowed_once():
    """Specializations recorded at one line twice and at another line of the same module, the refusal at the
    first: ``shadows_for`` lists ``(module, "len")`` once, so the retrace installs one shadowing global."""
    from types import SimpleNamespace

    from onnxport.capture.guards.record import Specialization
    from onnxport.capture.symbolic_builtins import shadows_for

    def where(fn, text):
        import inspect

        lines, first = inspect.getsourcelines(fn)
        k = next(k for k, line in enumerate(lines) if text in line)
        return f"{__file__}:{first + k} in {fn.__name__}: {lines[k].strip()}"

    mask = where(_lengths_mask, "len(length)")
    loop = where(LoopOverBatch.forward, "len(lengths)")
    records = [Specialization(("L['x'].size()[0]",), 3, w) for w in (mask, mask, loop)]
    trace = SimpleNamespace(error=onnxport.SpecializationError("fixed", where=mask), records=records, exception=None)
    module = next(name for name, m in sys.modules.items() if getattr(m, "__file__", None) == __file__)
    assert shadows_for(trace) == [(module, "len")]
