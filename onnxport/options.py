"""``ExportOptions``: what one export was asked, frozen once ``to_onnx`` is called.

Every stage of the export (``onnxport.stages``) reads its options from here; none is passed on by
position. The semantics of each field are ``to_onnx``'s keyword of the same name.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from onnxport.errors import ExportError

MIN_OPSET = 18
MAX_OPSET = 23  # the newest opset whose operators onnxport emits and tests
DEFAULT_TARGET = "onnxruntime"  # the target where none is named: to_onnx's, the CLI's, a config's
FALLBACK_SECONDS = 300.0  # the default time bound of one capture fallback (to_onnx's fallback_seconds)

StepCallback = Callable[[str, float], None]  # (step name, seconds), called as each step ends


@dataclasses.dataclass(frozen=True)
class ExportOptions:
    """The keywords of ``to_onnx`` (see its docstring for each), checked when made.

    ``target`` is checked by ``to_onnx`` against ``onnxport.targets.TARGETS`` (a later stage than this one).

    Raises:
        ExportError: ``opset`` outside ``MIN_OPSET..MAX_OPSET``.
    """

    dynamic_shapes: Any = None
    input_names: tuple[str, ...] | None = None
    output_names: tuple[str, ...] | None = None
    output_dims: Mapping[str, Mapping[int, str]] | None = None
    opset: int = 20
    optimize: bool = True
    inline: bool = False
    strict: bool = False
    rewrite_control_flow: bool | None = None
    other_axes: str = "static"
    relations: Mapping[str, str] | None = None
    capture_hooks: Callable[[], Any] | None = None
    registry: Any = None
    weights: Any = None
    cast_weights: bool = False
    fallback_seconds: float | None = FALLBACK_SECONDS  # seconds; None: no bound
    on_step: StepCallback | None = None
    target: str = DEFAULT_TARGET

    def __post_init__(self) -> None:
        if not MIN_OPSET <= self.opset <= MAX_OPSET:
            raise ExportError(f"opset {self.opset} is not supported",
                              hint=f"use an opset from {MIN_OPSET} to {MAX_OPSET} (default 20)" +
                                   ("; opset 24's fixed-buffer key/value cache is written for a decoder by "
                                    "export_pretrained(..., opset=24) / export-hf --opset 24"
                                    if self.opset == MAX_OPSET + 1 else ""))
        if self.fallback_seconds is not None and not self.fallback_seconds > 0:
            raise ExportError(f"fallback_seconds must be a positive number of seconds or None, not "
                              f"{self.fallback_seconds!r}", hint="give the time one capture fallback may take "
                              f"(default {FALLBACK_SECONDS:g}), or None for no bound")
        for name in ("input_names", "output_names"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))
