"""The float64 reference: eager PyTorch run again in double precision on the same inputs, and once
more in float32 on the inputs moved by one ulp (``SetRuns``, each run made when an output first
needs it; ``Float64Reference``, the float64 copy of the module made once per validation).

A float32 computation is at best the exact answer for inputs off by about one unit in the last
place (a backward-stable algorithm; Higham, *Accuracy and Stability of Numerical Algorithms*,
ch. 1-3). The model run on a ``float64`` copy (``torch.nn.Module.double``: floating parameters
and buffers cast, floating inputs cast) computes nearly that exact answer; eager float32's own
distance to it says how far a float32 result can lie from it on these inputs, and the float32
run on inputs moved by one ulp says how much a last-bit change of the data moves the output
(large where the model is ill-conditioned there: a sigmoid of an input of 1e5 flips from 0 to 1
between neighbouring floats). ``verify.float64_bound`` judges onnxruntime's float32 output by
both distances.

No reference is made, with the reason, where the model cannot run in float64: no eager module
(a program loaded without it), weights whose float64 copy would exceed ``MAX_BYTES``, a module
that cannot be copied or cast; per input set, a float64 run that raises (an op without a float64
kernel, a tensor the model makes in float32 meeting a float64 one); per output, a float64 run
that does not give a float64 output where eager gives float32 (the model casts it itself).
"""

from __future__ import annotations

import copy
import dataclasses
import warnings

import torch
from torch.utils import _pytree as pytree

from onnxport.verify.eager import run_eager

MAX_BYTES = 1 << 30  # a float64 copy of the weights larger than this is not made (1 GiB)

_WIDER = {torch.float32: torch.float64, torch.float16: torch.float64, torch.bfloat16: torch.float64,
          torch.complex64: torch.complex128}


@dataclasses.dataclass(frozen=True)
class Float64Module:
    """A float64 copy of the eager module, or the reason there is none.

    Attributes:
        module: the copy (``module.double()`` of a deep copy), None when ``reason`` says why not.
        reason: why the model cannot be run in float64 ("" when it can).
    """

    module: torch.nn.Module | None
    reason: str = ""


def float64_module(module: torch.nn.Module | None) -> Float64Module:
    """A float64 copy of ``module`` (deep copy, floating parameters and buffers cast to float64),
    or the reason there is none: no module, weights whose float64 copy would exceed
    ``MAX_BYTES``, a copy or cast that raises. Never raises."""
    if module is None:
        return Float64Module(None, "no eager module to run in float64")
    tensors = list(module.parameters()) + list(module.buffers())
    wide = sum(t.numel() * 8 for t in tensors if t.is_floating_point())
    if wide > MAX_BYTES:
        return Float64Module(None, f"weights too large for a float64 copy ({wide / 2**30:.1f} GiB in float64)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch's pytree notes on deepcopy
            double = copy.deepcopy(module).double()
    except Exception as e:  # noqa: BLE001 - a module that cannot be copied or cast has no reference
        return Float64Module(None, f"the module cannot be cast to float64: {_first_line(e)}")
    return Float64Module(double)


def widened(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The inputs with every floating tensor cast to float64 (complex to complex128); integer and
    bool tensors as they are."""
    return pytree.tree_map_only(torch.Tensor, lambda t: t.to(_WIDER[t.dtype]) if t.dtype in _WIDER else t,
                                (args, kwargs))


def run_float64(double: Float64Module, fresh: bool, args: tuple, kwargs: dict, input_names: list[str],
                updated: list[str]) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """``verify.eager.run_eager`` of the float64 copy on the inputs cast to float64 (``widened``).
    Raises what the model raises in float64."""
    return run_eager(double.module, fresh, *widened(args, kwargs), input_names, updated)


def moved_one_ulp(args: tuple, kwargs: dict, seed: int) -> tuple[tuple, dict]:
    """The inputs with every finite, non-integer float32 or float64 value moved by one ulp up or
    down (a seeded random choice per element); integers, integer-valued floats (masks, 0 and 1,
    exact zeros), non-finite values and half-precision tensors stay, so that masks stay masks."""
    gen = torch.Generator().manual_seed(seed)

    def move(t: torch.Tensor) -> torch.Tensor:
        if t.dtype not in (torch.float32, torch.float64) or t.numel() == 0:
            return t
        up = torch.randint(0, 2, t.shape, generator=gen).bool()
        toward = torch.where(up, torch.full_like(t, float("inf")), torch.full_like(t, float("-inf")))
        keep = ~torch.isfinite(t) | (t == torch.round(t))
        return torch.where(keep, t, torch.nextafter(t, toward))

    return pytree.tree_map_only(torch.Tensor, move, (args, kwargs))


def _first_line(e: Exception) -> str:
    text = str(e).splitlines()[0][:160] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


class Float64Reference:
    """The float64 copy of one validation's eager module, made when an output first needs it, or
    why there is none: ``reason`` ("" while a copy can be made or is made).

    Args:
        module: the eager module, or None (a result without one: the exported program's graph
            fixes its dtypes, so it does not run in float64).
        atol, rtol: the tolerances the user gave, or None: given, they judge every output and no
            copy is made.
    """

    def __init__(self, module: torch.nn.Module | None, atol: float | None = None, rtol: float | None = None):
        self._source, self._copy = module, None
        self.reason = ("tolerances given" if atol is not None or rtol is not None else
                       "no eager module (the exported program fixes its dtypes)" if module is None else "")

    def module(self) -> Float64Module | None:
        """The float64 copy (made on the first call), or None when ``reason`` says why not."""
        if self.reason:
            return None
        if self._copy is None:
            self._copy = float64_module(self._source)
            self.reason = self._copy.reason
        return None if self.reason else self._copy

    def failed(self, error: Exception) -> None:
        """The float64 run raised: no reference for this input set nor for the following ones."""
        self.reason, self._copy = f"eager float64 failed: {_first_line(error)}", None


class SetRuns:
    """The other eager runs of one input set, each made when an output first needs it: the
    float64 reference (``run_float64``) and eager float32 on the inputs moved by one ulp
    (``moved_one_ulp``). An output is named by its position among the user outputs (int) or by
    the buffer or input it updates (str), as ``verify.eager.run_eager`` returns them.

    Args:
        module: the eager module; ``reference``: the validation's ``Float64Reference``.
        fresh, args, kwargs, input_names, updated: as ``run_eager`` takes them.
        outputs: how many user outputs eager float32 gave (a float64 run giving another number
            is no reference).
    """

    def __init__(self, module: torch.nn.Module, reference: Float64Reference, fresh: bool, args: tuple, kwargs: dict,
                 input_names: list[str], updated: list[str], outputs: int):
        self.module, self.reference, self.fresh = module, reference, fresh
        self.args, self.kwargs, self.input_names, self.updated = args, kwargs, input_names, updated
        self.outputs = outputs
        self._float64 = self._moved = None

    def float64(self, key: int | str) -> torch.Tensor | None:
        """The float64 run's value of output ``key``, or None (``self.reference.reason`` says why)."""
        if self._float64 is None:
            double = self.reference.module()
            if double is None:
                return None
            try:
                self._float64 = run_float64(double, self.fresh, self.args, self.kwargs, self.input_names, self.updated)
            except Exception as e:  # noqa: BLE001 - a model that fails in float64 keeps the dtype tolerance
                self.reference.failed(e)
                return None
            if len(self._float64[0]) != self.outputs:
                self.reference.failed(ValueError(f"{len(self._float64[0])} outputs for eager float32's {self.outputs}"))
                self._float64 = None
                return None
        return _pick(self._float64, key)

    def moved(self, key: int | str) -> torch.Tensor | None:
        """Eager float32's value of output ``key`` on the inputs moved by one ulp, or None when
        that run raises."""
        if self._moved is None:
            try:
                self._moved = run_eager(self.module, self.fresh, *moved_one_ulp(self.args, self.kwargs, seed=0),
                                        self.input_names, self.updated)
            except Exception:  # noqa: BLE001 - no moved run: the bound keeps eager's own distance
                self._moved = ([], {})
        return _pick(self._moved, key)


def _pick(runs: tuple[list, dict], key: int | str) -> torch.Tensor | None:
    outputs, after = runs
    return after.get(key) if isinstance(key, str) else outputs[key] if key < len(outputs) else None
