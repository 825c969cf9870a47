"""A comprehension over a dynamic ``range`` stacked by ``torch.cat`` / ``torch.stack`` becomes a scan
(``rewrite/comprehensions.py``): Reformer's per-batch selection of position encodings exports with a
dynamic batch, by default, and matches eager at other batch sizes; a comprehension over a constant range,
or of a form not taken, stays as written."""

import ast
import inspect
import textwrap

import pytest

import torch

import onnxport
from exportcheck import check_export, count_ops
from onnxport.rewrite import comprehensions
from onnxport.rewrite.module import FunctionContext


class SelectPerRow(torch.nn.Module):
    """Reformer's ``AxialPositionEmbeddings``: each batch element's encodings at its own positions."""

    def forward(self, encodings, position_ids):  # [batch, positions, dim], [batch, seq] int64
        batch_size = position_ids.shape[0]
        return torch.cat(
            [torch.index_select(encodings[i], 0, position_ids[i]).unsqueeze(0) for i in range(batch_size)], dim=0)


class StackedProducts(torch.nn.Module):
    """``torch.stack`` over ``range(x.shape[0])`` whose element reads the loop variable twice, with a
    name ``i`` of the function's own that the comprehension's ``i`` must not change."""

    def forward(self, x, w):  # [n, a, b], [n, b, c]
        i = x.shape[2]
        y = torch.stack([x[i] @ w[i] + i for i in range(x.shape[0])])
        return y * i


class ConstantRange(torch.nn.Module):
    def forward(self, x):
        return torch.cat([x * (k + 1) for k in range(3)], dim=1)


class Ragged(torch.nn.Module):
    def forward(self, x):
        return torch.cat([x[i, : i + 1] for i in range(x.shape[0])])


def test_a_ragged_comprehension_is_refused_naming_the_comprehension_in_the_users_words():
    with pytest.raises(onnxport.SpecializationError) as info:
        onnxport.to_onnx(Ragged(), (torch.randn(3, 4),), dynamic_shapes=({0: "n"},))
    message = str(info.value)
    assert "comprehension at" in message and "x[i, :i + 1]" in message and "_onnxport_" not in message, message


class RaggedRows(torch.nn.Module):
    def forward(self, x):
        return torch.cat([x[i].repeat(i + 1) for i in range(x.shape[0])])


def test_rows_of_differing_shapes_are_refused_as_such():
    with pytest.raises(onnxport.SpecializationError) as info:
        onnxport.to_onnx(RaggedRows(), (torch.randn(3, 4),), dynamic_shapes=({0: "n"},))
    message = str(info.value)
    assert "rows differ in shape ((4,) at step 0, (8,) at step 1)" in message and "stack expects" not in message


@pytest.mark.slow
def test_select_per_row_exports_with_a_dynamic_batch():
    encodings, ids = torch.randn(3, 10, 4), torch.randint(0, 10, (3, 5))
    result = check_export(SelectPerRow(), (encodings, ids), ({0: "batch"}, {0: "batch", 1: "seq"}),
                          sizes=[{"batch": 1, "seq": 2}, {"batch": 6, "seq": 9}])
    assert count_ops(result, "Scan") == 1


@pytest.mark.slow
def test_stack_of_products_keeps_the_functions_own_name():
    assert "_onnxport_i_" in _hoisted(inspect.getsource(StackedProducts.forward))
    result = check_export(StackedProducts(), (torch.randn(3, 4, 5), torch.randn(3, 5, 2)),
                          ({0: "n", 1: "a"}, {0: "n"}), sizes=[{"n": 1, "a": 2}, {"n": 5, "a": 7}])
    assert count_ops(result, "Scan") == 1


def test_constant_range_stays_a_comprehension():
    result = check_export(ConstantRange(), (torch.randn(2, 3),), ({0: "n"},), sizes=[{"n": 1}, {"n": 4}])
    assert count_ops(result, "Scan") == 0


def _hoisted(source: str) -> str:
    func = ast.parse(textwrap.dedent(source)).body[0]
    ctx = FunctionContext(func, "<test>")
    func.body = comprehensions.hoisted(func.body, ctx)
    return ast.unparse(func)


def test_forms_not_taken_are_left_as_written():
    for body in ("return torch.cat([x[i] for i in range(x.shape[0]) if i % 2], 0)",
                 "return torch.cat([torch.stack([x[i, j] for j in range(2)]) for i in range(x.shape[0])], 0)",
                 "return torch.cat([x[i] for i, _ in enumerate(range(x.shape[0]))], 0)",
                 "return sum([x[i] for i in range(x.shape[0])])",
                 "return torch.cat([x[i] for i in range(4)], 0)",
                 "return torch.cat([x[i] for i in range(x.shape[0])], 0) if x.shape[0] else x",
                 "return x.numel() == 0 or torch.cat([x[i] for i in range(x.shape[0])], 0)"):
        source = f"def forward(self, x):\n    {body}\n"
        assert _hoisted(source) == ast.unparse(ast.parse(source).body[0]), body


def test_taken_form_is_a_loop_filling_a_list():
    out = _hoisted("def forward(self, x):\n    n = x.shape[0]\n"
                   "    return torch.stack([x[i] * 2 for i in range(n)], 1)\n")
    lines = out.splitlines()
    assert lines[2].strip().startswith("_onnxport_rows_") and lines[2].strip().endswith("= []"), out
    assert lines[3].strip() == "for i in range(n):", out  # the user's name: the function has no other i
    assert ".append(x[i] * 2)" in lines[4], out
    assert lines[5].strip().startswith("return torch.stack(_onnxport_rows_") and lines[5].strip().endswith(", 1)"), out
