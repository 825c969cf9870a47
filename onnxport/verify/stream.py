"""The streaming check: the exported model called chunk after chunk, its state outputs fed back as its
state inputs, against eager PyTorch doing the same with its own states.

A streaming model (a speech encoder, a recurrent step) is deployed as a loop: the fresh inputs of
one step (a chunk of features, a token) and the states the previous step returned (attention left
context, convolution context, LSTM ``(h, c)``, a frame counter) go in; the outputs and the next
states come out, from an initial state on. ``validate`` compares one call at a time on generated
inputs; a model right at every such call can still be wrong in the loop: at the first steps, where
a cache is shorter than at the example (empty, then filling up), or where a state takes values the
example's random ones never take. ``check_stream`` runs the loop in onnxruntime and in eager
PyTorch for ``steps`` steps from the initial state, each side feeding back its own states, and
judges every output of every step, states included, as ``validate`` judges one output
(``verify.judge``: float32 against eager PyTorch run in float64, the float64 run being a stream of
its own with float64 states; integers exactly; other dtypes by their tolerance). The loop is
repeated at two batch sizes and two chunk lengths where those dims are dynamic. What it reports:
``verify.stream_report``.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Callable

import numpy as np
import onnx
import torch
from torch.utils import _pytree as pytree

from onnxport.capture.inputs import dim_examples, dim_names, make_inputs, specs_from_captured
from onnxport.capture.patches import exclusive_capture
from onnxport.errors import ValidationError
from onnxport.verify.eager import UPDATED, run_eager
from onnxport.verify.judge import judge
from onnxport.verify.reference import Float64Reference, SetRuns, run_float64, widened
from onnxport.verify.report import Check
from onnxport.verify.runner import OrtRunner
from onnxport.verify.stream_report import StreamReport

STEPS = 6  # default length of each stream
_HINT_STATES = 'states={"cache_out": "cache_in"} (ONNX output name -> ONNX input name), or {1: 1} by position'


def check_stream(exported: Any, model: torch.nn.Module | None = None, *, states: Any,
                 initial: Any = None, chunks: list[dict] | None = None,
                 make_step: Callable[[int, int, int], dict] | None = None, steps: int = STEPS,
                 batches: Any = None, chunk_lengths: Any = None, batch_dim: str | None = None,
                 chunk_dim: str | None = None, atol: float | None = None, rtol: float | None = None) -> StreamReport:
    """Run the exported model as a stream in onnxruntime against eager PyTorch and compare every step.

    Args:
        exported: an ``ExportResult`` (its module, example and captured program are used), or an ONNX
            model (``onnx.ModelProto`` or a path) with ``model`` given: then the eager model is called
            with the ONNX model's inputs as positional tensors, in the ONNX input order.
        model: the eager module; default the result's module (or its program's).
        states: which outputs feed which inputs at the next step: ``{output: input}`` by ONNX names or
            by positions (ints: the index among the graph's outputs, inputs), or a list of pairs. Each
            pair's dtype and rank must agree, and their fixed sizes.
        initial: the state inputs at step 0: ``{input name: tensor}``, or a function ``batch ->
            {input name: tensor}``. A dict given at one batch size is used at another where every row
            along the batch axis is the same (zeros); default zeros shaped like the example's state
            inputs.
        chunks: the fresh (non-state) inputs of each step, ``[{input name: tensor}, ...]``: one stream
            at their sizes, ``len(chunks)`` steps.
        make_step: ``(step, batch, chunk_length) -> {input name: tensor}``: the fresh inputs of a step
            at any size. Without ``chunks`` nor ``make_step``, they are made like the example's
            (``capture.inputs.make_inputs``, seeded per stream and step; needs an ``ExportResult``).
        steps: steps per stream (with ``make_step`` or generated inputs).
        batches, chunk_lengths: the sizes each stream runs at (every pair of them); default the
            example's and another where the dim is dynamic (1 or 2 for the batch, about half the
            example or one more for the chunk), the example's alone where it is fixed.
        batch_dim, chunk_dim: the dim names (ONNX dim_params) of the batch and of the chunk length;
            default axis 0 and axis 1 of the first fresh input with at least two axes.
        atol, rtol: tolerances as ``validate`` takes them (given, they judge every float output
            instead of the float64 reference).

    Returns a ``StreamReport`` (``.ok``, printable table of per-step errors, ``.per_step``,
    ``.first_failure``, ``.validation``). A step where eager PyTorch or onnxruntime raises is a failed
    row, and its stream stops there.

    Raises ``ValidationError`` when the arguments do not describe a stream of this model: a state name
    or position the model does not have, an input fed twice, a state output whose dtype, rank or fixed
    size differs from its input's, an initial state or a chunk missing an input or naming another,
    an initial state whose rows differ at another batch size, sizes given for a fixed dim, a model
    that updates a buffer in place (the ONNX model cannot carry it from one call to the next), or
    neither ``chunks``, ``make_step`` nor an export to make inputs like.

    Runs under the capture lock (``capture.patches.exclusive_capture``), as ``validate`` does.
    """
    result = exported if hasattr(exported, "model_proto") and hasattr(exported, "captured") else None
    proto = result.model_proto if result is not None else exported
    if isinstance(proto, str):
        proto = onnx.load(proto)
    if model is None:
        if result is None or (result.module is None and result.program is None):
            raise ValidationError("check_stream needs the eager model to compare with",
                                  hint="pass model=<the torch.nn.Module exported>")
        model = result.module if result.module is not None else result.program.module()
    sig = _Signature(proto)
    pairs = _pairs(states, sig)
    state_inputs = [i for _, i in pairs]
    fresh = [n for n in sig.input_names if n not in state_inputs]
    updated = [n[:-len(UPDATED)] for n in sig.output_names if n.endswith(UPDATED)]
    buffers = [n for n in updated if n not in sig.input_names]
    if buffers:
        raise ValidationError(f"the model updates {buffers} in place, which are not inputs: the ONNX model cannot "
                              "carry them from one call to the next",
                              hint="make each state an input and an output of the exported forward")
    streams = _streams(result, sig, fresh, chunks, make_step, steps, batches, chunk_lengths, batch_dim, chunk_dim)
    call = _Caller(result, sig.input_names)
    reference = Float64Reference(model, atol, rtol)
    checks: list[Check] = []
    with exclusive_capture():
        runner = OrtRunner(proto)
        for k, stream in enumerate(streams):
            start = _initial(initial, stream.batch, pairs, sig, result, stream.batch_dim)
            checks += _run_stream(k + 1, stream, start, pairs, fresh, updated, sig, runner, model, call, reference,
                                  atol, rtol)
    return StreamReport(tuple(checks), tuple((f"stream {k + 1}", s.sizes_text, s.why) for k, s in enumerate(streams)),
                        max((s.steps for s in streams), default=0), tuple(pairs))


# ---------------------------------------------------------------- the model's signature and the state pairs


class _Signature:
    """The ONNX model's inputs and outputs: names, element types, dims (int or dim_param or None)."""

    def __init__(self, proto: onnx.ModelProto):
        def dims(v) -> tuple:
            t = v.type.tensor_type
            if not t.HasField("shape"):
                return ()
            return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim)

        g = proto.graph
        initializers = {t.name for t in g.initializer}
        graph_inputs = [v for v in g.input if v.name not in initializers]
        self.input_names = [v.name for v in graph_inputs]
        self.output_names = [v.name for v in g.output]
        self.types = {v.name: v.type.tensor_type.elem_type for v in list(graph_inputs) + list(g.output)}
        self.dims = {v.name: dims(v) for v in list(graph_inputs) + list(g.output)}


def _pairs(states: Any, sig: _Signature) -> list[tuple[str, str]]:
    """``states`` as ``[(output name, input name)]``, each checked against the model."""
    if isinstance(states, dict):
        items = list(states.items())
    elif isinstance(states, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in states):
        items = [tuple(p) for p in states]
    else:
        raise ValidationError(f"states must map each state output to the input it feeds, not {type(states).__name__}",
                              hint=_HINT_STATES)
    if not items:
        raise ValidationError("states is empty: a stream feeds at least one output back", hint=_HINT_STATES)
    pairs = [(_name(o, sig.output_names, "output"), _name(i, sig.input_names, "input")) for o, i in items]
    fed = [i for _, i in pairs]
    twice = sorted({i for i in fed if fed.count(i) > 1})
    if twice:
        raise ValidationError(f"states feed the input(s) {twice} from more than one output",
                              hint="give each state input one output")
    if len(fed) == len(sig.input_names):
        raise ValidationError("every input of the model is a state: a stream needs fresh inputs for each step",
                              hint=f"the inputs are {sig.input_names}")
    for out, inp in pairs:
        if sig.types[out] != sig.types[inp]:
            raise ValidationError(
                f"state output {out!r} is {_dtype(sig.types[out])} but feeds input {inp!r} of {_dtype(sig.types[inp])}",
                hint="pair each output with the input of the same state (check the order of the model's outputs)")
        a, b = sig.dims[out], sig.dims[inp]
        if a and b and (len(a) != len(b) or any(isinstance(x, int) and isinstance(y, int) and x != y
                                                for x, y in zip(a, b))):
            raise ValidationError(
                f"state output {out!r} has shape {_shape(a)} but feeds input {inp!r} of shape {_shape(b)}",
                hint="pair each output with the input of the same state; a cache cut to a fixed length "
                     "(x[:, -16:]) must be declared with that length at the input too")
    return pairs


def _name(key: Any, names: list[str], what: str) -> str:
    if isinstance(key, bool) or not isinstance(key, (int, str)):
        raise ValidationError(f"a state {what} must be named by its ONNX name or position, not {key!r}",
                              hint=_HINT_STATES)
    if isinstance(key, int):
        if not -len(names) <= key < len(names):
            raise ValidationError(f"the model has no {what} at position {key} (it has {len(names)})",
                                  hint=f"the model's {what}s are {names}")
        return names[key]
    if key not in names:
        raise ValidationError(f"the model has no {what} named {key!r}", hint=f"the model's {what}s are {names}")
    return key


def _dtype(elem_type: int) -> str:
    return onnx.TensorProto.DataType.Name(elem_type).lower() if elem_type else "an unknown type"


def _shape(dims: tuple) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


# ---------------------------------------------------------------- the streams: sizes and fresh inputs


@dataclasses.dataclass
class _Stream:
    batch: int | None
    chunk: int | None
    batch_dim: str | None
    sizes_text: str
    why: str
    steps: int
    fresh: Callable[[int], dict]  # step -> {input name: tensor}


def _streams(result, sig, fresh, chunks, make_step, steps, batches, chunk_lengths, batch_dim,
             chunk_dim) -> list[_Stream]:
    """The streams to run: the given chunks, or every pair of batch size and chunk length."""
    if chunks is not None and make_step is not None:
        raise ValidationError("give chunks or make_step, not both", hint="chunks: one stream; make_step: any sizes")
    first = next((n for n in fresh if len(sig.dims[n]) >= 2), fresh[0])
    axes = sig.dims[first]
    batch_dim = batch_dim if batch_dim is not None else (axes[0] if axes and isinstance(axes[0], str) else None)
    chunk_dim = chunk_dim if chunk_dim is not None else (
        axes[1] if len(axes) > 1 and isinstance(axes[1], str) and axes[1] != batch_dim else None)
    if chunks is not None:
        if not chunks:
            raise ValidationError("chunks is empty", hint="give the fresh inputs of each step, [{name: tensor}, ...]")
        given = [_fresh_dict(c, fresh, t) for t, c in enumerate(chunks)]
        batch = _size_of(given[0], sig, batch_dim)
        text = f"{batch_dim}={batch}" if batch_dim and batch is not None else ""
        return [_Stream(batch, None, batch_dim, text, "the given chunks", len(given), lambda t: given[t])]
    examples, ranges = _examples(result)
    if make_step is None and (result is None or result.captured is None):
        raise ValidationError("no fresh inputs to stream: give chunks=[...] or make_step(step, batch, chunk_length)",
                              hint="an ONNX model without its export has no example to make inputs like")
    bs = _sizes("batch", batch_dim, batches, examples, ranges, sig, first, 0, lambda ex, lo: [1 if ex != 1 else 2])
    cs = _sizes("chunk length", chunk_dim, chunk_lengths, examples, ranges, sig, first, 1,
                lambda ex, lo: [ex // 2 if ex // 2 >= max(lo, 2) else ex + 1])
    specs = None
    if make_step is None:
        names = dim_names(result.captured, result.dim_names)
        by_onnx = dict(zip(sig.input_names, specs_from_captured(result.captured, names)))
        specs = [dataclasses.replace(by_onnx[n], name=n) for n in fresh]
    out = []
    for k, (b, c) in enumerate(itertools.product(bs, cs)):
        sizes = {d: v for d, v in ((batch_dim, b), (chunk_dim, c)) if d is not None and v is not None}
        why = "the example's sizes" if all(examples.get(d) == v for d, v in sizes.items()) else "other sizes"
        text = ", ".join(f"{d}={v}" for d, v in sizes.items())
        if make_step is not None:
            def fresh_of(t, b=b, c=c):
                return _fresh_dict(make_step(t, b, c), fresh, t)
        else:
            def fresh_of(t, sizes=sizes, k=k):
                return make_inputs(specs, {**examples, **sizes}, seed=1000 * (k + 1) + t)
        out.append(_Stream(b, c, batch_dim, text, why, steps, fresh_of))
    return out


def _examples(result) -> tuple[dict, dict]:
    if result is None or result.captured is None:
        return {}, {}
    return dim_examples(result.captured, dim_names(result.captured, result.dim_names))


def _sizes(what, dim, given, examples, ranges, sig, first, axis, others) -> list[int | None]:
    """The sizes of one dim the streams run at: ``given``, else the example's and ``others``' within range."""
    fixed = sig.dims[first][axis] if len(sig.dims[first]) > axis else None
    if dim is None:
        if given is not None and list(given) != [fixed]:
            raise ValidationError(f"{what}s {list(given)} given, but the model's {what} is not a named dynamic dim",
                                  hint=f"name it with {'batch_dim' if axis == 0 else 'chunk_dim'}=..., or export "
                                       "it dynamic")
        return [fixed if isinstance(fixed, int) else None]
    if given is not None:
        sizes = [int(v) for v in given]
        lo, hi = ranges.get(dim, (0, 1 << 30))
        outside = [v for v in sizes if not lo <= v <= hi]
        if outside:
            raise ValidationError(f"{what}s {outside} are outside the range [{lo}, {hi}] the export allows for {dim}",
                                  hint=f"choose {dim} within [{lo}, {hi}]")
        return sizes
    ex = examples.get(dim)
    if ex is None:
        raise ValidationError(f"no example size of {dim} to start the {what}s from",
                              hint=f"give {'batches' if axis == 0 else 'chunk_lengths'}=[...]")
    lo, hi = ranges.get(dim, (0, 1 << 30))
    return [ex] + [v for v in others(ex, lo) if lo <= v <= hi and v != ex][:1]


def _fresh_dict(given: Any, fresh: list[str], step: int) -> dict:
    if not isinstance(given, dict):
        raise ValidationError(f"the fresh inputs of step {step} must be a dict {{input name: tensor}}, "
                              f"not {type(given).__name__}", hint=f"the fresh inputs are {fresh}")
    missing, extra = [n for n in fresh if n not in given], sorted(set(given) - set(fresh))
    if missing or extra:
        raise ValidationError(f"the fresh inputs of step {step} miss {missing} and name {extra}" if missing and extra
                              else f"the fresh inputs of step {step} miss {missing}" if missing
                              else f"the fresh inputs of step {step} name {extra}, which are not fresh inputs",
                              hint=f"give exactly the inputs that are not states: {fresh}")
    return {n: given[n] for n in fresh}


def _size_of(feeds: dict, sig: _Signature, dim: str | None) -> int | None:
    for name, t in feeds.items():
        for axis, d in enumerate(sig.dims[name]):
            if d == dim and dim is not None and isinstance(t, torch.Tensor) and axis < t.dim():
                return int(t.shape[axis])
    return None


def _initial(initial, batch, pairs, sig, result, batch_dim) -> dict:
    """The state inputs at step 0 of a stream at ``batch``, checked."""
    inputs = [i for _, i in pairs]
    if callable(initial):
        given = initial(batch)
    elif initial is None:
        if result is None or result.example is None:
            raise ValidationError("no initial state: the model was given without its export",
                                  hint="pass initial={state input: tensor}")
        leaves = [t for t in pytree.tree_leaves(result.example) if isinstance(t, torch.Tensor)]
        given = {n: torch.zeros_like(t) for n, t in zip(sig.input_names, leaves) if n in inputs}
    else:
        given = initial
    if not isinstance(given, dict):
        raise ValidationError(f"initial must give {{state input: tensor}}, not {type(given).__name__}",
                              hint=f"the state inputs are {inputs}")
    missing, extra = [n for n in inputs if n not in given], sorted(set(given) - set(inputs))
    if missing or extra:
        raise ValidationError(f"the initial state misses {missing}" if missing else
                              f"the initial state names {extra}, which are not state inputs",
                              hint=f"give a tensor for each state input: {inputs}")
    out = {}
    for name in inputs:
        t = given[name]
        if not isinstance(t, torch.Tensor):
            raise ValidationError(f"initial state {name!r} is a {type(t).__name__}, not a tensor",
                                  hint="give torch tensors")
        dims = sig.dims[name]
        if dims and t.dim() != len(dims):
            raise ValidationError(f"initial state {name!r} has shape {list(t.shape)}, the input takes {_shape(dims)}",
                                  hint="give it the input's rank")
        for axis, d in enumerate(dims):
            if d == batch_dim and batch is not None and t.shape[axis] != batch:
                t = _rebatched(name, t, axis, batch)
            elif isinstance(d, int) and t.shape[axis] != d:
                raise ValidationError(f"initial state {name!r} has shape {list(t.shape)}, the input takes "
                                      f"{_shape(dims)}", hint=f"give axis {axis} the size {d}")
        out[name] = t
    return out


def _rebatched(name: str, t: torch.Tensor, axis: int, batch: int) -> torch.Tensor:
    """``t`` at another batch size: its rows along ``axis``, all equal, repeated."""
    row = t.narrow(axis, 0, 1)
    if t.shape[axis] == 0 or not bool((t == row).all()):
        raise ValidationError(f"initial state {name!r} is given at batch {t.shape[axis]} with rows that differ, and "
                              f"the stream runs at batch {batch}",
                              hint="give initial as a function of the batch size: initial=lambda batch: {...}")
    return row.expand(*[batch if a == axis else -1 for a in range(t.dim())]).contiguous()


# ---------------------------------------------------------------- one stream


class _Caller:
    """The eager model's arguments from the inputs by ONNX name: in the example's structure (an
    ``ExportResult``), else positional in the ONNX input order."""

    def __init__(self, result, input_names: list[str]):
        self.input_names = input_names
        self.example = result.example if result is not None and result.example is not None else None

    def __call__(self, feeds: dict) -> tuple[tuple, dict]:
        tensors = [feeds[n] for n in self.input_names]
        if self.example is None:
            return tuple(tensors), {}
        flat, spec = pytree.tree_flatten(self.example)
        it = iter(tensors)
        args, kwargs = pytree.tree_unflatten([next(it) if isinstance(x, torch.Tensor) else x for x in flat], spec)
        return tuple(args), dict(kwargs)


class _StepRuns(SetRuns):
    """``SetRuns`` of one step whose float64 reference is the float64 stream's value at that step."""

    def __init__(self, *args, float64_step: tuple | None):
        super().__init__(*args)
        self._step = float64_step

    def float64(self, key: int | str) -> torch.Tensor | None:
        return None if self._step is None or self.reference.reason else _value(self._step, key)


def _run_stream(k, stream, start, pairs, fresh, updated, sig, runner, model, call, reference, atol,
                rtol) -> list[Check]:
    """The checks of one stream: each step run in onnxruntime, eager float32 and eager float64, each
    from its own states; the first step that fails to run ends the stream."""
    users = [n for n in sig.output_names if not n.endswith(UPDATED)]
    onnx_states = dict(start)
    eager_states = {n: t.clone() for n, t in start.items()}
    f64_states = widened((), {n: t.clone() for n, t in start.items()})[1]
    checks = []
    for t in range(stream.steps):
        label = f"stream {k} step {t}"

        def failed(note: str) -> list[Check]:
            return checks + [Check(label, stream.sizes_text, "*", (), float("nan"), float("nan"), False, note,
                                   stream.why)]

        try:
            chunk = stream.fresh(t)
        except ValidationError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's make_step raising is reported with its step
            raise ValidationError(f"make_step failed at step {t}: {type(e).__name__}: {e}",
                                  hint="make_step(step, batch, chunk_length) must return {fresh input: tensor}") from e
        args, kwargs = call({**chunk, **eager_states})
        try:
            expected, after = run_eager(model, False, args, kwargs, sig.input_names, updated)
        except Exception as e:  # noqa: BLE001 - eager failing on the stream is a failed step
            return failed(f"eager PyTorch failed: {type(e).__name__}: {_first(e)}")
        feeds = {**chunk, **onnx_states}
        try:
            got = runner.run([feeds[n] for n in runner.input_names])
        except Exception as e:  # noqa: BLE001 - a runtime failure is a failed step
            return failed(f"onnxruntime failed: {_first(e)}")
        if len(users) != len(expected):
            return failed(f"{len(users)} ONNX outputs for {len(expected)} eager outputs")
        f64 = None
        double = reference.module()
        if double is not None:
            f64_args, f64_kwargs = call({**widened((), dict(chunk))[1], **f64_states})
            try:
                f64 = run_float64(double, False, f64_args, f64_kwargs, sig.input_names, updated)
            except Exception as e:  # noqa: BLE001 - the float64 stream failing leaves the dtype tolerance
                reference.failed(e)
            if f64 is not None and len(f64[0]) != len(expected):
                reference.failed(ValueError(f"{len(f64[0])} outputs for eager float32's {len(expected)}"))
                f64 = None
        runs = _StepRuns(model, reference, False, args, kwargs, sig.input_names, updated, len(expected),
                         float64_step=f64)
        values = {}
        for i, name in enumerate(sig.output_names):
            key = name[:-len(UPDATED)] if name.endswith(UPDATED) else users.index(name)
            e = after.get(key) if isinstance(key, str) else expected[key]
            if e is None:
                return failed(f"{name}: eager PyTorch has no input {key!r} updated")
            verdict = judge(e, got[i], runs, key, False, atol, rtol)
            checks.append(Check(label, stream.sizes_text, name, tuple(e.shape), why=stream.why, **verdict))
            values[name] = (e, got[i], _value(f64, key) if f64 is not None else None)
        for out, inp in pairs:
            e, g, d = values[out]
            _fits(out, inp, e, sig.dims[inp], t)
            onnx_states[inp] = torch.from_numpy(np.ascontiguousarray(g).reshape(g.shape))  # a 0-d state stays 0-d
            eager_states[inp] = e.detach().clone()
            if d is not None:
                f64_states[inp] = d.detach().clone()
    return checks


def _fits(out: str, inp: str, value: torch.Tensor, dims: tuple, step: int) -> None:
    """``ValidationError`` when eager's state output ``value`` cannot feed the input: another rank or
    another size on one of the input's fixed axes."""
    if dims and (value.dim() != len(dims) or any(isinstance(d, int) and d != n for d, n in zip(dims, value.shape))):
        raise ValidationError(f"state output {out!r} is {list(value.shape)} at step {step} (eager PyTorch) but feeds "
                              f"input {inp!r} of shape {_shape(dims)}",
                              hint="pair each output with the input of the same state; a cache cut to a fixed length "
                                   "(x[:, -16:]) must be declared with that length at the input too")


def _value(run: tuple[list, dict], key: int | str) -> torch.Tensor | None:
    """Output ``key`` of an eager run ``(outputs, {updated name: value})``: by position or by name."""
    outputs, after = run
    return after.get(key) if isinstance(key, str) else outputs[key] if key < len(outputs) else None


def _first(e: Exception) -> str:
    return str(e).splitlines()[0][:200] if str(e) else ""
