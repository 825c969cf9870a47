"""Numerics of onnxport's ONNX forms, op family by op family, against torch.onnx and eager PyTorch.

For every family (global average pooling, a squeeze-excitation block, mean, sum, a strided mean,
var, std, vector_norm, logsumexp, cumsum, softmax, log_softmax, layer_norm, batch_norm in eval) on
a long axis (65,536 elements) and on an ordinary size, at normal (``randn``) and large
(``randn * 1000 + 300``) magnitudes: the error of onnxport's model in onnxruntime, of torch.onnx's
(``torch.onnx.export(..., dynamo=True)``, exported in this run) and of eager PyTorch in float32,
each the largest |difference| from eager PyTorch run in float64 over the output's scale (its
largest |value|).

Then the forms side by side, each exported by onnxport: ``onnxport`` (its translation), ``one node``
(one Reduce node over every reduced run, ReduceL2 / ReduceL1 for the norms, GlobalAveragePool for
global average pooling, a float32 CumSum: the forms before the accurate ones) and ``float64`` (the
op computed on the input cast to float64, the result cast back): error at both magnitudes and
onnxruntime latency. Then where one
ReduceSum stops being accurate, by length, contiguous and strided, against the same sum in levels
(``onnxport/translate/ops/_accurate.py``) on static axes and accumulated in float64 on a dynamic one;
and torchvision's
efficientnet_b0 with each global pooling form.

Then the STFT (``torch.stft``, hop 160, Hann window, centred, ``view_as_real``; 4 x 16,000 samples) at
n_fft 320, 400, 512, 1024, 1200 and 2048, both magnitudes: onnxport's model, torch.onnx's and each form
exported by onnxport, ``basis`` (the DFT as a Conv with a precomputed basis), ``STFT`` (ONNX STFT) and
``float64`` (ONNX STFT on the signal cast to float64), errors over eager float32's and latency; and the
front ends at n_fft 400 built on it, torchaudio's ``MelSpectrogram`` (its log) and SpeechBrain's
``Fbank``, when they import.

Latency: onnxruntime on one thread, each model warmed up by 3 runs, the forms' runs alternating,
median (min-max) over ``--runs`` runs, on normal inputs.

    python benchmarks/numerics.py [--runs 20] [--markdown benchmarks/NUMERICS.md]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import logging
import os
import statistics
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import onnx_ir as ir  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from exportcheck import Fn  # noqa: E402
from numerics_blocks import SqueezeExcitation  # noqa: E402
from speech_front_ends import Stft  # noqa: E402
from third_party import import_torchaudio, import_torchvision  # noqa: E402

import onnxport  # noqa: E402
from onnxport.translate.ops import _accurate, fft, misc, reduction  # noqa: E402
from onnxport.translate.registry import override  # noqa: E402

torch.set_num_threads(1)
logging.getLogger("torch.onnx").setLevel(logging.ERROR)
aten = torch.ops.aten
LONG = 65536
F = torch.nn.functional


class InFloat64(torch.nn.Module):
    """``module`` computed on the input cast to float64, its result cast back to float32."""

    def __init__(self, module: torch.nn.Module):
        super().__init__()
        self.inner = copy.deepcopy(module).double()

    def forward(self, x):
        return self.inner(x.double()).float()


def _batch_norm() -> torch.nn.Module:
    bn = torch.nn.BatchNorm2d(16)
    with torch.no_grad():
        bn.running_mean.uniform_(-300, 300)
        bn.running_var.uniform_(1e3, 1e6)
        bn.weight.uniform_(0.5, 2)
        bn.bias.uniform_(-1, 1)
    return bn


@dataclass
class Family:
    name: str
    make: Callable[[], torch.nn.Module]
    long: tuple
    ordinary: tuple
    form: str  # onnxport's form, in words


def _fn(f) -> Callable[[], torch.nn.Module]:
    return lambda: Fn(f)


LEVELS = "in levels of at most 64 beyond"
FAMILIES = [
    Family("global avg pool", _fn(lambda x: F.adaptive_avg_pool2d(x, 1)), (4, 16, 256, 256), (8, 64, 14, 14),
           f"ReduceMean over the plane, not GlobalAveragePool; {LEVELS} 16,384 elements"),
    Family("squeeze-excitation", SqueezeExcitation, (2, 32, 256, 256), (8, 32, 14, 14), "its pooling as above"),
    Family("mean(-1)", _fn(lambda x: x.mean(-1)), (64, LONG), (64, 768), f"ReduceMean; {LEVELS} 16,384"),
    Family("sum(-1)", _fn(lambda x: x.sum(-1)), (64, LONG), (64, 768), f"ReduceSum; {LEVELS} 16,384"),
    Family("mean(0), strided", _fn(lambda x: x.mean(0)), (LONG, 16), (512, 64), f"ReduceMean; {LEVELS} 64 (strided)"),
    Family("var(-1)", _fn(lambda x: x.var(-1)), (64, LONG), (64, 768), f"mean as above, squares {LEVELS} 1,024"),
    Family("std(-1)", _fn(lambda x: x.std(-1)), (64, LONG), (64, 768), "sqrt of var"),
    Family("vector_norm(-1)", _fn(lambda x: torch.linalg.vector_norm(x, dim=-1)), (64, LONG), (64, 768),
           f"Sqrt(ReduceSum(x*x)), not ReduceL2; {LEVELS} 16,384"),
    Family("vector_norm(-1) ord=1", _fn(lambda x: torch.linalg.vector_norm(x, ord=1, dim=-1)), (64, LONG), (64, 768),
           f"ReduceSum(Abs(x)), not ReduceL1; {LEVELS} 16,384"),
    Family("logsumexp(-1)", _fn(lambda x: torch.logsumexp(x, -1)), (64, LONG), (64, 768),
           f"its sum of exponentials {LEVELS} 16,384"),
    Family("cumsum(-1)", _fn(lambda x: x.cumsum(-1)), (4, LONG), (64, 768), "CumSum in float64 (torch's CPU kernel's)"),
    Family("softmax(-1)", _fn(lambda x: x.softmax(-1)), (16, LONG), (64, 768), "Softmax (unchanged)"),
    Family("log_softmax(-1)", _fn(lambda x: x.log_softmax(-1)), (16, LONG), (64, 768), "LogSoftmax (unchanged)"),
    Family("layer_norm", _fn(lambda x: F.layer_norm(x, x.shape[-1:])), (16, LONG), (64, 768),
           "LayerNormalization (unchanged)"),
    Family("batch_norm, eval", _batch_norm, (2, 16, 256, 256), (8, 16, 14, 14), "BatchNormalization (unchanged)"),
]
MAGNITUDES = {"normal": lambda t: t, "large": lambda t: t * 1000 + 300}


# ------------------------------------------------------------------------------ the other forms
def _global_average_pool(ctx, x, output_size):
    """adaptive_avg_pool2d to 1 as ONNX GlobalAveragePool (batched 4-D inputs only)."""
    return ctx.op.GlobalAveragePool(x)


def _reduce_l2_l1(ctx, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """vector_norm of ord 2 and 1 as ONNX ReduceL2 / ReduceL1, other orders as onnxport does."""
    op_type = {2: "ReduceL2", 1: "ReduceL1"}.get(ord)
    if op_type is None:
        return reduction.linalg_vector_norm(ctx, x, ord, dim, keepdim, dtype=dtype)
    return reduction.reduce(ctx, op_type, ctx.cast(x, ctx.out_dtype), dim, keepdim)


@contextlib.contextmanager
def one_node_forms():
    """onnxport's translations with one Reduce node over every reduced run, ReduceL2 / ReduceL1 for
    the norms, GlobalAveragePool and a float32 CumSum: the forms before the accurate ones."""
    saved = dict(misc._CUMSUM_ACCUMULATES_IN)
    misc._CUMSUM_ACCUMULATES_IN[ir.DataType.FLOAT] = ir.DataType.FLOAT
    try:
        with override({aten.adaptive_avg_pool2d.default: _global_average_pool,
                       aten._adaptive_avg_pool2d.default: _global_average_pool,
                       aten.linalg_vector_norm.default: _reduce_l2_l1}), one_reduce_sum():
            yield
    finally:
        misc._CUMSUM_ACCUMULATES_IN.clear()
        misc._CUMSUM_ACCUMULATES_IN.update(saved)


def _one_reduce_sum(ctx, x, dtype, dims, run, contiguous):
    return ctx.op.ReduceSum(x, ctx.const(run), keepdims=1)


@contextlib.contextmanager
def one_reduce_sum():
    """Every reduced run summed by one ReduceSum, static or dynamic (``_accurate``'s limits
    unbounded, its ``_sum_run`` replaced), for the exports inside the block."""
    saved = _accurate._sum_run
    _accurate._sum_run = _one_reduce_sum
    try:
        with limits(2 ** 62, 2 ** 62):
            yield
    finally:
        _accurate._sum_run = saved


@contextlib.contextmanager
def limits(contiguous: int, strided: int):
    """``_accurate``'s limits (a variance's squares: ``contiguous`` too) set for the exports inside
    the block."""
    saved = _accurate.CONTIGUOUS, _accurate.SQUARES, _accurate.STRIDED
    _accurate.CONTIGUOUS, _accurate.SQUARES, _accurate.STRIDED = contiguous, contiguous, strided
    try:
        yield
    finally:
        _accurate.CONTIGUOUS, _accurate.SQUARES, _accurate.STRIDED = saved


# ------------------------------------------------------------------------------ measuring
def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def session(proto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def run(s: ort.InferenceSession, x: torch.Tensor) -> np.ndarray:
    return s.run(None, {s.get_inputs()[0].name: x.numpy()})[0]


def error(got: np.ndarray, reference: np.ndarray) -> float:
    """max |got - reference| / max |reference| (nan where the reference is zero everywhere)."""
    scale = np.abs(reference).max()
    return float(np.abs(got.astype(np.float64) - reference).max() / scale) if scale > 0 else float("nan")


def _failure(e: Exception) -> str:
    return "fails: " + str(e).splitlines()[0].split("NOT_IMPLEMENTED : ")[-1][:70]


def export(model: torch.nn.Module, x: torch.Tensor, dynamic=None) -> ort.InferenceSession | str:
    try:
        return session(_quiet(onnxport.to_onnx, model, (x,), dynamic_shapes=dynamic).model_proto)
    except Exception as e:  # noqa: BLE001 - a form onnxruntime cannot run is reported, not fatal
        return _failure(e)


def export_torch_onnx(model: torch.nn.Module, x: torch.Tensor) -> ort.InferenceSession | str:
    try:
        return session(_quiet(torch.onnx.export, model, (x,), dynamo=True, verbose=False).model_proto)
    except Exception as e:  # noqa: BLE001
        return _failure(e)


def latencies(sessions: dict, feeds: dict, runs: int) -> dict:
    """name -> (median, min, max) milliseconds of ``sessions[name]`` on ``feeds[name]``, after 3
    warm-up runs each, the sessions' runs alternating."""
    live = {k: s for k, s in sessions.items() if not isinstance(s, str)}
    for k, s in live.items():
        for _ in range(3):
            run(s, feeds[k])
    times: dict[str, list[float]] = {k: [] for k in live}
    for _ in range(runs):
        for k, s in live.items():
            start = time.perf_counter()
            run(s, feeds[k])
            times[k].append(1000 * (time.perf_counter() - start))
    return {k: (statistics.median(t), min(t), max(t)) for k, t in times.items()}


def _inputs(shape: tuple) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(shape, generator=gen)
    return {m: f(base) for m, f in MAGNITUDES.items()}


def measure_family(family: Family, runs: int) -> list[dict]:
    """The rows of one family: per size class, the accuracy of onnxport, torch.onnx and eager and
    each form's errors and latency."""
    rows = []
    for size, shape in (("long", family.long), ("ordinary", family.ordinary)):
        torch.manual_seed(0)
        model = family.make().eval()
        inputs = _inputs(shape)
        example = inputs["normal"]
        with one_node_forms():
            plain = export(model, example)
        sessions = {"onnxport": export(model, example), "one node": plain, "float64": export(InFloat64(model), example),
                    "torch.onnx": export_torch_onnx(model, example)}
        row = {"family": family.name, "form": family.form, "size": size, "shape": "x".join(map(str, shape)),
               "errors": {}}
        for magnitude, x in inputs.items():
            with torch.no_grad():
                reference = model.double()(x.double()).numpy()
                row["errors"][("eager", magnitude)] = error(model.float()(x).numpy(), reference)
            for name, s in sessions.items():
                row["errors"][(name, magnitude)] = error(run(s, x), reference) if not isinstance(s, str) else s
        row["latency"] = latencies({k: v for k, v in sessions.items() if k != "torch.onnx"},
                                   {k: example for k in sessions}, runs)
        row["failed"] = {k: v for k, v in sessions.items() if isinstance(v, str)}
        rows.append(row)
        print(f"[numerics] {family.name} {size}, large: onnxport {_e(row['errors'][('onnxport', 'large')])} "
              f"torch.onnx {_e(row['errors'][('torch.onnx', 'large')])} eager {_e(row['errors'][('eager', 'large')])}",
              file=sys.stderr, flush=True)
    return rows


LENGTHS = {  # layout: (fn, shape of a length n, lengths)
    "contiguous": (lambda t: t.sum(-1), lambda n: (max(1, 2 ** 20 // n), n), [1024, 4096, 16384, 65536, 262144]),
    "strided": (lambda t: t.sum(0), lambda n: (n, 16), [16, 64, 256, 1024, 4096, 65536]),
    "var, contiguous": (lambda t: t.var(-1), lambda n: (max(1, 2 ** 20 // n), n), [256, 1024, 4096, 16384]),
}


def measure_lengths(runs: int) -> list[dict]:
    """One ReduceSum against onnxport's accurate form, by the length of the reduced axis: the sum in
    levels on a contiguous axis (``x.sum(-1)``, x of 2^20 elements), a strided one (``x.sum(0)``, 16
    columns) and a variance's squares (``x.var(-1)``), static; and on a dynamic contiguous axis the
    sum accumulated in float64."""
    rows = []
    for layout, (fn, shape_of, lengths) in LENGTHS.items():
        for n in lengths:
            shape = shape_of(n)
            x = _inputs(shape)["large"]
            with torch.no_grad():
                reference = fn(x.double()).numpy()
                eager = error(fn(x).numpy(), reference)
            with one_reduce_sum():
                one = export(Fn(fn), x)
            with limits(1, 1):
                levels = export(Fn(fn), x)
            row = {"layout": layout, "form": "levels", "shape": "x".join(map(str, shape)), "n": n, "eager": eager,
                   "one node": error(run(one, x), reference), "accurate": error(run(levels, x), reference)}
            row["latency"] = latencies({"one node": one, "accurate": levels}, {"one node": x, "accurate": x}, runs)
            rows.append(row)
    # a dynamic axis: accumulated in float64 at every length
    example = _inputs((2, 20000))["large"]
    with one_reduce_sum():
        one = export(Fn(lambda t: t.sum(-1)), example, {"x": {0: "b", 1: "n"}})
    dynamic = export(Fn(lambda t: t.sum(-1)), example, {"x": {0: "b", 1: "n"}})
    for n in (7, 512, 16384, 65536, 100003):
        x = _inputs((max(1, 2 ** 20 // n), n))["large"]
        with torch.no_grad():
            reference = x.double().sum(-1).numpy()
            eager = error(x.sum(-1).numpy(), reference)
        row = {"layout": "dynamic", "form": "float64", "shape": "x".join(map(str, x.shape)), "n": n, "eager": eager,
               "one node": error(run(one, x), reference), "accurate": error(run(dynamic, x), reference)}
        row["latency"] = latencies({"one node": one, "accurate": dynamic}, {"one node": x, "accurate": x}, runs)
        rows.append(row)
    return rows


def measure_efficientnet(runs: int) -> list[dict]:
    """torchvision efficientnet_b0 (random weights, BatchNorm calibrated as in tests/calibrated.py)
    at 224x224, batch 1: onnxport's global pooling against GlobalAveragePool, exported with static
    and with dynamic height and width."""
    if import_torchvision() is None:
        return []
    import calibrated

    model = calibrated.build("efficientnet_b0")
    x = torch.randn((1, 3, 224, 224), generator=torch.Generator().manual_seed(0))
    dynamic = {"x": {0: "batch", 2: "height", 3: "width"}}
    sessions = {"onnxport (ReduceMean), static HxW": export(model, x)}
    with one_node_forms():
        sessions["GlobalAveragePool, static HxW"] = export(model, x)
    sessions["onnxport (axis by axis), dynamic HxW"] = export(model, x, dynamic)
    with one_node_forms():
        sessions["GlobalAveragePool, dynamic HxW"] = export(model, x, dynamic)
    with torch.no_grad():
        reference = copy.deepcopy(model).double()(x.double()).numpy()
        eager = error(model(x).numpy(), reference)
    lat = latencies(sessions, {k: x for k in sessions}, runs)
    return [{"form": k, "error": error(run(s, x), reference), "eager": eager, "latency": lat[k]}
            for k, s in sessions.items()]


# ------------------------------------------------------------------------------ STFT
STFT_SIZES = [320, 400, 512, 1024, 1200, 2048]
STFT_SHAPE = (4, 16000)  # one second at 16 kHz, batch 4
STFT_FORMS = ("basis", "STFT")


class LogMel(torch.nn.Module):
    """torchaudio's MelSpectrogram (n_fft 400, hop 160, 80 mels at 16 kHz), its log."""

    def __init__(self, torchaudio):
        super().__init__()
        self.mel = torchaudio.transforms.MelSpectrogram(16000, n_fft=400, hop_length=160, n_mels=80)

    def forward(self, x):
        return torch.log(self.mel(x) + 1e-6)


@contextlib.contextmanager
def stft_form(form: str):
    """Every float32 STFT exported inside the block in ``form`` ("basis" or "STFT")."""
    saved = fft.stft_form
    fft.stft_form = lambda n_fft, dtype: form if dtype == ir.DataType.FLOAT else saved(n_fft, dtype)
    try:
        yield
    finally:
        fft.stft_form = saved


def _in_float64(model: torch.nn.Module) -> torch.nn.Module:
    """A float64 copy of ``model``, with the float tensors it keeps as plain attributes (SpeechBrain's
    filterbank frequencies) in float64 too."""
    model = copy.deepcopy(model).double()
    for module in model.modules():
        for key, value in vars(module).items():
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                setattr(module, key, value.double())
    return model


class StftInFloat64(torch.nn.Module):
    """``module`` computed on the input cast to float64 (``_in_float64``), its result cast back."""

    def __init__(self, module: torch.nn.Module):
        super().__init__()
        self.inner = _in_float64(module)

    def forward(self, x):
        return self.inner(x.double()).float()


def _front_ends() -> list[tuple[str, int, Callable[[], torch.nn.Module]]]:
    """(name, n_fft, make) of each STFT and front end measured."""
    ends = [(f"stft, n_fft {n}", n, lambda n=n: Stft(n)) for n in STFT_SIZES]
    torchaudio = import_torchaudio()
    if torchaudio is not None:
        ends.append(("torchaudio MelSpectrogram, log", 400, lambda: LogMel(torchaudio)))
        import importlib.util

        if importlib.util.find_spec("speechbrain") is not None:
            from speechbrain.lobes.features import Fbank

            ends.append(("SpeechBrain Fbank", 400, lambda: Fbank(n_fft=400, n_mels=40)))
    return ends


def measure_stft(runs: int) -> list[dict]:
    """Per n_fft (and front end): errors of onnxport's model, torch.onnx's, each form's and eager
    float32's against eager float64 at both magnitudes; latency of the forms and of torch.onnx's."""
    rows = []
    for name, n_fft, make in _front_ends():
        torch.manual_seed(0)
        model = make().eval()
        inputs = _inputs(STFT_SHAPE)
        example = inputs["normal"]
        sessions = {"onnxport": export(model, example)}
        for form in STFT_FORMS:
            with stft_form(form):
                sessions[form] = export(model, example)
        sessions["float64"] = export(StftInFloat64(model), example)
        sessions["torch.onnx"] = export_torch_onnx(model, example)
        row = {"name": name, "form": fft.stft_form(n_fft, ir.DataType.FLOAT), "errors": {}}
        for magnitude, x in inputs.items():
            with torch.no_grad():
                reference = _in_float64(model)(x.double()).numpy()
                row["errors"][("eager", magnitude)] = error(model(x).numpy(), reference)
            for k, s in sessions.items():
                row["errors"][(k, magnitude)] = error(run(s, x), reference) if not isinstance(s, str) else s
        row["latency"] = latencies({k: s for k, s in sessions.items() if k != "onnxport"},
                                   {k: example for k in sessions}, runs)
        rows.append(row)
        print(f"[numerics] {name}: " + ", ".join(
            f"{k} {_ratio(row['errors'][(k, 'normal')], row['errors'][('eager', 'normal')])}x"
            for k in ("onnxport", "torch.onnx", *STFT_FORMS, "float64")) + " eager's error (normal)", file=sys.stderr,
            flush=True)
    return rows


# ------------------------------------------------------------------------------ rendering
def _e(v) -> str:
    return v if isinstance(v, str) else ("-" if v != v else f"{v:.1e}")


def _ratio(a, b) -> str:
    if isinstance(a, str) or isinstance(b, str) or a != a or b != b:
        return "-"
    if b == 0:
        return "1.00" if a == 0 else "inf"
    return f"{a / b:.2f}"


def _ms(t) -> str:
    return f"{t[0]:.3f} ({t[1]:.3f}-{t[2]:.3f})"


def table(head: list[str], lines: list[list[str]]) -> str:
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                     + ["| " + " | ".join(line) + " |" for line in lines]) + "\n"


def _worst(values: list) -> float:
    values = [v for v in values if not isinstance(v, str) and v == v]
    return max(values) if values else float("nan")


def render_summary(rows: list[dict]) -> str:
    """Per family: onnxport's form, its largest error ratio against torch.onnx and eager float32
    over both sizes and magnitudes, and its latency over the one-node form's, long and ordinary."""
    head = ["family", "onnxport's form", "worst / torch.onnx", "worst / eager", "latency / one node, long",
            "ordinary"]
    lines = []
    for family in dict.fromkeys(r["family"] for r in rows):
        mine = [r for r in rows if r["family"] == family]

        def ratios(other):
            return [r["errors"][("onnxport", m)] / r["errors"][(other, m)] for r in mine for m in MAGNITUDES
                    if not isinstance(r["errors"][(other, m)], str) and r["errors"][(other, m)] > 0]

        lat = {r["size"]: r["latency"]["onnxport"][0] / r["latency"]["one node"][0] for r in mine}
        lines.append([family, mine[0]["form"], f"{_worst(ratios('torch.onnx')):.2f}", f"{_worst(ratios('eager')):.2f}",
                      f"{lat['long']:.2f}", f"{lat['ordinary']:.2f}"])
    return table(head, lines)


def render_accuracy(rows: list[dict]) -> str:
    head = ["family", "input", "magnitude", "onnxport", "torch.onnx", "eager f32", "/ torch.onnx", "/ eager"]
    lines = []
    for r in rows:
        for m in MAGNITUDES:
            ours, theirs, eager = (r["errors"][(k, m)] for k in ("onnxport", "torch.onnx", "eager"))
            lines.append([r["family"], f"{r['size']} {r['shape']}", m, _e(ours), _e(theirs), _e(eager),
                          _ratio(ours, theirs), _ratio(ours, eager)])
    return table(head, lines)


def render_forms(rows: list[dict]) -> str:
    head = ["family", "input", "form", "error normal", "error large", "ms (min-max)", "/ one node"]
    lines = []
    for r in rows:
        base = r["latency"].get("one node")
        for form in ("onnxport", "one node", "float64"):
            lat = r["latency"].get(form)
            large = r["errors"][(form, "large")]
            lines.append([r["family"], f"{r['size']} {r['shape']}", form, _e(r["errors"][(form, "normal")]),
                          "-" if isinstance(large, str) else _e(large), _ms(lat) if lat else "-",
                          _ratio(lat[0], base[0]) if lat and base else "-"])
    return table(head, lines)


def render_lengths(rows: list[dict]) -> str:
    head = ["axis", "input", "form", "one node / eager", "form / eager", "one node ms (min-max)", "form ms (min-max)",
            "form / one node"]
    def line(r: dict) -> list[str]:
        one, accurate = r["latency"]["one node"], r["latency"]["accurate"]
        return [r["layout"], r["shape"], r["form"], _ratio(r["one node"], r["eager"]),
                _ratio(r["accurate"], r["eager"]), _ms(one), _ms(accurate), _ratio(accurate[0], one[0])]

    return table(head, [line(r) for r in rows])


def render_efficientnet(rows: list[dict]) -> str:
    if not rows:
        return "torchvision is not installed: not measured.\n"
    base = {r["form"].split(", ")[1]: r["latency"][0] for r in rows if r["form"].startswith("GlobalAveragePool")}
    return table(["global pooling", "error", "eager f32 error", "ms (min-max)", "/ GlobalAveragePool"],
                 [[r["form"], _e(r["error"]), _e(r["eager"]), _ms(r["latency"]),
                   _ratio(r["latency"][0], base[r["form"].split(", ")[1]])] for r in rows])


def render_stft(rows: list[dict]) -> str:
    """Two tables: errors over eager float32's (normal, large) and latency of the forms."""
    forms = (*STFT_FORMS, "float64")
    head = ["input", "onnxport's form", "eager f32 error", "onnxport / eager", "torch.onnx / eager",
            *(f"{k} / eager" for k in forms), "onnxport / torch.onnx"]
    lines, timing = [], []
    for r in rows:
        err = r["errors"]

        def both(k, over="eager"):
            return ", ".join(_ratio(err[(k, m)], err[(over, m)]) for m in MAGNITUDES)

        lines.append([r["name"], r["form"], ", ".join(_e(err[("eager", m)]) for m in MAGNITUDES), both("onnxport"),
                      both("torch.onnx"), *(both(k) for k in forms), both("onnxport", "torch.onnx")])
        lat = r["latency"]
        mine, stft = lat.get(r["form"]), lat.get("STFT")
        timing.append([r["name"], *(_ms(lat[k]) if k in lat else "-" for k in (*forms, "torch.onnx")),
                       _ratio(lat["basis"][0], stft[0]) if "basis" in lat and stft else "-",
                       _ratio(mine[0], lat["torch.onnx"][0]) if mine and "torch.onnx" in lat else "-"])
    failed = sorted({f"{r['name']}: {k} {v}" for r in rows for k in ("torch.onnx", *forms)
                     for v in [r["errors"][(k, "normal")]] if isinstance(v, str)})
    return (table(head, lines) + "".join(f"\n{f}" for f in failed) + ("\n" if failed else "") + "\n"
            + table(["input", *(f"{k} ms (min-max)" for k in (*forms, "torch.onnx")), "basis / STFT",
                     "onnxport / torch.onnx"], timing))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--only", default=None,
                        help="family names separated by ; (stft: the STFT section; a quick look; no markdown)")
    parser.add_argument("--markdown", default=None, help="write the tables as markdown to this path")
    ns = parser.parse_args(argv)
    start, began, load = time.time(), time.monotonic(), os.getloadavg()
    families = [f for f in FAMILIES if ns.only is None or f.name in ns.only.split(";")]
    rows = [row for f in families for row in measure_family(f, ns.runs)]
    stft = measure_stft(ns.runs) if ns.only is None or "stft" in ns.only.split(";") else []
    lengths = measure_lengths(ns.runs) if ns.only is None else []
    efficientnet = measure_efficientnet(ns.runs) if ns.only is None else []
    sections = [("Summary", render_summary(rows)), ("Error against eager float64", render_accuracy(rows)),
                ("Forms", render_forms(rows)),
                ("One ReduceSum or levels, by length", render_lengths(lengths)),
                ("efficientnet_b0, 224x224", render_efficientnet(efficientnet)),
                ("STFT, by n_fft", render_stft(stft))]
    print("\n\n".join(f"{title}\n{body}" for title, body in sections))
    if ns.markdown and ns.only is None:
        end = os.getloadavg()
        Path(ns.markdown).write_text(header(ns, start, (time.monotonic() - began) / 60, load, end) + "\n\n".join(
            f"## {title}\n\n{INTRO[title]}\n\n{body}" for title, body in sections))
    return 0


INTRO = {
    "Summary":
        "Per family, from the tables below: onnxport's form, the largest ratio of its error to torch.onnx's and to "
        "eager float32's over both sizes and both magnitudes (lower is better; at most 1 against torch.onnx: never "
        "farther from float64), and its onnxruntime latency over the one-node form's (the form before the accurate "
        "ones), long and ordinary inputs.",
    "Error against eager float64":
        "Each error is the largest |difference| from eager PyTorch in float64, over the output's scale (its "
        "largest |value|): onnxport's model and torch.onnx's in onnxruntime, and eager PyTorch in float32. Ratios: "
        "onnxport's error over torch.onnx's and over eager float32's; lower is better. Softmax of the large inputs "
        "is one-hot: every form is exact there.",
    "Forms":
        "Each family's ONNX forms, all exported by onnxport: `onnxport` its translation; `one node` one Reduce node "
        "over every reduced run, ReduceL2 / ReduceL1 for the norms, GlobalAveragePool for global average pooling, a "
        "float32 CumSum (the forms before the accurate ones; torch.onnx's too, but for its ReduceMean pooling); "
        "`float64` the op computed on the input cast "
        "to float64, its result cast back. Where a family has no accurate form, `onnxport` is `one node`. Latency on "
        "the normal inputs; `/ one node`: the median over the one-node form's.",
    "One ReduceSum or levels, by length":
        "`x.sum(-1)` over a contiguous axis (x of 2^20 elements), `x.sum(0)` over a strided one (16 columns) and "
        "`x.var(-1)`, the large inputs: one ReduceSum against the sum in levels of at most 64 elements "
        "(`onnxport/translate/ops/_accurate.py`), each error over eager float32's. onnxport sums a contiguous run in "
        "levels beyond 16,384 elements (a variance's squares beyond 1,024) and a strided axis beyond 64. "
        "`dynamic`: one export with the axis dynamic, run at each length: the sum accumulated in float64 (Cast, "
        "ReduceSum, Cast back) whatever the length, against one ReduceSum.",
    "efficientnet_b0, 224x224":
        "torchvision efficientnet_b0 (random weights, BatchNorm calibrated as in `tests/calibrated.py`), batch 1, "
        "normal inputs, whole model: its 17 global poolings as onnxport translates them (static: one ReduceMean "
        "each; dynamic height and width: one ReduceMean per axis of the plane) against GlobalAveragePool.",
    "STFT, by n_fft":
        "`torch.stft` (hop 160, Hann window, centred with reflection, `view_as_real`) of 4 x 16,000 samples, and "
        "the front ends at n_fft 400 built on it (torchaudio's `MelSpectrogram`, its log `log(mel + 1e-6)`, 80 mels; "
        "SpeechBrain's `Fbank`, 40 mels in dB), exported static. Errors against eager float64 as above, each ratio "
        "given for the normal, then the large inputs: onnxport's model, torch.onnx's (ONNX STFT) and each form "
        "exported by onnxport, `basis` (the DFT as one Conv, stride 160, its weights a precomputed `[2 * bins, 1, "
        "n_fft]` cos / -sin basis with the window folded in: `onnxport/translate/ops/fft.py`), `STFT` (ONNX "
        "STFT) and `float64` (ONNX STFT on the signal cast to float64, the result cast back), over eager "
        "float32's error. onnxport's form is chosen per n_fft from these figures (`fft.stft_form`: large "
        "magnitudes first, then speed, never farther from float64 than torch.onnx). Then the latency of each "
        "form and of torch.onnx's model on the normal inputs, median (min-max) ms; `onnxport / torch.onnx` the "
        "chosen form's median over torch.onnx's.",
}


def header(ns, start: float, minutes: float, load: tuple, end: tuple) -> str:
    return (
        "# Numerics of the ONNX forms, op family by op family\n\n"
        f"From one run of `python benchmarks/numerics.py --runs {ns.runs} --markdown {ns.markdown}` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(start))} ({minutes:.1f} min) on a "
        f"machine with {os.cpu_count()} cores (load average {load[0]:.1f} when it started, {end[0]:.1f} when it "
        f"ended): torch {torch.__version__}, onnxruntime {ort.__version__}, onnx-ir {ir.__version__}; onnxport at "
        "opset 20, optimize=True; torch.onnx.export(dynamo=True); one thread for PyTorch and onnxruntime. Every "
        "figure below comes from that run. Inputs: `randn` (normal) and `randn * 1000 + 300` (large), seeded; the "
        "long inputs reduce 65,536 elements per output.\n\n")


if __name__ == "__main__":
    raise SystemExit(main())
