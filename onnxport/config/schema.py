"""Export configs: declared inputs (named dims, lengths), declared outputs, dim ranges, options.

A config is a TOML file (read with ``tomllib``) or the equivalent dict::

    target = "examples/speech_encoder.py:build_encoder"   # optional; the CLI's TARGET wins

    [model]                       # keyword arguments of the factory
    vocab = 32

    [inputs.features]
    dtype = "float32"
    dims = ["batch", "time", 80]  # ints are static, names are dynamic dims
    [inputs.lengths]
    dtype = "int64"
    dims = ["batch"]
    lengths_of = "features.time"  # valid lengths of the time axis of features

    [outputs.logits]
    dtype = "float32"
    dims = ["batch", "out_time", 32]
    [outputs.out_lengths]
    dtype = "int64"
    dims = ["batch"]
    lengths_of = "logits.out_time"

    [dims]                        # sizes per named dim, for export and validation
    batch = { min = 1, max = 16, example = 2 }
    time = { min = 16, max = 1000 }
    total = "past + seq"          # a relation: total is computed from past and seq

    [export]                      # to_onnx options
    opset = 20
    inline = false
    optimize = true
    strict = false
    target = "onnxruntime"        # the runtime the model is for (to_onnx's target; --target overrides)

    [validate]
    sizes = [{ batch = 3, time = 37 }, { batch = 1, time = 200 }, { batch = 5, time = 16 }]
    atol = 1e-4
    rtol = 1e-3

    [stream]                      # the streaming check (config.stream): outputs fed back as inputs
    states = { next_cache = "cache" }
    steps = 6
    start = { cache = 0 }         # the initial cache: zeros, its own dynamic dim at size 0

A dim named in several inputs is one dim. This module holds what a parsed config is
(``ExportConfig``, ``TensorDecl``, ``DimRange``); ``config.parse`` reads and checks one,
``config.inputs`` makes its inputs and validation sizes, ``config.declarations`` reads the
command line's ``--input`` texts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32, "float": torch.float32, "float64": torch.float64, "double": torch.float64,
    "float16": torch.float16, "half": torch.float16, "bfloat16": torch.bfloat16,
    "int64": torch.int64, "long": torch.int64, "int32": torch.int32, "int": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}


def dtype_name(dtype: torch.dtype) -> str:
    """The config's name of ``dtype`` (the first spelling in ``DTYPES``: ``float32``, ``int64``...)."""
    return next(k for k, v in DTYPES.items() if v == dtype)


def sizes_text(sizes: dict[str, int]) -> str:
    """``{"batch": 3, "time": 37}`` -> ``"batch=3, time=37"``, as the validation tables show sizes."""
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


DEFAULT_MIN = 1  # the sizes of a dim [dims] gives no range
DEFAULT_MAX = 4096


@dataclasses.dataclass
class TensorDecl:
    """One declared input or output.

    ``dims``: ints (static) and dim names (dynamic). ``lengths_of``: ``(tensor, dim name)`` whose
    valid lengths this 1-D integer tensor holds, or None. ``low``/``high``: value range of
    random integer inputs (``high`` exclusive).
    """

    name: str
    dtype: torch.dtype
    dims: list[int | str]
    lengths_of: tuple[str, str] | None = None
    low: int = 0
    high: int = 100

    def __str__(self) -> str:
        return f"{self.name}: {dtype_name(self.dtype)}[{', '.join(str(d) for d in self.dims)}]"


@dataclasses.dataclass
class DimRange:
    """Sizes of one named dim: ``min``..``max`` inclusive, ``example`` for the export. ``ranged``:
    the config set ``min`` or ``max`` itself (a condition of the model that cuts the range is then
    refused; without one, onnxport adopts the condition with a warning, as for a plain-string dim)."""

    name: str
    min: int = DEFAULT_MIN
    max: int = DEFAULT_MAX
    example: int | None = None
    ranged: bool = False


@dataclasses.dataclass
class StreamConfig:
    """A parsed ``[stream]`` section (``config.stream``).

    ``states``: declared output name -> declared input name it feeds at the next step. ``steps``:
    per stream (None: ``verify.stream.STEPS``). ``start``: the sizes of the state inputs' own dims
    at step 0 (dim name -> size; the other dims at the example's sizes), the state inputs zeros.
    ``batches``, ``chunk_lengths``: the sizes the streams run at (None: ``check_stream``'s).
    ``batch_dim``, ``chunk_dim``: dim names (None: axes 0 and 1 of the first fresh input with two
    axes or more, in the ONNX model's input order).
    """

    states: dict[str, str]
    steps: int | None = None
    start: dict[str, int] = dataclasses.field(default_factory=dict)
    batches: list[int] | None = None
    chunk_lengths: list[int] | None = None
    batch_dim: str | None = None
    chunk_dim: str | None = None


@dataclasses.dataclass
class ExportConfig:
    """A parsed, checked config. ``sizes`` are the validation size sets (dim name -> size)."""

    inputs: dict[str, TensorDecl]
    outputs: dict[str, TensorDecl]
    dims: dict[str, DimRange]
    model_args: dict[str, Any] = dataclasses.field(default_factory=dict)
    target: str | None = None
    opset: int = 20
    inline: bool = False
    optimize: bool = True
    strict: bool = False
    runtime_target: str | None = None  # [export] target: to_onnx's target (None: the command's, else onnxruntime)
    sizes: list[dict[str, int]] = dataclasses.field(default_factory=list)
    sizes_given: bool = False  # the [validate] table lists the sizes (else they are generated)
    relations: dict[str, str] = dataclasses.field(default_factory=dict)  # dim -> expression ([dims] total = "...")
    atol: float | None = None
    rtol: float | None = None
    source: str = "<dict>"
    stream: StreamConfig | None = None  # the [stream] section, None without one

    @property
    def input_dims(self) -> list[str]:
        """Names of the dynamic dims carried by the inputs, in order of first appearance."""
        seen: list[str] = []
        for decl in self.inputs.values():
            for d in decl.dims:
                if isinstance(d, str) and d not in seen:
                    seen.append(d)
        return seen

    def example_sizes(self) -> dict[str, int]:
        """The size of each input dim in the export's example."""
        return {n: self.dims[n].example for n in self.input_dims}
