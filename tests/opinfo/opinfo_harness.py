"""PyTorch's OpInfo database as export cases: one tiny module per sample, exported, run, compared.

Each OpInfo of ``torch.testing._internal.common_methods_invocations.op_db`` gives, per dtype it
supports (float32, int64), its first samples (``op.sample_inputs``). A sample becomes a module
whose inputs are the sample's tensors (none for a factory such as ``arange``) and whose forward
calls ``op.op(input, *args, **kwargs)`` with the sample's other arguments as constants; Python
numbers it returns are compared as 0-d tensors; a complex result is returned as
``torch.view_as_real`` of it, so the model's inputs and outputs are real (and a bfloat16 one as
float32, which onnxruntime's Python API can return). Outputs that onnxport adds for inputs the op
updates in place (``<name>.updated``) are not compared. The module is exported
(static shapes), run in onnxruntime on the sample and compared with eager PyTorch.

Statuses of one case, and of one op (the worst of its cases, in this order):
    wrong        onnxruntime ran and its result differs from eager PyTorch
    crash        the exporter raised something other than its own error (onnxport: not an
                 ``onnxport.ExportError``), or onnxruntime could not load or run the model
    unsupported  the exporter refused with its own error
    ok           every case matched
    skipped      no case ran (eager PyTorch refused every sample, they were too large or took
                 complex tensors; the CUDA-only jiterator and sparse ops)

Used by ``tests/opinfo/test_opinfo.py`` and ``benchmarks/opinfo_sweep.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import warnings
from typing import Any, Callable, Iterator

import numpy as np
import torch
from torch.utils import _pytree as pytree

import onnxport
from onnxport import verify

DTYPES = {"float32": torch.float32, "int64": torch.int64}
STATUS_ORDER = ["wrong", "crash", "unsupported", "ok", "skipped"]
MAX_NUMEL = 20_000  # samples with more elements than this are left out (time, not meaning)

# ops whose values are uninitialized memory: only dtypes and shapes are compared (as for any model
# that draws random numbers: draws_random)
RANDOM = {"empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided"}

# outputs compared by dtype and shape only: indices of ties, whose choice is PyTorch's
# implementation detail (ONNX TopK takes the lowest index among equal values)
TIE_INDICES = {"topk": (1,), "kthvalue": (1,)}


def op_db() -> list:
    from torch.testing._internal.common_methods_invocations import op_db as db

    return list(db)


def op_id(op) -> str:
    """``name`` or ``name.variant`` (``max.reduction_with_dim``), unique in op_db."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def op_dtypes(op) -> list[str]:
    return [name for name, dt in DTYPES.items() if op.supports_dtype(dt, "cpu")]


@dataclasses.dataclass
class Case:
    """One sample of one op at one dtype, as an exportable module and its tensor inputs."""

    op_id: str
    dtype: str
    index: int
    module: torch.nn.Module
    inputs: tuple
    text: str


@dataclasses.dataclass
class Outcome:
    status: str
    detail: str = ""


def _readable(t: torch.Tensor) -> torch.Tensor:
    """An output onnxruntime's Python API returns: complex as view_as_real, bfloat16 as float32."""
    if t.is_complex():
        return torch.view_as_real(t.resolve_conj())
    return t.float() if t.dtype == torch.bfloat16 else t


class SampleModule(torch.nn.Module):
    """``op(input, *args, **kwargs)`` with the sample's tensors as the module's inputs."""

    def __init__(self, fn: Callable, spec: Any, constants: list, slots: list[int]):
        super().__init__()
        self.fn, self.spec, self.constants, self.slots = fn, spec, constants, slots

    def forward(self, *tensors):
        leaves = list(self.constants)
        for slot, t in zip(self.slots, tensors):
            leaves[slot] = t
        inp, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        out = self.fn(inp, *args, **kwargs)
        return pytree.tree_map_only(torch.Tensor, _readable, out)


def _describe(sample) -> str:
    def one(x):
        if isinstance(x, torch.Tensor):
            return f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}"
        return repr(x)[:40]

    parts = [pytree.tree_map(one, sample.input)] + [pytree.tree_map(one, a) for a in sample.args]
    parts += [f"{k}={pytree.tree_map(one, v)}" for k, v in sample.kwargs.items()]
    return ", ".join(str(p) for p in parts)


def cases(op, dtype: str, max_samples: int = 1) -> Iterator[Case]:
    """The first ``max_samples`` usable samples of ``op`` at ``dtype``: real tensors only, each at
    most ``MAX_NUMEL`` elements, on which eager PyTorch runs.

    The samples are taken before any is yielded and the sample generator is released: some
    generators yield inside ``torch.no_grad()``, and one left suspended there keeps grad mode off
    until the garbage collector closes it, switching grad mode in the middle of whatever runs then.
    Grad mode is restored after."""
    torch.manual_seed(0)
    grad = torch.is_grad_enabled()
    picked: list[Case] = []
    samples = None
    try:
        samples = op.sample_inputs("cpu", DTYPES[dtype], requires_grad=False)
        for index, sample in enumerate(samples):
            if len(picked) >= max_samples:
                break
            case = _case(op, index, sample, dtype)
            if case is not None:
                picked.append(case)
    except Exception:  # noqa: BLE001 - a sample generator failing on this build ends its samples
        pass
    finally:
        samples = None  # the generator finalized here, not by the garbage collector during an export
        torch.set_grad_enabled(grad)
    yield from picked


def _case(op, index: int, sample, dtype: str) -> Case | None:
    """``sample`` as a Case, or None when it has a complex or non-strided tensor, a tensor larger
    than ``MAX_NUMEL`` elements, eager PyTorch refuses it or it returns nothing. A sample without
    tensors (a factory: arange, ones, signal windows) is a module without inputs."""
    leaves, spec = pytree.tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
    tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
    if any(t.is_complex() or t.is_sparse or t.layout != torch.strided for t in tensors):
        return None
    if any(t.numel() > MAX_NUMEL for t in tensors):
        return None
    slots = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    constants = [None if isinstance(x, torch.Tensor) else x for x in leaves]
    module = SampleModule(op.op, spec, constants, slots).eval()
    inputs = tuple(t.detach().clone() for t in tensors)
    try:
        with torch.no_grad():
            if not verify.output_leaves(module(*[t.clone() for t in inputs])):
                return None  # nothing to compare (broadcast_shapes of empty shapes)
    except Exception:  # noqa: BLE001 - eager PyTorch refusing a sample leaves it out
        return None
    return Case(op_id(op), dtype, index, module, inputs, _describe(sample))


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.CRITICAL)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200] if text else ''}"


def _compare(expected: list[torch.Tensor], got: list[np.ndarray], shape_only: bool,
             atol: float | None, rtol: float | None, skip: tuple[int, ...] = ()) -> Outcome:
    if len(got) != len(expected):
        return Outcome("wrong", f"{len(got)} outputs for {len(expected)} in eager")
    for i, (e, g) in enumerate(zip(expected, got)):
        e_np = verify.to_numpy(e)
        if e_np.dtype != g.dtype:
            return Outcome("wrong", f"output {i}: dtype {g.dtype} != {e_np.dtype}")
        if shape_only or i in skip:
            if tuple(e_np.shape) != tuple(g.shape):
                return Outcome("wrong", f"output {i}: shape {tuple(g.shape)} != {tuple(e_np.shape)}")
            continue
        max_abs, _, ok, note = verify.compare(e_np, g, e.dtype, atol, rtol)
        if not ok:
            return Outcome("wrong", f"output {i}: {note or f'max abs error {max_abs:.3g}'}")
    return Outcome("ok")


def _eager(case: Case) -> list[torch.Tensor]:
    """Eager outputs as tensors (a Python number, as ``item`` returns, as the 0-d tensor the
    exported graph gives for it: int64, float64 or bool)."""
    with torch.no_grad():
        return verify.output_leaves(case.module(*[t.clone() for t in case.inputs]))


_RANDOM_ONNX_OPS = {"RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike", "Multinomial",
                    "Bernoulli"}


def draws_random(proto) -> bool:
    """The model draws random numbers (a random operator, or Dropout given a training-mode input),
    in its graph, subgraphs or functions: its values cannot match eager PyTorch's, whose OpInfo
    wrappers may even fix the seed (multi_head_attention_forward with dropout)."""
    graphs = [proto.graph] + [f for f in proto.functions]
    while graphs:
        g = graphs.pop()
        for node in g.node:
            if node.op_type in _RANDOM_ONNX_OPS or (node.op_type == "Dropout" and len(node.input) > 2
                                                     and node.input[2]):
                return True
            graphs += [a.g for a in node.attribute if a.HasField("g")] + [x for a in node.attribute for x in a.graphs]
    return False


def _run_ort(proto, inputs: tuple) -> list[np.ndarray]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 4
    session = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    outputs = [o.name for o in session.get_outputs() if not o.name.endswith(".updated")]
    return session.run(outputs, {n: verify.to_numpy(t) for n, t in zip(names, inputs)})


def run_onnxport(case: Case, *, shape_only: bool = False, atol: float | None = None,
                 rtol: float | None = None, skip: tuple[int, ...] = ()) -> Outcome:
    """Export ``case`` with onnxport.to_onnx, run it in onnxruntime, compare with eager (dtypes and
    shapes only where the model draws random numbers)."""
    expected = _eager(case)
    try:
        with _quiet():
            result = onnxport.to_onnx(case.module, tuple(t.clone() for t in case.inputs))
    except onnxport.ExportError as e:
        return Outcome("unsupported", _first_line(e))
    except Exception as e:  # noqa: BLE001 - anything but an ExportError is a crash
        return Outcome("crash", _first_line(e))
    return _ort_outcome(result.model_proto, case, expected, shape_only, atol, rtol, skip)


def run_torch_onnx(case: Case, *, shape_only: bool = False, atol: float | None = None,
                   rtol: float | None = None, skip: tuple[int, ...] = ()) -> Outcome:
    """Export ``case`` with ``torch.onnx.export(..., dynamo=True)``, run, compare with eager.
    Any error raised by torch.onnx.export is counted as unsupported (it has no crash class)."""
    expected = _eager(case)
    try:
        with _quiet():
            program = torch.onnx.export(case.module, tuple(t.clone() for t in case.inputs), dynamo=True,
                                        opset_version=20, verbose=False)
            proto = program.model_proto
    except Exception as e:  # noqa: BLE001
        return Outcome("unsupported", _first_line(e))
    return _ort_outcome(proto, case, expected, shape_only, atol, rtol, skip)


def _ort_outcome(proto, case: Case, expected, shape_only, atol, rtol, skip=()) -> Outcome:
    shape_only = shape_only or draws_random(proto)
    try:
        got = _run_ort(proto, case.inputs)
    except Exception as e:  # noqa: BLE001 - a model onnxruntime refuses is the exporter's fault
        return Outcome("crash", f"onnxruntime: {_first_line(e)}")
    return _compare(expected, got, shape_only, atol, rtol, skip)


def worst(statuses: list[str]) -> str:
    """The op's status from its cases' statuses (``skipped`` when none ran)."""
    for s in STATUS_ORDER:
        if s in statuses:
            return s
    return "skipped"
