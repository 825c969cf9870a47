"""The automatic eager check of a rewritten model: same outputs as the original on the example
inputs, on a random input set of other sizes and, where it branches on a flag or a counter given as
a tensor, with each such input given its other truth value (both sides of the branch)."""

from __future__ import annotations

import traceback
from typing import Any, Iterator

import torch
import torch.utils._pytree as pytree

from onnxport.rewrite import state_branches
from onnxport.rewrite.state_branches import state_variants


def _clone(obj: Any) -> Any:
    return pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, obj)


def _run(model: torch.nn.Module, args: tuple, kwargs: dict) -> Any:
    """``model(*args, **kwargs)`` without gradients, on copies of the inputs, with the random
    generator seeded the same way for every run (dropout in training mode draws the same masks)."""
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return model(*_clone(args), **_clone(kwargs))


def _difference(expected: Any, got: Any) -> str | None:
    """What differs between two output structures, or None when they match (NaN-aware,
    rtol 1e-4 / atol 1e-5 for floating point, exact otherwise)."""
    e_leaves, e_spec = pytree.tree_flatten(expected)
    g_leaves, g_spec = pytree.tree_flatten(got)
    if e_spec != g_spec:
        return f"output structure {g_spec} instead of {e_spec}"
    for k, (e, g) in enumerate(zip(e_leaves, g_leaves)):
        if isinstance(e, torch.Tensor) != isinstance(g, torch.Tensor):
            return f"output {k}: {type(g).__name__} instead of {type(e).__name__}"
        if not isinstance(e, torch.Tensor):
            if e != g:
                return f"output {k}: {g!r} instead of {e!r}"
            continue
        if e.shape != g.shape or e.dtype != g.dtype:
            return f"output {k}: {g.dtype}{list(g.shape)} instead of {e.dtype}{list(e.shape)}"
        if e.is_floating_point() or e.is_complex():
            ok = torch.allclose(e, g, rtol=1e-4, atol=1e-5, equal_nan=True)
        else:
            ok = torch.equal(e, g)
        if not ok:
            err = (e.double() - g.double()).abs().max().item() if e.numel() else 0.0
            return f"output {k}: values differ (max abs difference {err:.3g})"
    return None


def _resized(t: torch.Tensor, sizes: dict[int, int], g: torch.Tensor, dims: str) -> torch.Tensor:
    shape = list(t.shape)
    axes = range(t.dim() - 1) if t.dim() >= 2 else range(t.dim())
    if dims == "first":
        axes = range(min(1, t.dim()))
    for a in axes:
        shape[a] = sizes.get(shape[a], shape[a])
    if t.is_floating_point():
        mean = t.mean().item() if t.numel() else 0.0
        std = t.std().item() if t.numel() > 1 else 1.0
        return (torch.randn(shape, generator=g) * std + mean).to(t.dtype)
    if t.dtype == torch.bool:
        p = t.float().mean().item() if t.numel() else 0.5
        return torch.rand(shape, generator=g) < p
    lo, hi = (int(t.min()), int(t.max())) if t.numel() else (0, 1)
    return torch.randint(lo, hi + 1, shape, generator=g).to(t.dtype)


def other_inputs(args: tuple, kwargs: dict) -> Iterator[tuple[tuple, dict]]:
    """Random input sets like the example: every size seen on a non-last axis grown by one (then
    only the first axis, then the same sizes), values drawn like the example's."""
    tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    seen = {s for t in tensors for s in (t.shape[:-1] if t.dim() >= 2 else t.shape)}
    sizes = {s: s + 1 for s in seen if s >= 1}
    for dims, grow in (("all", sizes), ("first", sizes), ("all", {})):
        g = torch.Generator().manual_seed(1)
        yield pytree.tree_map(lambda t: _resized(t, grow, g, dims) if isinstance(t, torch.Tensor) else t,
                              (args, kwargs))


def _user_line(error: BaseException, files: set[str]) -> str | None:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename in files]
    if not frames:
        return None
    f = frames[-1]
    return f"{f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}"


def check_equivalent(model: torch.nn.Module, new: torch.nn.Module, args: tuple, kwargs: dict,
                     rewritten: list) -> None:
    """Raise ``RewriteError`` when ``new`` fails or differs from ``model`` on the example inputs, on
    the first random input set of other sizes that ``model`` itself accepts, or, where a rewritten
    ``if`` ran, on the example with each flag or counter input given its other truth value
    (``state_branches.state_variants``) that ``model`` accepts. The note of each ``if`` of
    ``rewritten`` that ran then says whether both of its sides did."""
    from onnxport.errors import RewriteError

    where = rewritten[0].where
    files = {n.where.rsplit(":", 2)[0] for n in rewritten}
    constructs = "; ".join(str(n) for n in rewritten)
    hint = "export without rewrite_control_flow=True, or write the loop/branch with scan / torch.cond directly"

    def compare(label: str, a: tuple, kw: dict, expected: Any) -> None:
        try:
            got = _run(new, a, kw)
        except Exception as e:  # the rewritten code failed where the original ran
            raise RewriteError(f"the rewritten model raises {type(e).__name__} on the {label}: {e}\n"
                               f"  rewritten: {constructs}", where=_user_line(e, files) or where, hint=hint) from e
        diff = _difference(expected, got)
        if diff is not None:
            raise RewriteError(f"the rewritten model differs from the original on the {label}: {diff}\n"
                               f"  rewritten: {constructs}", where=where, hint=hint)

    with state_branches.sides_taken() as seen:
        try:
            expected = _run(model, args, kwargs)
        except Exception:  # the original itself fails on the example: capture reports that, with its line
            return
        compare("example inputs", args, kwargs, expected)
        for a, kw in other_inputs(args, kwargs):
            try:
                expected = _run(model, a, kw)
            except Exception:  # the original does not accept these sizes: try the next set
                continue
            compare("random inputs " + ", ".join(str(list(t.shape)) for t in pytree.tree_leaves((a, kw))
                                                 if isinstance(t, torch.Tensor)), a, kw, expected)
            break
        if seen:  # a rewritten if ran: its other side too, from each flag or counter given its other value
            for label, a, kw in state_variants(args, kwargs):
                try:
                    expected = _run(model, a, kw)
                except Exception:  # the original does not accept that state
                    continue
                compare(label, a, kw, expected)
    for note in rewritten:
        checked = state_branches.said(note.where, seen)
        if checked:
            note.detail += f"; {checked}"
