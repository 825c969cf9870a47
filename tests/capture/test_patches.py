"""Capture-time patches of torch: installed one export at a time, always restored (on return,
error, interruption), never left to change eager PyTorch; exports in two threads both correct."""

from __future__ import annotations

import threading
import time

import pytest
import torch

import onnxport
from onnxport.capture.patches import (CAPTURE_LOCK, REGISTRY, Patch, SetAttribute, install, installed, original_of,
                                      patch_sites, register, restore_leftovers)
from onnxport.capture.tracing import SYMBOLIC_MATH
from onnxport.translate.registry import Translations

Translations(20)  # the op families' patches registered too


def snapshot() -> dict:
    """The value at every registered site (a kernel table copied: it is changed in place)."""
    out = {}
    for owner, name in patch_sites():
        value = getattr(owner, name, None)
        out[(id(owner), name)] = dict(value) if isinstance(value, dict) else value
    return out


PLUS_ONE = register(Patch("test: math.sqrt plus one",
                          lambda: [SetAttribute(__import__("math"), "sqrt",
                                                lambda original: (lambda v: original(v) + 1))]))
PLUS_TEN = register(Patch("test: math.sqrt plus ten",
                          lambda: [SetAttribute(__import__("math"), "sqrt",
                                                lambda original: (lambda v: original(v) + 10))]))


class Encoder(torch.nn.Module):
    """nn.TransformerEncoder with a padding mask: the capture patches its forward."""

    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=True)

    def forward(self, x, mask):
        return self.enc(x, src_key_padding_mask=mask)


class Scaled(torch.nn.Module):
    """math.sqrt of a size: the capture patches math.sqrt."""

    def forward(self, x):
        import math

        return x / math.sqrt(x.shape[1])


def encoder_inputs():
    x = torch.randn(2, 7, 16)
    mask = torch.zeros(2, 7, dtype=torch.bool)
    mask[1, 5:] = True
    return x, mask


@pytest.mark.slow
def test_two_threads_export_correctly_and_leave_no_patch():
    torch.manual_seed(0)
    encoder = Encoder().eval()
    x, mask = encoder_inputs()
    with torch.no_grad():
        eager_before = encoder(x, mask)
    before = snapshot()
    results, errors = {}, []

    def export(name, model, args, shapes):
        try:
            results[name] = onnxport.to_onnx(model, args, dynamic_shapes=shapes)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=export, args=("encoder", encoder, (x, mask),
                                                     {"x": {0: "b", 1: "t"}, "mask": {0: "b", 1: "t"}})),
               threading.Thread(target=export, args=("scaled", Scaled().eval(), (torch.randn(3, 9),),
                                                     {"x": {0: "n", 1: "d"}}))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert snapshot() == before
    for name, result in results.items():
        report = result.validate()
        assert report.ok, f"{name}\n{report}"
    with torch.no_grad():
        eager_after = encoder(x, mask)
    torch.testing.assert_close(eager_after, eager_before, rtol=0, atol=0)


@pytest.mark.slow
def test_a_second_export_waits_for_the_first():
    steps = []
    done = threading.Event()

    def export():
        onnxport.to_onnx(Scaled().eval(), (torch.randn(3, 9),), on_step=lambda s, _: steps.append(s))
        done.set()

    with CAPTURE_LOCK:  # an export in progress elsewhere
        t = threading.Thread(target=export)
        t.start()
        time.sleep(1.0)
        assert steps == [] and not done.is_set()
    t.join(timeout=300)
    assert done.is_set() and steps[0] == "capture"


@pytest.mark.slow
def test_exports_in_two_threads_do_not_interleave_their_steps():
    order = []
    between = threading.Event()

    def first_steps(step, _):
        order.append(("first", step))
        if step == "capture":  # the first export between two steps, outside any patch: the second still waits
            between.set()
            time.sleep(1.0)

    def export(on_step):
        onnxport.to_onnx(Scaled().eval(), (torch.randn(3, 9),), dynamic_shapes={"x": {0: "n"}}, on_step=on_step)

    first = threading.Thread(target=export, args=(first_steps,))
    first.start()
    assert between.wait(timeout=300)
    second = threading.Thread(target=export, args=(lambda step, _: order.append(("second", step)),))
    second.start()
    first.join(timeout=300)
    second.join(timeout=300)
    firsts = [i for i, (who, _) in enumerate(order) if who == "first"]
    seconds = [i for i, (who, _) in enumerate(order) if who == "second"]
    assert firsts and seconds and max(firsts) < min(seconds), order


class Raises(torch.nn.Module):
    def __init__(self, error):
        super().__init__()
        self.error = error

    def forward(self, x):
        x / __import__("math").sqrt(x.shape[1])
        raise self.error


@pytest.mark.parametrize("error", [RuntimeError("the model's own failure"), KeyboardInterrupt()])
def test_patches_are_restored_when_capture_fails_or_is_interrupted(error):
    before = snapshot()
    expected = onnxport.CaptureError if isinstance(error, Exception) else KeyboardInterrupt
    with pytest.raises(expected):
        onnxport.to_onnx(Raises(error).eval(), (torch.randn(2, 4),), dynamic_shapes={"x": {1: "d"}})
    assert snapshot() == before
    assert CAPTURE_LOCK.acquire(blocking=False)  # released too
    CAPTURE_LOCK.release()


def test_a_patch_left_installed_is_undone_by_the_next_export():
    import math

    real = math.sqrt
    install(PLUS_ONE)  # as if a capture had ended where no finally could run
    assert math.sqrt(4.0) == 3.0 and original_of(math.sqrt) is real
    try:
        result = onnxport.to_onnx(Scaled().eval(), (torch.randn(3, 9),), dynamic_shapes={"x": {0: "n"}})
        assert math.sqrt is real
        assert result.validate().ok
    finally:
        math.sqrt = real


def test_a_patch_never_wraps_a_patch():
    import math

    real = math.sqrt
    with installed(PLUS_ONE):
        with installed(PLUS_TEN):
            assert math.sqrt(4.0) == 12.0  # the inner one replaced the function underneath, not the outer patch
        assert math.sqrt is real  # ... and restored the function underneath
    assert math.sqrt is real


def test_a_patch_must_be_registered_to_be_installed():
    unregistered = Patch("not registered", lambda: [SetAttribute(__import__("math"), "sqrt", lambda o: o)])
    with pytest.raises(ValueError, match="not registered"):
        install(unregistered)
    with pytest.raises(ValueError, match="already registered"):
        register(Patch(PLUS_ONE.name, PLUS_ONE.changes))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(n for n, p in REGISTRY.items() if p.sample is not None))
def test_every_registered_patch_changes_its_sites_and_restores_them(name):
    patch = REGISTRY[name]
    before = snapshot()
    handle = install(patch, *patch.sample)
    try:
        if patch.sites():  # transformers' patch has none when transformers is not installed
            assert snapshot() != before, f"{name} changed none of its sites"
    finally:
        handle.restore()
    assert snapshot() == before
    assert not handle.restore()  # once only


def test_restore_leftovers_undoes_every_patch_still_installed():
    import math

    real = math.sqrt
    install(SYMBOLIC_MATH)
    install(PLUS_TEN)
    assert restore_leftovers() == [PLUS_TEN.name, SYMBOLIC_MATH.name]
    assert math.sqrt is real and restore_leftovers() == []


def test_dim_constraint_solving_that_sympy_refuses_does_not_stop_capture():
    from onnxport.capture.guards.record import _tolerant_solve

    def refuses(self):
        raise NotImplementedError("The inequality cannot be solved using solve_univariate_inequality.")

    def broken(self):
        raise RuntimeError("not sympy's")

    assert _tolerant_solve(refuses)(object()) is None
    with pytest.raises(RuntimeError):
        _tolerant_solve(broken)(object())
