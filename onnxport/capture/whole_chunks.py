"""``chunk`` of an axis that holds a whole number of chunks at every size, captured without fixing
the size.

``x.chunk(k, dim)`` splits into pieces of ``ceil(n / k)``; how many pieces that makes depends on
``n`` in general (``n = 4, k = 3`` gives two), so torch decides the count while tracing
(``(n + ceil(n/k) - 1) // ceil(n/k)``, which it cannot simplify) and fixes a dynamic ``n`` to the
example's. Where ``n`` is a multiple of ``k`` by its form (ProphetNet's ``k`` streams concatenated:
``n = k * seq``), the pieces are ``k`` of ``n // k`` at every size. ``WHOLE_CHUNKS`` (a registered
capture patch) gives ``Tensor.chunk`` and ``torch.chunk``, while torch.export traces, that split
(``split_with_sizes``) when ``n % k == 0`` is known without a guard; every other call runs as before.

Semantics: ``torch.chunk`` (PyTorch docs: "each chunk is a view of the input tensor ... the last
chunk will be smaller if the tensor size along the given dimension is not divisible by chunks").
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from onnxport.capture.patches import Patch, SetAttribute, always, register


def whole_chunks(tensor: torch.Tensor, chunks: int, dim: int = 0) -> tuple[torch.Tensor, ...] | None:
    """The ``chunks`` pieces of ``tensor`` along ``dim`` when that size is symbolic and known to be a
    multiple of ``chunks`` without a guard; None otherwise (the caller runs ``chunk`` itself)."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    if not isinstance(tensor, torch.Tensor) or not isinstance(chunks, int) or isinstance(chunks, bool) \
            or chunks < 1 or not isinstance(dim, int) or not -tensor.dim() <= dim < tensor.dim():
        return None
    size = tensor.shape[dim]
    if not isinstance(size, torch.SymInt) or not statically_known_true(size % chunks == 0):
        return None
    return tensor.split([size // chunks] * chunks, dim)


def _make(original: Callable) -> Callable:
    def chunk(input, chunks, dim=0):  # noqa: A002 - torch.chunk's parameter names
        pieces = whole_chunks(input, chunks, dim)
        return original(input, chunks, dim) if pieces is None else pieces

    return chunk


def _changes() -> list[Any]:
    return [SetAttribute(torch.Tensor, "chunk", _make), SetAttribute(torch, "chunk", _make)]


WHOLE_CHUNKS = register(Patch(
    "chunk into whole pieces", _changes,
    "Tensor.chunk and torch.chunk: while torch.export traces, an axis whose symbolic size is a multiple of the "
    "chunk count by its form (k streams concatenated) is split into that many pieces of size // chunks "
    "(split_with_sizes), instead of torch deciding the count of pieces for the example's size", when=always, order=170))
