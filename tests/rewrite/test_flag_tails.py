"""A flag read from the data and tested again later in the function (Longformer's ``is_global_attn``):
the rest of the function under each side, one ``torch.cond`` whose sides may differ in shape in
between, exported as an ONNX ``If`` and compared with eager PyTorch on inputs taking each side."""

import pytest
import torch

import onnxport
from exportcheck import check_export, count_ops
from onnxport.rewrite import rewrite_module


class GlobalTokens(torch.nn.Module):
    """Scores gain a column where some token is global; the second test of the flag drops it again.
    Between the tests the scores are (n, 5) on one side and (n, 4) on the other."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x, mask):
        is_global = mask.flatten().any().item()
        n, width = x.size()
        scores = self.proj(x)
        if is_global:
            picked = x[mask]  # rows read from the data
            extra = picked.sum().reshape(1, 1).expand(n, 1)
            scores = torch.cat((extra, scores), dim=-1)
            del extra
        probs = scores.softmax(-1)
        assert probs.shape[0] == n
        if is_global:
            out = probs[:, 1:].reshape(n, width) * 2
            out[mask] = 0
        else:
            out = probs
        return out + (1 if is_global else 0)


def _inputs(n: int, global_rows: list[int]) -> tuple:
    mask = torch.zeros(n, dtype=torch.bool)
    mask[global_rows] = True
    return torch.randn(n, 4), mask


def test_the_rest_of_the_function_under_each_side_of_the_flag():
    notes = rewrite_module(GlobalTokens(), _inputs(5, []), warn=False).onnxport_rewrite_notes
    assert [(n.construct, n.rewritten) for n in notes] == [("if", True)], [str(n) for n in notes]
    assert "under each side of 'is_global'" in notes[0].detail, str(notes[0])


@pytest.mark.slow
def test_a_flag_tested_twice_exports_both_sides_and_matches_eager():
    torch.manual_seed(0)
    result = check_export(GlobalTokens(), _inputs(5, []), ({0: "n"}, {0: "n"}),
                          inputs=[_inputs(5, [1, 3]), _inputs(8, [0]), _inputs(2, []), _inputs(1, [0])])
    assert count_ops(result, "If") >= 1


class ReadInsideTheSide(torch.nn.Module):
    """The flag read again inside the side its first test selects (``scale = 2 if flag else 1``)."""

    def forward(self, x, mask):
        flag = mask.any().item()
        if flag:
            scale = 2.0 if flag else 1.0
            x = torch.cat((x, x[mask].sum().reshape(1, 1).expand(x.shape[0], 1) * scale), dim=-1)
            del scale
        y = x.relu()
        if flag:
            y = y[:, :-1]
        return y


def test_the_flag_read_inside_its_own_side_is_decided_there():
    result = check_export(ReadInsideTheSide(), _inputs(4, []), ({0: "n"}, {0: "n"}),
                          inputs=[_inputs(4, [2]), _inputs(7, [0, 6]), _inputs(1, [])])
    assert count_ops(result, "If") >= 1


class SizeChangedBeforeTheTest(torch.nn.Module):
    """``width`` is read from a tensor and then changed before the first test: the side must see the
    changed value, not the size read again."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x, mask):
        flag = mask.any().item()
        n, width = x.size()
        width = width // 2
        scores = self.proj(x)
        if flag:
            extra = x[mask].sum().reshape(1, 1).expand(n, 1)
            scores = torch.cat((extra, scores), dim=-1)
            del extra
        probs = scores.softmax(-1)
        if flag:
            out = probs[:, 1:] * width
            out[mask] = 0
        else:
            out = probs
        return out


class FlagNameReusedInAComprehension(torch.nn.Module):
    """The flag's name is also a comprehension's variable: that comprehension's reads are its own."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x, mask):
        flag = mask.any().item()
        n = x.shape[0]
        s = self.proj(x)
        if flag:
            extra = x[mask].sum().reshape(1, 1).expand(n, 1)
            s = torch.cat((extra, s), dim=-1)
            del extra
        p = s.softmax(-1)
        weights = [0.5 if flag else 2.0 for flag in (True, False)]
        if flag:
            out = p[:, 1:] * weights[1]
            out[mask] = 0
        else:
            out = p
        return out


def _both_sides() -> list[tuple]:
    """Input sets taking the side the example (no True in the mask) does not, and other sizes."""
    return [_inputs(5, [1]), _inputs(7, [0, 6]), _inputs(3, [])]


@pytest.mark.slow
def test_a_size_changed_before_the_test_is_not_read_again():
    notes = rewrite_module(SizeChangedBeforeTheTest(), _inputs(5, []), warn=False).onnxport_rewrite_notes
    assert any("under each side of 'flag'" in n.detail for n in notes), [str(n) for n in notes]
    check_export(SizeChangedBeforeTheTest(), _inputs(5, []), ({0: "n"}, {0: "n"}), inputs=_both_sides())


def test_a_flag_name_bound_elsewhere_leaves_the_function_as_it_is():
    notes = rewrite_module(FlagNameReusedInAComprehension(), _inputs(5, []), warn=False).onnxport_rewrite_notes
    assert not any("under each side" in n.detail for n in notes), [str(n) for n in notes]
    with pytest.raises(onnxport.DataDependentError, match="mask.any"):  # the branch on the data, as written
        onnxport.to_onnx(FlagNameReusedInAComprehension(), _inputs(5, []), dynamic_shapes=({0: "n"}, {0: "n"}))


class LoopAfterTheTest(torch.nn.Module):
    """A loop over the rows after the first test: it is in both sides, and noted once."""

    def forward(self, x, mask):
        flag = mask.any().item()
        if flag:
            extra = x[mask].sum().reshape(1, 1).expand(x.shape[0], 1)
            x = torch.cat((x, extra), dim=-1)
            del extra
        rows = torch.empty(x.shape[0], x.shape[1])
        for i in range(x.shape[0]):
            rows[i] = x[i] * (i + 1)
        if flag:
            rows = rows[:, :-1]
        return rows


@pytest.mark.slow
def test_a_loop_in_the_rest_is_noted_once():
    notes = rewrite_module(LoopAfterTheTest(), _inputs(5, []), warn=False).onnxport_rewrite_notes
    loops = [n for n in notes if n.construct == "for"]
    assert len(loops) == 1 and loops[0].rewritten, [str(n) for n in notes]
    assert any("under each side of 'flag'" in n.detail for n in notes), [str(n) for n in notes]
    check_export(LoopAfterTheTest(), _inputs(5, []), ({0: "n"}, {0: "n"}), inputs=_both_sides())
