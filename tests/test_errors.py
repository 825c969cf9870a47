"""Errors as the user's interface: a short, complete first line; where, what to do; the full
detail after it."""

from __future__ import annotations

import pytest

import onnxport
from onnxport.errors import FIRST_LINE_LIMIT, split_message

LONG_GUARD = " + ".join(f"Mod(((dimension_{i} - 1)//2 - 1)//2 + 1, 4)" for i in range(30))


def test_a_short_message_is_kept_whole():
    e = onnxport.ExportError("the model is wrong", where="m.py:3 in forward: x", hint="fix it")
    assert str(e) == "the model is wrong\n  at m.py:3 in forward: x\n  fix: fix it"
    assert e.summary == e.what and e.detail is None


def test_a_long_first_line_is_cut_at_a_clause_boundary_and_kept_as_detail():
    message = f"dimension t (x.shape[2]) cannot take every size: the model's code requires {LONG_GUARD} == 0"
    assert len(message) > 1300
    e = onnxport.DynamicShapesError(message, hint="narrow the range")
    first = str(e).splitlines()[0]
    assert len(first) <= FIRST_LINE_LIMIT
    assert first == "dimension t (x.shape[2]) cannot take every size (detail below)"
    assert e.detail.startswith("the model's code requires Mod(") and e.detail.endswith("== 0")
    assert e.what == message  # nothing lost
    assert str(e).splitlines()[1:3] == ["  fix: narrow the range", "  detail: " + e.detail]


def test_no_boundary_cuts_at_a_word():
    summary, detail = split_message("x" * 50 + " " + "y" * 300)
    assert summary.startswith("x" * 50) and len(summary) <= FIRST_LINE_LIMIT
    assert detail == "y" * 300


def test_terminal_colours_are_removed():
    e = onnxport.CheckpointError("load failed, \x1b[1mdo this only if you trust it\x1b[0m", detail="\x1b[31mred\x1b[0m")
    assert "\x1b" not in str(e) and e.detail == "red"


def test_a_capture_error_with_a_long_guard_has_a_short_first_line():
    from onnxport.capture.classify import classify

    torch_text = ("Constraints violated (t)! For more information, run with TORCH_LOGS=\"+dynamic\".\n"
                  f"  - Not all values of t = L['x'].size()[2] in the specified range t <= 4000 satisfy the generated "
                  f"guard Eq({LONG_GUARD}, 0).\n")
    error = classify(RuntimeError(torch_text), [], [], [("x", None)], [])
    first = str(error).splitlines()[0]
    assert isinstance(error, onnxport.DynamicShapesError) and len(first) <= FIRST_LINE_LIMIT
    assert LONG_GUARD.split(" + ")[-1] in str(error)  # the whole guard follows in the detail


@pytest.mark.parametrize("cls", [onnxport.CaptureError, onnxport.SaveError, onnxport.ValidationError])
def test_every_error_keeps_its_class_and_fields(cls):
    e = cls("a" * 500, where="w", hint="h")
    assert isinstance(e, onnxport.ExportError) and e.where == "w" and e.hint == "h"
    assert len(str(e).splitlines()[0]) <= FIRST_LINE_LIMIT


def test_an_error_given_a_new_fix_or_output_keeps_what_capture_set_on_it():
    from onnxport.errors import SpecializationError

    error = SpecializationError("axis 1 became a constant", where="m.py:3 in forward: x.reshape(...)", hint="a")
    error.computed_one = ("seq", 7)
    for again in (error.with_hint("b"), error.with_output("torch printed this")):
        assert again is not error and again.computed_one == ("seq", 7) and again.where == error.where


@pytest.mark.parametrize("torch_text", [
    "Expected all tensors to be on the same device but found at least two devices cpu and meta, and that is a real "
    "problem for this model (when checking argument for argument mat1 in method wrapper_CUDA_addmm)",
    "x" * 300,
], ids=["one-clause", "no-space"])
def test_a_first_line_says_what_failed_not_only_the_error_type(torch_text):
    e = onnxport.CaptureError(f"torch.export could not capture the model: RuntimeError: {torch_text}")
    first = str(e).splitlines()[0]
    assert len(first) <= FIRST_LINE_LIMIT and not first.endswith("RuntimeError (detail below)")
    assert torch_text[:40] in first


def test_dynamo_errors_name_the_error_the_traced_code_met():
    from onnxport.capture.classify import classify

    text = ("RuntimeError when making fake tensor call\n  Explanation: Dynamo failed to run FX node with fake tensors: "
            "call_function <built-in function matmul>(*(FakeTensor(..., size=(3, 4)),), **{}): got "
            "RuntimeError('a and b must have same reduction dim, but got [3, 4] X [3, 4].')\n  Hint: ...")
    first = str(classify(RuntimeError(text), [], [], [("x", None)], [])).splitlines()[0]
    assert first == ("torch.export could not capture the model: RuntimeError: a and b must have same reduction dim, "
                     "but got [3, 4] X [3, 4].")
