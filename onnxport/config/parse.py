"""Reading an export config: a TOML file or its dict checked and turned into an ``ExportConfig``
(``config.schema`` shows the format), each error a ``ConfigError`` naming the key at fault."""

from __future__ import annotations

import os
import re
from typing import Any

import torch

from onnxport.capture.inputs import MAX_ELEMENTS, elements
from onnxport.capture.relations import broken, evaluate, parse_relations
from onnxport.config.inputs import default_sizes, input_specs
from onnxport.config.schema import DEFAULT_MAX, DEFAULT_MIN, DTYPES, DimRange, ExportConfig, TensorDecl, sizes_text
from onnxport.config.stream import parse_stream
from onnxport.errors import ConfigError, DynamicShapesError, RuntimeTargetError

_TOP_KEYS = {"target", "model", "inputs", "outputs", "dims", "export", "validate", "stream"}
_EXPORT_KEYS = {"opset": int, "inline": bool, "optimize": bool, "strict": bool, "target": str}
_EXPORT_FIELDS = {"target": "runtime_target"}  # [export] keys whose ExportConfig field has another name


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
    three validation size sets, or one equal to the export's example sizes; and a ``[stream]``
    section that does not fit the declarations (``config.stream.parse_stream``).
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
    _check_input_sizes(cfg, where)
    if "stream" in data:
        cfg.stream = parse_stream(cfg, data["stream"], where)
    return cfg


def _check_input_sizes(cfg: ExportConfig, where: str) -> None:
    """The example and the listed validation sizes make inputs onnxport can hold (``MAX_ELEMENTS``)."""
    specs = input_specs(cfg)
    for label, sizes in [("the example sizes", cfg.example_sizes())] + \
            [(f"[validate] sizes {sizes_text(s)}", s) for s in (cfg.sizes if cfg.sizes_given else [])]:
        total = elements(specs, sizes)
        if total > MAX_ELEMENTS:
            big = max(specs, key=lambda s: elements([s], sizes))
            raise ConfigError(f"{where}: {label} make inputs of {total:,} elements ({big.name}: "
                              f"{big.shape(sizes)}), more than the {MAX_ELEMENTS:,} onnxport builds",
                              hint="give each dim in [dims] an example (and sizes) of the order a model takes")


def parse_dtype(text: Any, what: str) -> torch.dtype:
    """The torch dtype a config names (``"float32"``, ``"int64"``, a ``DTYPES`` key, any case);
    ``ConfigError`` starting with ``what`` (where it was read) when it names none."""
    if not isinstance(text, str) or text.lower() not in DTYPES:
        raise ConfigError(f"{what}: dtype {text!r} is not known",
                          hint="use one of "
                               f"{', '.join(sorted(set(DTYPES) - {'float', 'double', 'half', 'long', 'int'}))}")
    return DTYPES[text.lower()]


def parse_dim(d: Any, what: str) -> int | str:
    """A declared dim: an int (static; ``"80"`` too) or an identifier (a named dynamic dim);
    ``ConfigError`` starting with ``what`` for a negative int, a bool, or a name that is not an
    identifier."""
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
            raise ConfigError(f"{where}: no [{section}.NAME] table",
                              hint=f"declare each model input as [{section}.NAME] with dtype and dims")
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
        decl = TensorDecl(name, parse_dtype(spec["dtype"], what), [parse_dim(d, what) for d in spec["dims"]])
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
        r = DimRange(name, spec.get("min", DEFAULT_MIN), spec.get("max", DEFAULT_MAX), spec.get("example"),
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
        setattr(cfg, _EXPORT_FIELDS.get(key, key), value)
    if cfg.runtime_target is not None:
        from onnxport.targets import target

        try:
            target(cfg.runtime_target)
        except RuntimeTargetError as e:
            raise ConfigError(f"{where}: [export] {e.summary}", hint=f"{e.hint}: the runtime the model is for (the "
                              "model itself is the top-level target)") from None
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
