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

    [validate]
    sizes = [{ batch = 3, time = 37 }, { batch = 1, time = 200 }, { batch = 5, time = 16 }]
    atol = 1e-4
    rtol = 1e-3

A dim named in several inputs is one dim. ``parse_config`` checks all of it and raises
``ConfigError`` naming the key at fault.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any

import torch

from onnxport.capture.inputs import InputSpec
from onnxport.capture.inputs import make_inputs as make_spec_inputs
from onnxport.capture.relations import broken, evaluate, parse_relations
from onnxport.errors import ConfigError, DynamicShapesError
from onnxport.verify.sizes import validation_sizes

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


_TOP_KEYS = {"target", "model", "inputs", "outputs", "dims", "export", "validate"}
_EXPORT_KEYS = {"opset": int, "inline": bool, "optimize": bool, "strict": bool}
_DEFAULT_MIN = 1
_DEFAULT_MAX = 4096


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
    min: int = _DEFAULT_MIN
    max: int = _DEFAULT_MAX
    example: int | None = None
    ranged: bool = False


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
    sizes: list[dict[str, int]] = dataclasses.field(default_factory=list)
    sizes_given: bool = False  # the [validate] table lists the sizes (else they are generated)
    relations: dict[str, str] = dataclasses.field(default_factory=dict)  # dim -> expression ([dims] total = "...")
    atol: float | None = None
    rtol: float | None = None
    source: str = "<dict>"

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


# ------------------------------------------------------------------------------------ parsing
def load_config(config: str | os.PathLike | dict) -> ExportConfig:
    """Read a TOML file (path) or take a dict, and return the checked ``ExportConfig``.

    Raises ``ConfigError`` when the file is missing, is not valid TOML, or declares something
    inconsistent (see ``parse_config``).
    """
    if isinstance(config, ExportConfig):
        return config
    if isinstance(config, dict):
        return parse_config(config)
    path = os.fspath(config)
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError as e:
            raise ConfigError("reading a TOML config needs Python 3.11 or the tomli package",
                              hint="pip install tomli, or pass the config as a dict") from e
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError as e:
        raise ConfigError(f"config file {path} does not exist", hint="check the --config path") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {path} is not valid TOML: {e}",
                          hint="see https://toml.io for the syntax; strings need quotes") from e
    return parse_config(data, source=path)


def parse_config(data: dict, source: str = "<dict>") -> ExportConfig:
    """Check a config dict (as read from TOML) and build the ``ExportConfig``.

    A ``[dims]`` entry that is a string relates its dim to others (``total = "past + seq"``):
    its example and validation sizes are computed from theirs (``onnxport.capture.relations``).

    Raises ``ConfigError`` for: unknown sections or keys, a dtype or dim of the wrong kind, a
    relation that does not parse or names dims no input declares, a
    ``lengths_of`` that names no input axis or that is not a 1-D integer tensor, two length
    inputs for one dim, a 0-d integer input standing for a dim's size (the batch size is never an
    input of its own), min > max, an example or validation size outside its range, fewer than
    three validation size sets, or one equal to the export's example sizes.
    """
    where = f"config {source}"
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown section(s) {unknown}", hint=f"sections are {sorted(_TOP_KEYS)}")
    inputs = _parse_tensors(data.get("inputs"), "inputs", where, required=True)
    outputs = _parse_tensors(data.get("outputs"), "outputs", where, required=False)
    table = data.get("dims", {})
    relations = {k: v for k, v in table.items() if isinstance(v, str)} if isinstance(table, dict) else {}
    dims = _parse_dims({k: v for k, v in table.items() if k not in relations} if relations else table, where)
    cfg = ExportConfig(inputs=inputs, outputs=outputs, dims=dims, source=source, relations=relations)
    target = data.get("target")
    if target is not None and not isinstance(target, str):
        raise ConfigError(f"{where}: target must be a string like 'pkg.module:build' or 'file.py:Net'")
    cfg.target = target
    model = data.get("model", {})
    if not isinstance(model, dict):
        raise ConfigError(f"{where}: [model] must be a table of factory keyword arguments")
    cfg.model_args = dict(model)
    _parse_export(cfg, data.get("export", {}), where)
    _check_lengths(cfg, where)
    _complete_dims(cfg, where)
    _parse_validate(cfg, data.get("validate", {}), where)
    return cfg


def _parse_dtype(text: Any, what: str) -> torch.dtype:
    if not isinstance(text, str) or text.lower() not in DTYPES:
        raise ConfigError(f"{what}: dtype {text!r} is not known",
                          hint=f"use one of {', '.join(sorted(set(DTYPES) - {'float', 'double', 'half', 'long', 'int'}))}")
    return DTYPES[text.lower()]


def _parse_dim(d: Any, what: str) -> int | str:
    if isinstance(d, bool) or not isinstance(d, (int, str)):
        raise ConfigError(f"{what}: dim {d!r} must be an int (static) or a name (dynamic)")
    if isinstance(d, int):
        if d < 0:
            raise ConfigError(f"{what}: dim {d} is negative")
        return d
    d = d.strip()
    if d.isdigit():
        return int(d)
    if not d.isidentifier():
        raise ConfigError(f"{what}: dim name {d!r} is not an identifier",
                          hint="name dims like Python variables: batch, time, out_time")
    return d


def _parse_tensors(table: Any, section: str, where: str, required: bool) -> dict[str, TensorDecl]:
    if table is None:
        if required:
            raise ConfigError(f"{where}: no [{section}.NAME] table", hint=f"declare each model input as [{section}.NAME] "
                              "with dtype and dims")
        return {}
    if not isinstance(table, dict) or any(not isinstance(v, dict) for v in table.values()):
        raise ConfigError(f"{where}: [{section}] must hold one table per tensor, like [{section}.x]")
    out = {}
    for name, spec in table.items():
        what = f"{where}: [{section}.{name}]"
        extra = sorted(set(spec) - {"dtype", "dims", "lengths_of", "low", "high"})
        if extra:
            raise ConfigError(f"{what}: unknown key(s) {extra}", hint="keys are dtype, dims, lengths_of, low, high")
        if "dtype" not in spec or "dims" not in spec:
            raise ConfigError(f"{what}: needs both dtype and dims", hint='e.g. dtype = "float32", dims = ["batch", 80]')
        if not isinstance(spec["dims"], list):
            raise ConfigError(f"{what}: dims must be a list like [\"batch\", \"time\", 80]")
        decl = TensorDecl(name, _parse_dtype(spec["dtype"], what), [_parse_dim(d, what) for d in spec["dims"]])
        for key in ("low", "high"):
            if key in spec:
                if not isinstance(spec[key], int) or isinstance(spec[key], bool):
                    raise ConfigError(f"{what}: {key} must be an int")
                setattr(decl, key, spec[key])
        if decl.low >= decl.high:
            raise ConfigError(f"{what}: low ({decl.low}) must be below high ({decl.high})")
        ref = spec.get("lengths_of")
        if ref is not None:
            m = re.fullmatch(r"\s*(\w+)\.(\w+)\s*", ref) if isinstance(ref, str) else None
            if not m:
                raise ConfigError(f"{what}: lengths_of = {ref!r} must be 'TENSOR.DIM', like 'features.time'")
            decl.lengths_of = (m.group(1), m.group(2))
        out[name] = decl
    return out


def _parse_dims(table: Any, where: str) -> dict[str, DimRange]:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [dims] must map dim names to {{ min = ..., max = ... }}")
    out = {}
    for name, spec in table.items():
        what = f"{where}: [dims] {name}"
        if not name.isidentifier():
            raise ConfigError(f"{what}: not an identifier")
        if not isinstance(spec, dict) or sorted(set(spec) - {"min", "max", "example"}):
            raise ConfigError(f"{what}: must be a table with min, max and optionally example",
                              hint=f"e.g. {name} = {{ min = 1, max = 64 }}")
        if any(not isinstance(v, int) or isinstance(v, bool) for v in spec.values()):
            raise ConfigError(f"{what}: min, max and example must be ints")
        r = DimRange(name, spec.get("min", _DEFAULT_MIN), spec.get("max", _DEFAULT_MAX), spec.get("example"),
                     ranged="min" in spec or "max" in spec)
        if r.min < 0 or r.min > r.max:
            raise ConfigError(f"{what}: min {r.min} and max {r.max} do not form a range")
        out[name] = r
    return out


def _parse_export(cfg: ExportConfig, table: Any, where: str) -> None:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [export] must be a table")
    for key, value in table.items():
        kind = _EXPORT_KEYS.get(key)
        if kind is None:
            raise ConfigError(f"{where}: [export] unknown key {key!r}", hint=f"keys are {sorted(_EXPORT_KEYS)}")
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ConfigError(f"{where}: [export] {key} must be {kind.__name__}, not {value!r}")
        setattr(cfg, key, value)
    if cfg.opset < 18:
        raise ConfigError(f"{where}: [export] opset {cfg.opset} is below 18", hint="use opset 18 or newer (default 20)")


def _check_lengths(cfg: ExportConfig, where: str) -> None:
    for name, decl in cfg.inputs.items():
        if decl.dims or decl.dtype.is_floating_point:
            continue
        for dim in cfg.input_dims:
            if name in (dim, f"{dim}_size", f"num_{dim}", f"n_{dim}"):
                raise ConfigError(f"{where}: input {name!r} is the size of dim {dim!r}, which the inputs already carry",
                                  hint=f"drop [inputs.{name}]: the model reads the size from the tensors' shapes")
    owners: dict[str, str] = {}
    for section, table in (("inputs", cfg.inputs), ("outputs", cfg.outputs)):
        for name, decl in table.items():
            if decl.lengths_of is None:
                continue
            what = f"{where}: [{section}.{name}] lengths_of = '{decl.lengths_of[0]}.{decl.lengths_of[1]}'"
            ref_name, dim = decl.lengths_of
            ref = table.get(ref_name)
            if ref is None:
                raise ConfigError(f"{what}: there is no {section[:-1]} {ref_name!r}",
                                  hint=f"the {section} are {sorted(table)}")
            if dim not in ref.dims:
                raise ConfigError(f"{what}: {ref_name!r} has no dim {dim!r} (its dims are {ref.dims})")
            if decl.dtype.is_floating_point or decl.dtype == torch.bool or len(decl.dims) != 1:
                raise ConfigError(f"{what}: a lengths tensor is 1-D and integer, not {decl}")
            if decl.dims[0] == dim or decl.dims[0] not in ref.dims:
                raise ConfigError(f"{what}: its dim {decl.dims[0]!r} must be another dim of {ref_name!r} "
                                  f"(usually the batch), not {ref.dims}")
            if section == "inputs":
                if dim in owners:
                    raise ConfigError(f"{what}: dim {dim!r} already has the length input {owners[dim]!r}",
                                      hint="a dim shared by several inputs has one length input at most")
                owners[dim] = name


def _complete_dims(cfg: ExportConfig, where: str) -> None:
    unknown = sorted(set(cfg.dims) - set(cfg.input_dims))
    if unknown:
        raise ConfigError(f"{where}: [dims] names {unknown}, which no input declares",
                          hint=f"[dims] sets the sizes of input dims: {cfg.input_dims}")
    try:
        related = parse_relations(cfg.relations, set(cfg.input_dims))
    except DynamicShapesError as e:
        raise ConfigError(f"{where}: [dims] {e.what}", hint=e.hint) from e
    for name in cfg.input_dims:
        r = cfg.dims.setdefault(name, DimRange(name))
        if name in related:
            continue
        if r.example is None:
            r.example = min(max(2, r.min) + 1, r.max)
        if not r.min <= r.example <= r.max:
            raise ConfigError(f"{where}: [dims] {name}: example {r.example} is outside {r.min}..{r.max}")
        if r.example < 2:
            raise ConfigError(f"{where}: [dims] {name}: the example size must be 2 or more (torch.export "
                              "specializes sizes 0 and 1)", hint=f"set {name} = {{ max = ... }} to 2 or more")
    if related:
        examples = evaluate(related, {n: cfg.dims[n].example for n in cfg.input_dims if n not in related})
        for name in related:
            cfg.dims[name].example = examples[name]


def _parse_validate(cfg: ExportConfig, table: Any, where: str) -> None:
    if not isinstance(table, dict) or sorted(set(table) - {"sizes", "atol", "rtol"}):
        raise ConfigError(f"{where}: [validate] takes sizes, atol and rtol")
    for key in ("atol", "rtol"):
        if key in table:
            if not isinstance(table[key], (int, float)) or isinstance(table[key], bool) or table[key] < 0:
                raise ConfigError(f"{where}: [validate] {key} must be a non-negative number")
            setattr(cfg, key, float(table[key]))
    example = cfg.example_sizes()
    sizes = table.get("sizes")
    if sizes is None:
        cfg.sizes = default_sizes(cfg)
        return
    if not isinstance(sizes, list) or any(not isinstance(s, dict) for s in sizes):
        raise ConfigError(f"{where}: [validate] sizes must be a list of tables like {{ batch = 3, time = 50 }}")
    if len(sizes) < 3 and example:
        raise ConfigError(f"{where}: [validate] has {len(sizes)} size set(s); at least three are needed",
                          hint="list three or more, each unlike the export's example sizes "
                               + sizes_text(example))
    out = []
    for i, s in enumerate(sizes):
        what = f"{where}: [validate] sizes[{i}]"
        unknown = sorted(set(s) - set(example))
        if unknown:
            raise ConfigError(f"{what}: {unknown} are not input dims", hint=f"the input dims are {sorted(example)}")
        full = dict(example)
        for k, v in s.items():
            r = cfg.dims[k]
            if not isinstance(v, int) or isinstance(v, bool) or not r.min <= v <= r.max:
                raise ConfigError(f"{what}: {k} = {v!r} is outside {r.min}..{r.max}")
            full[k] = v
        if cfg.relations:
            related = parse_relations(cfg.relations)
            given = dict(full)
            full = evaluate(related, {k: v for k, v in full.items() if k not in related})
            wrong = broken(related, {**full, **{k: v for k, v in s.items() if k in related}})
            if wrong:
                raise ConfigError(f"{what}: {sizes_text(given)} breaks the relation {'; '.join(wrong)}",
                                  hint="give the independent dims only: related ones are computed")
        if full == example:
            raise ConfigError(f"{what}: equals the export's example sizes {example}",
                              hint="validate on other sizes, so that a size frozen by the export shows")
        out.append(full)
    cfg.sizes_given = True
    cfg.sizes = out


def default_sizes(cfg: ExportConfig, guards: list = ()) -> list[dict[str, int]]:
    """The validation size sets of ``onnxport.verify.sizes.validation_sizes`` within the [dims]
    ranges: without ``guards``, those that move every dim away from the example (the sets known
    before the export); with the export's ``guards``, also both sides of each guard's boundary."""
    example = cfg.example_sizes()
    ranges = {n: (r.min, r.max) for n, r in cfg.dims.items()}
    sets = validation_sizes(example, ranges, list(guards), relations=parse_relations(cfg.relations))
    moved = [s for why, s in sets if all(s[n] != e for n, e in example.items() if n not in cfg.relations)]
    return moved + [s for why, s in sets if guards and s not in moved]


# ------------------------------------------------------------------------------------ inputs
def input_specs(cfg: ExportConfig) -> list[InputSpec]:
    """An ``onnxport.verify.InputSpec`` per declared input: its dtype and dims; floats standard
    normal, integers uniform in ``low..high-1``; a lengths input tied to ``TENSOR.DIM`` holds values
    between 1 and that dim's size, the longest equal to it, and the steps past each length of every
    input along that dim and the lengths' own dim are zero, as in a batch of padded sequences."""
    pads = {}
    for name, decl in cfg.inputs.items():
        if decl.lengths_of is None:
            continue
        for other, odecl in cfg.inputs.items():  # every input along that dim and the lengths' dim
            if other != name and decl.lengths_of[1] in odecl.dims and decl.dims[0] in odecl.dims:
                pads[other] = (name, odecl.dims.index(decl.dims[0]), odecl.dims.index(decl.lengths_of[1]))
    return [InputSpec(name, decl.dtype, tuple(decl.dims), low=decl.low, high=decl.high - 1,
                      lengths_of=decl.lengths_of[1] if decl.lengths_of else None, pad=pads.get(name))
            for name, decl in cfg.inputs.items()]


def make_inputs(cfg: ExportConfig, sizes: dict[str, int], seed: int = 0) -> dict[str, torch.Tensor]:
    """Random inputs of the declared dtypes and dims at ``sizes`` (dim name -> size), seeded
    (``input_specs``, made by ``onnxport.verify.make_inputs``)."""
    return make_spec_inputs(input_specs(cfg), sizes, seed)


def dynamic_shapes(cfg: ExportConfig) -> dict[str, dict[int, Any]]:
    """``dynamic_shapes`` for ``to_onnx``: a ``torch.export.Dim`` with its range per dim the config
    gives a range, the plain name for the others (the conditions the model needs are then adopted)."""
    made: dict[str, Any] = {}
    out: dict[str, dict[int, Any]] = {}
    for name, decl in cfg.inputs.items():
        axes = {}
        for axis, d in enumerate(decl.dims):
            if isinstance(d, str):
                if d not in made:
                    r = cfg.dims[d]
                    made[d] = torch.export.Dim(d, min=r.min, max=r.max) if r.ranged else d
                axes[axis] = made[d]
        out[name] = axes
    return out


# ------------------------------------------------------------------------------------ CLI text
_DECL = re.compile(r"^\s*(\w+)\s*:\s*(\w+)\s*\[(.*)\]\s*$")


def parse_declaration(text: str) -> TensorDecl:
    """Parse ``"x: float32[batch, 3, 224, 224]"`` into a ``TensorDecl``; ``ConfigError`` if malformed."""
    m = _DECL.match(text)
    if not m:
        raise ConfigError(f"cannot read the declaration {text!r}",
                          hint='write it as "NAME: DTYPE[DIM, ...]", e.g. "x: float32[batch, 3, 224, 224]"')
    name, dtype, dims = m.groups()
    what = f"declaration {text!r}"
    parts = [p.strip() for p in dims.split(",") if p.strip()]
    return TensorDecl(name, _parse_dtype(dtype, what), [_parse_dim(p, what) for p in parts])


def config_from_declarations(inputs: list[str], outputs: list[str] | None = None) -> dict:
    """A config dict from ``--input`` / ``--declare-output`` texts (``parse_config`` checks it)."""
    data: dict[str, Any] = {"inputs": {}}
    for section, texts in (("inputs", inputs), ("outputs", outputs or [])):
        for text in texts:
            decl = parse_declaration(text)
            data.setdefault(section, {})[decl.name] = {"dtype": dtype_name(decl.dtype), "dims": list(decl.dims)}
    return data
