"""Seconds the default ``validate()`` takes per benchmark model, split by kind of input set, and
what its float64 reference costs.

For each model of ``benchmarks/models.py``: export once, then time ``result.validate()`` with its
defaults (the example, the size sets, the value sets; float32 outputs judged against eager PyTorch
run again in float64), the same with tolerances given (``atol=1e-4, rtol=1e-3``: no float64 run,
the ratio of the two is the reference's cost), with the size sets only (``values=[]``) and the
value sets only (``sizes=[]``), each the best of ``--repeat`` runs after one warm-up validation on
the example. Prints one row per model (seconds, input sets compared, float outputs judged against
float64 of all float outputs compared, those that needed eager float32 on inputs moved by one ulp,
whether it passed) and the totals; one torch thread. The machine's load average is printed before
and after (other work on the machine slows every figure).

    python benchmarks/validation_speed.py                     # every model
    python benchmarks/validation_speed.py mlp transformer_encoder --repeat 3
    python benchmarks/validation_speed.py --markdown benchmarks/VALIDATION.md
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import onnxport  # noqa: E402
from models import MODELS  # noqa: E402
from onnxport.verify.report import EXACT, FLOAT64  # noqa: E402


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def measure(name: str, repeat: int) -> dict:
    case = MODELS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        result = onnxport.to_onnx(case.model, case.args, dynamic_shapes=case.dynamic_shapes, **case.onnxport_kwargs)
        export = time.perf_counter() - t0
        result.validate(sizes=[], values=[])  # warm-up: the first onnxruntime session and eager call of the process
        full, report = best(lambda: result.validate(), repeat)
        tolerances, _ = best(lambda: result.validate(atol=1e-4, rtol=1e-3), repeat)
        sizes, _ = best(lambda: result.validate(values=[]), repeat)
        values, _ = best(lambda: result.validate(sizes=[]), repeat)
    sets = len({c.inputs for c in report.checks})
    floats = [c for c in report.checks if not c.rejected and c.basis not in ("", EXACT)]
    judged = [c for c in floats if c.basis == FLOAT64]
    return dict(model=name, export=export, full=full, tolerances=tolerances, sizes=sizes, values=values, sets=sets,
                f64=f"{len(judged)}/{len(floats)}", moved=sum(c.moved for c in judged),
                ok="ok" if report.ok else "FAIL")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", help=f"models to time (default all: {', '.join(MODELS)})")
    p.add_argument("--repeat", type=int, default=1, help="runs per measurement, the best kept")
    p.add_argument("--markdown", type=Path, help="also write the table as Markdown")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    load_before = os.getloadavg()
    rows = []
    head = (f"{'model':22s} {'export s':>9s} {'validate s':>11s} {'no float64':>11s} {'sizes only':>11s} "
            f"{'values only':>12s} {'sets':>5s} {'float64':>8s} {'moved':>6s}  pass")
    print(f"load average before: {load_before[0]:.1f} {load_before[1]:.1f} {load_before[2]:.1f} "
          f"on {os.cpu_count()} cores")
    print(head)
    for name in args.models or list(MODELS):
        try:
            r = measure(name, args.repeat)
        except Exception as e:  # noqa: BLE001 - a model that cannot be built here is listed, not fatal
            print(f"{name:22s} skipped: {type(e).__name__}: {str(e).splitlines()[0][:80]}", flush=True)
            continue
        rows.append(r)
        print(f"{r['model']:22s} {r['export']:9.2f} {r['full']:11.2f} {r['tolerances']:11.2f} {r['sizes']:11.2f} "
              f"{r['values']:12.2f} {r['sets']:5d} {r['f64']:>8s} {r['moved']:6d}  {r['ok']}", flush=True)
    load_after = os.getloadavg()
    print(f"load average after: {load_after[0]:.1f} {load_after[1]:.1f} {load_after[2]:.1f}")
    if not rows:
        return 0
    total = sum(r["full"] for r in rows)
    plain = sum(r["tolerances"] for r in rows)
    summary = (f"{len(rows)} models: default validation (float64 reference) {total:.1f}s in all, "
               f"{total / len(rows):.2f}s per model on average, {max(r['full'] for r in rows):.2f}s at most; "
               f"without the float64 run (tolerances given) {plain:.1f}s in all: the reference costs "
               f"{total / plain:.2f}x")
    print("\n" + summary)
    if args.markdown:
        import datetime

        import onnxruntime

        cores = os.cpu_count() or 1
        busy = (": other work shared the cores, the times are longer than on a quiet machine"
                if max(load_before[0], load_after[0]) > 0.5 * cores else ": a quiet machine")
        lines = ["# Seconds of the default validate() per model\n",
                 f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC by "
                 f"`python benchmarks/validation_speed.py` on {os.cpu_count()} cores, one torch thread; torch "
                 f"{torch.__version__}, onnxruntime {onnxruntime.__version__}. Load average (1, 5, 15 min) "
                 f"{load_before[0]:.1f} / {load_before[1]:.1f} / {load_before[2]:.1f} before the run and "
                 f"{load_after[0]:.1f} / {load_after[1]:.1f} / {load_after[2]:.1f} after it{busy}. {summary}. "
                 f"Each time is the best of {args.repeat} run(s) after one warm-up validation; input sets: the "
                 "example, the size sets and the value sets.\n",
                 "Columns: *validate s*, the default: eager PyTorch in float32 and again in float64 on every set; "
                 "*no float64*, with `atol=1e-4, rtol=1e-3` given (eager in float32 only); *float64*, float "
                 "outputs judged against the float64 reference of all float outputs compared (the others by "
                 "the dtype tolerance, the reason on their row); *moved*, of those, the outputs that also "
                 "needed eager float32 on the inputs moved by one ulp.\n",
                 "| model | export s | validate s (default) | no float64 | size sets only | value sets only | "
                 "input sets | float64 | moved | pass |",
                 "|---|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['model']} | {r['export']:.2f} | {r['full']:.2f} | {r['tolerances']:.2f} | {r['sizes']:.2f} | "
                  f"{r['values']:.2f} | {r['sets']} | {r['f64']} | {r['moved']} | {r['ok']} |" for r in rows]
        args.markdown.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
