"""torch.linalg.solve_triangular by doubling inverted diagonal blocks (tests ops/triangular.py)."""

import pytest
import torch

import onnxport
from exportcheck import Fn, Fn2, check_export


def _triangular(batch, n, upper, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(batch, n, n, generator=g) * 0.3 + 2 * torch.eye(n)  # well conditioned either way
    return a  # the solve reads one triangle: the other is noise it must ignore


@pytest.mark.parametrize("n", [1, 3, 4, 5, 16])
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("unitriangular", [False, True])
def test_solve_triangular_left(n, upper, unitriangular):
    fn = lambda a, b: torch.linalg.solve_triangular(a, b, upper=upper, unitriangular=unitriangular)  # noqa: E731
    b = torch.randn(2, n, 3)
    check_export(Fn2(fn), (_triangular(2, n, upper), b), ({0: "batch"}, {0: "batch", 2: "k"}))


@pytest.mark.parametrize("upper", [False, True])
def test_solve_triangular_right_with_broadcast_batch(upper):
    # X A = B; B's batch broadcast against A's (one A for every row of a batch of B)
    fn = lambda a, b: torch.linalg.solve_triangular(a, b, upper=upper, left=False)  # noqa: E731
    check_export(Fn2(fn), (_triangular(1, 6, upper)[0], torch.randn(2, 4, 6)), (None, {0: "batch", 1: "rows"}))


def test_inverse_of_a_unit_lower_chunk_matrix():
    # the gated delta rule's use: (I - L)^-1 of a strictly lower L with a symbolic batch of chunks,
    # B the identity; keys of unit length, as the models normalize them
    def fn(x):
        k = torch.nn.functional.normalize(x, dim=-1)
        attn = -(k @ k.mT).tril(-1) * 0.5
        return torch.linalg.solve_triangular(-attn, torch.eye(64), upper=False, unitriangular=True)

    check_export(Fn(fn), (torch.randn(2, 3, 64, 8),), ({0: "batch", 1: "chunks"},))


def test_a_dynamic_matrix_size_is_refused():
    fn = Fn2(lambda a, b: torch.linalg.solve_triangular(a, b, upper=False))
    with pytest.raises(onnxport.UnsupportedOpError, match="size is dynamic") as e:
        onnxport.to_onnx(fn, (_triangular(1, 4, False)[0], torch.randn(4, 2)),
                         dynamic_shapes=({0: "n", 1: "n"}, {0: "n"}))
    assert "static" in e.value.hint


@pytest.mark.parametrize("left", [True, False])
def test_a_unit_one_by_one_matrix_keeps_its_batch(left):
    # A^-1 of a unit 1 x 1 matrix is a constant: the output still takes A's batch dims
    fn = lambda a, b: torch.linalg.solve_triangular(a, b, upper=False, left=left, unitriangular=True)  # noqa: E731
    b = torch.randn(1, 2) if left else torch.randn(2, 1)
    check_export(Fn2(fn), (torch.randn(3, 1, 1), b), ({0: "batch"}, None))


def test_a_float64_right_hand_side_gives_the_matrix_dtype():
    fn = lambda a, b: torch.linalg.solve_triangular(a, b, upper=True)  # noqa: E731
    check_export(Fn2(fn), (_triangular(2, 4, True), torch.randn(2, 4, 3, dtype=torch.float64)),
                 ({0: "batch"}, {0: "batch"}))
