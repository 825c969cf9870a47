"""Rewriting of Python control flow over dynamic sizes and tensor values before capture.

``rewrite_module(model, args, kwargs)`` returns a shallow copy of ``model`` whose ``forward`` (and
the methods it calls, and the ``forward`` of user-defined submodules) has

* ``for i in range(<tensor size>)`` loops filling rows / lists turned into ``scan``, and so loops over a
  tensor's rows (``for row in x``, ``for g in x.unbind(d)``, ``for g in torch.unbind(x, d)``) where
  their number is dynamic,
* ``while <tensor condition>:`` loops turned into ``while_loop``,
* ``if <tensor condition>:`` blocks (assignments, or an early ``return``) turned into ``torch.cond``,

so torch.export keeps them as control flow instead of unrolling them at the example's sizes.
Constructs it cannot rewrite are left as they are and listed, with their line, in
``.onnxport_rewrite_notes`` (and a warning); so is a function whose source file, as it reads now, is not
the code running (edited after import, or other source compiled under its name: ``running_source``),
the note saying to re-import the module. Before returning, the copy is run against the
original on the example inputs and on a random input set of other sizes: any difference raises
``RewriteError``.
"""

from __future__ import annotations

from typing import Any

import torch

from onnxport.errors import RewriteError
from onnxport.rewrite.module import RewriteNote, rewrite_function, rewrite_tree, warn_notes

__all__ = ["RewriteError", "RewriteNote", "rewrite_module", "rewrite_function"]


def rewrite_module(model: torch.nn.Module, args: Any = (), kwargs: dict | None = None, *,
                   check: bool = True, warn: bool = True) -> torch.nn.Module:
    """Rewrite the control flow of ``model`` into scan / while_loop / torch.cond.

    Args:
        model: the user's module; never modified (parameters and buffers are shared).
        args, kwargs: example inputs, as given to ``to_onnx``.
        check: compare the rewritten copy with ``model`` in eager mode (example inputs, then one
            random input set of other sizes when the model accepts one).
        warn: warn about the constructs left as Python (one warning listing them).

    Returns:
        A module computing the same function, with ``.onnxport_rewrite_notes``: a list of
        ``RewriteNote`` (construct, ``file:line``, rewritten or not, and what / why).

    Raises:
        RewriteError: the rewritten copy fails or differs from ``model`` on the check inputs.
    """
    from onnxport.rewrite.check import check_equivalent

    notes: list[RewriteNote] = []
    new = rewrite_tree(model, notes)
    new.onnxport_rewrite_notes = notes
    if warn:
        warn_notes(notes)
    rewritten = [n for n in notes if n.rewritten]
    if check and rewritten:
        check_equivalent(model, new, tuple(args), dict(kwargs or {}), rewritten)
    return new
