"""A config's ``[stream]`` section: the streaming check (``onnxport.verify.stream``) of a model exported
from a config, run chunk after chunk from an initial state, its state outputs fed back::

    [stream]
    states = { next_cache = "cache" }   # declared output -> the declared input it feeds at the next step
    steps = 6                           # per stream
    start = { cache = 0 }               # initial states: zeros, this dynamic axis at this size
    # start = { cache = { past = 0 } }  #   the same, the dim named (an input with several own dims)
    batches = [1, 3]                    # optional: the batch sizes the streams run at
    chunk_lengths = [4, 7]              # optional: the chunk lengths
    batch_dim = "batch"                 # optional: default axis 0 of the first fresh input with 2 axes or more
    chunk_dim = "time"                  # optional: default its axis 1

``parse_stream`` checks the section against the declared inputs and outputs; ``check_config_stream``
runs the check on the export, its fresh inputs made as the config declares them
(``config.inputs.make_inputs``: dtypes, value ranges, lengths).
"""

from __future__ import annotations

from typing import Any

import torch

from onnxport.capture.relations import evaluate, parse_relations
from onnxport.config.inputs import make_inputs
from onnxport.config.schema import ExportConfig, StreamConfig, TensorDecl
from onnxport.errors import ConfigError
from onnxport.verify.stream import STEPS
from onnxport.verify.stream_report import StreamReport

_KEYS = ("states", "steps", "start", "batches", "chunk_lengths", "batch_dim", "chunk_dim")
_STATES_HINT = 'states = { next_cache = "cache" }: each declared output of a state -> the declared input it feeds'


def parse_stream(cfg: ExportConfig, table: Any, where: str) -> StreamConfig:
    """Check a ``[stream]`` table against ``cfg``'s declarations (its dims completed) and return it parsed.

    Raises ``ConfigError`` starting with ``where`` (``config FILE``) and naming the key: an unknown key;
    ``states`` missing, empty, not a table of names, naming an output or input the config does not
    declare (or no ``[outputs]`` at all), feeding one input twice, making every input a state, or
    pairing an output and an input of another dtype, rank or fixed size; ``steps`` not an int >= 1;
    ``start`` naming an input that is no state, a dim the input does not carry, a dim a fresh input
    carries (the batch, the chunk: the streams set them), one size per dim, or a size outside the
    dim's declared range; ``batches`` / ``chunk_lengths`` not lists of ints >= 1 or outside the range
    of ``batch_dim`` / ``chunk_dim``; those not naming a dynamic dim of a fresh input.
    """
    what = f"{where}: [stream]"
    if not isinstance(table, dict):
        raise ConfigError(f"{what} must be a table", hint=_STATES_HINT)
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ConfigError(f"{what} unknown key(s) {unknown}", hint=f"keys are {', '.join(_KEYS)}")
    states = _states(cfg, table.get("states"), what)
    parsed: dict[str, Any] = {}
    if "steps" in table:
        parsed["steps"] = _positive(table["steps"], f"{what} steps", "e.g. steps = 6")
    fresh = [n for n in cfg.inputs if n not in states.values()]
    fresh_dims = {d for n in fresh for d in cfg.inputs[n].dims if isinstance(d, str)}
    parsed["start"] = _start(cfg, table.get("start", {}), states, fresh_dims, what)
    for key in ("batch_dim", "chunk_dim"):
        if key in table:
            name = table[key]
            if not isinstance(name, str) or name not in fresh_dims:
                raise ConfigError(f"{what} {key} = {name!r} is not a dynamic dim of the fresh inputs {fresh}",
                                  hint=f"name one of {sorted(fresh_dims)}")
            parsed[key] = name
    for key, dim_key in (("batches", "batch_dim"), ("chunk_lengths", "chunk_dim")):
        if key in table:
            sizes = table[key]
            if not isinstance(sizes, list) or not sizes:
                raise ConfigError(f"{what} {key} must be a list of sizes, like [1, 3]")
            sizes = [_positive(v, f"{what} {key}", "sizes are ints, 1 or more") for v in sizes]
            if parsed.get(dim_key) is not None:
                _in_range(cfg, parsed[dim_key], sizes, f"{what} {key}")
            parsed[key] = sizes
    return StreamConfig(states=states, **parsed)


def _states(cfg: ExportConfig, states: Any, what: str) -> dict[str, str]:
    """The ``states`` table checked: declared outputs to declared inputs, dtypes, ranks and fixed sizes agreeing."""
    if states is None:
        raise ConfigError(f"{what} has no states", hint=_STATES_HINT)
    if not isinstance(states, dict) or not states or any(not isinstance(v, str) for v in states.values()):
        raise ConfigError(f"{what} states must be a non-empty table of output names to input names, not {states!r}",
                          hint=_STATES_HINT)
    if not cfg.outputs:
        raise ConfigError(f"{what} states name outputs, but the config declares none",
                          hint="declare each output as [outputs.NAME], in the order the model returns them")
    for out, inp in states.items():
        if out not in cfg.outputs:
            raise ConfigError(f"{what} states: {out!r} is not a declared output",
                              hint=f"the declared outputs are {list(cfg.outputs)}")
        if inp not in cfg.inputs:
            raise ConfigError(f"{what} states: {out} = {inp!r} names no declared input",
                              hint=f"the declared inputs are {list(cfg.inputs)}")
    fed = list(states.values())
    twice = sorted({i for i in fed if fed.count(i) > 1})
    if twice:
        raise ConfigError(f"{what} states feed the input(s) {twice} from more than one output",
                          hint="give each state input one output")
    if len(set(fed)) == len(cfg.inputs):
        raise ConfigError(f"{what} states make every input a state: a stream needs fresh inputs at each step",
                          hint=f"the inputs are {list(cfg.inputs)}")
    for out, inp in states.items():
        a, b = cfg.outputs[out], cfg.inputs[inp]
        if a.dtype != b.dtype or len(a.dims) != len(b.dims) or any(
                isinstance(x, int) and isinstance(y, int) and x != y for x, y in zip(a.dims, b.dims)):
            raise ConfigError(f"{what} states: output {a} cannot feed input {b}",
                              hint="pair each output with the input of the same state: the same dtype and rank, "
                                   "the same fixed sizes")
    return dict(states)


def _start(cfg: ExportConfig, table: Any, states: dict[str, str], fresh_dims: set[str], what: str) -> dict[str, int]:
    """``start`` as dim name -> size, each dim an own dynamic dim of a state input, within its declared range."""
    if not isinstance(table, dict):
        raise ConfigError(f"{what} start must be a table like {{ cache = 0 }}", hint="state input -> size of its dim")
    out: dict[str, int] = {}
    for name, spec in table.items():
        key = f"{what} start.{name}"
        if name not in states.values():
            raise ConfigError(f"{key}: {name!r} is not a state input", hint=f"the state inputs are "
                              f"{list(states.values())}")
        decl = cfg.inputs[name]
        own = [d for d in decl.dims if isinstance(d, str) and d not in fresh_dims]
        if isinstance(spec, dict):
            sizes = spec
        elif len(own) == 1:
            sizes = {own[0]: spec}
        else:
            raise ConfigError(f"{key}: {decl} has {len(own)} dynamic dims of its own ({own}), a size says no one",
                              hint=f"name the dim: {name} = {{ DIM = 0 }}" if own else
                              "a state whose dims the fresh inputs all carry starts at the example's sizes")
        for dim, size in sizes.items():
            if dim not in decl.dims:
                raise ConfigError(f"{key}: {decl} has no dim {dim!r}")
            if dim in fresh_dims:
                raise ConfigError(f"{key}: {dim!r} is a dim of the fresh inputs too, the streams set its sizes",
                                  hint="start sizes the dims of the state alone (a cache's length); batches and "
                                       "chunk_lengths choose the others")
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise ConfigError(f"{key}: the size of {dim!r} must be an int, 0 or more, not {size!r}")
            if dim in cfg.relations:
                raise ConfigError(f"{key}: {dim!r} is computed from other dims ({dim} = {cfg.relations[dim]})",
                                  hint="give the sizes of the dims it is computed from")
            if out.get(dim, size) != size:
                raise ConfigError(f"{key}: {dim!r} starts at {out[dim]} for another state input",
                                  hint="one dim has one size; give the states that differ dims of their own")
            r = cfg.dims[dim]
            if size > r.max or (r.ranged and size < r.min):
                raise ConfigError(f"{key}: {dim} = {size} is outside {r.min}..{r.max} ([dims] {dim})",
                                  hint=f"start within the range, or widen it: {dim} = {{ min = {size}, ... }}")
            out[dim] = size
    return out


def _positive(value: Any, what: str, hint: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{what} must be an int, 1 or more, not {value!r}", hint=hint)
    return value


def _in_range(cfg: ExportConfig, dim: str, sizes: list[int], what: str) -> None:
    r = cfg.dims[dim]
    outside = [s for s in sizes if not r.min <= s <= r.max]
    if outside:
        raise ConfigError(f"{what}: {outside} are outside {r.min}..{r.max}, the range of {dim}",
                          hint=f"choose sizes within [dims] {dim}")


def check_config_stream(result: Any, cfg: ExportConfig | None = None) -> StreamReport:
    """Run the streaming check of a config's ``[stream]`` section on its export: ``result.validate_stream``
    with the section's states, steps and sizes; the initial states zeros at the example's sizes but for
    ``start``'s; the fresh inputs of each step made as the config declares them (``config.inputs.make_inputs``,
    seeded by step and sizes). ``cfg``: default ``result.config``.

    Returns the ``StreamReport``. Raises ``ConfigError`` when the config has no ``[stream]`` section or
    ``batches`` / ``chunk_lengths`` fall outside their dim's range, and ``ValidationError`` (from
    ``onnxport.verify.stream.check_stream``) when the section does not describe a stream of the model
    (a state output whose size cannot feed its input at some step...).
    """
    cfg = cfg if cfg is not None else result.config
    stream = getattr(cfg, "stream", None)
    if stream is None:
        raise ConfigError(f"config {getattr(cfg, 'source', '<none>')} has no [stream] section",
                          hint=_STATES_HINT)
    fresh = [v.name for v in result.model_proto.graph.input if v.name in cfg.inputs
             and v.name not in stream.states.values()]
    batch_dim, chunk_dim = _stream_dims(cfg, stream, fresh)
    where = f"config {cfg.source}: [stream]"
    for key, dim in (("batches", batch_dim), ("chunk_lengths", chunk_dim)):
        if getattr(stream, key) is not None and dim is not None:
            _in_range(cfg, dim, getattr(stream, key), f"{where} {key}")
    relations = parse_relations(cfg.relations) if cfg.relations else None

    def sizes_at(given: dict[str, int | None]) -> dict[str, int]:
        sizes = {**cfg.example_sizes(), **{d: v for d, v in given.items() if d is not None and v is not None}}
        return evaluate(relations, {k: v for k, v in sizes.items() if k not in relations}) if relations else sizes

    def initial(batch: int | None) -> dict[str, torch.Tensor]:
        sizes = sizes_at({batch_dim: batch, **stream.start})
        return {n: _zeros(cfg.inputs[n], sizes) for n in stream.states.values()}

    def make_step(step: int, batch: int | None, chunk: int | None) -> dict[str, torch.Tensor]:
        sizes = sizes_at({batch_dim: batch, chunk_dim: chunk})
        made = make_inputs(cfg, sizes, seed=10_000 + 1000 * step + 31 * (batch or 0) + (chunk or 0))
        return {n: made[n] for n in fresh}

    return result.validate_stream(dict(stream.states), initial, make_step=make_step, steps=stream.steps or STEPS,
                                  batches=stream.batches, chunk_lengths=stream.chunk_lengths, atol=cfg.atol,
                                  rtol=cfg.rtol, batch_dim=batch_dim, chunk_dim=chunk_dim)


def _stream_dims(cfg: ExportConfig, stream: StreamConfig, fresh: list[str]) -> tuple[str | None, str | None]:
    """The batch and chunk dims: the section's, else axes 0 and 1 of the first fresh input (in ONNX order)
    with two axes or more, where they are named (as ``check_stream`` takes them by default)."""
    first = next((n for n in fresh if len(cfg.inputs[n].dims) >= 2), fresh[0] if fresh else None)
    axes = cfg.inputs[first].dims if first is not None else []
    batch = stream.batch_dim if stream.batch_dim is not None else (
        axes[0] if axes and isinstance(axes[0], str) else None)
    chunk = stream.chunk_dim if stream.chunk_dim is not None else (
        axes[1] if len(axes) > 1 and isinstance(axes[1], str) and axes[1] != batch else None)
    return batch, chunk


def _zeros(decl: TensorDecl, sizes: dict[str, int]) -> torch.Tensor:
    return torch.zeros([d if isinstance(d, int) else sizes[d] for d in decl.dims], dtype=decl.dtype)
