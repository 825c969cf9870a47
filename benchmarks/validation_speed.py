"""Seconds the default ``validate()`` takes per benchmark model, split by kind of input set.

For each model of ``benchmarks/models.py``: export once, then time ``result.validate()`` with its
defaults (the example, the size sets, the value sets), and the same with the size sets only
(``values=[]``) and the value sets only (``sizes=[]``), each the best of ``--repeat`` runs after one
warm-up validation on the example. Prints one row per model (seconds, input sets compared,
whether it passed) and the totals; one torch thread.

    python benchmarks/validation_speed.py                     # every model
    python benchmarks/validation_speed.py mlp transformer_encoder --repeat 3
    python benchmarks/validation_speed.py --markdown benchmarks/VALIDATION.md
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import onnxport  # noqa: E402
from models import MODELS  # noqa: E402


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
        sizes, _ = best(lambda: result.validate(values=[]), repeat)
        values, _ = best(lambda: result.validate(sizes=[]), repeat)
    sets = len({c.inputs for c in report.checks})
    return dict(model=name, export=export, full=full, sizes=sizes, values=values, sets=sets,
                ok="ok" if report.ok else "FAIL")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", help=f"models to time (default all: {', '.join(MODELS)})")
    p.add_argument("--repeat", type=int, default=1, help="runs per measurement, the best kept")
    p.add_argument("--markdown", type=Path, help="also write the table as Markdown")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    head = f"{'model':22s} {'export s':>9s} {'validate s':>11s} {'sizes only':>11s} {'values only':>12s} {'sets':>5s}  pass"
    print(head)
    for name in args.models or list(MODELS):
        try:
            r = measure(name, args.repeat)
        except Exception as e:  # noqa: BLE001 - a model that cannot be built here is listed, not fatal
            print(f"{name:22s} skipped: {type(e).__name__}: {str(e).splitlines()[0][:80]}", flush=True)
            continue
        rows.append(r)
        print(f"{r['model']:22s} {r['export']:9.2f} {r['full']:11.2f} {r['sizes']:11.2f} {r['values']:12.2f} "
              f"{r['sets']:5d}  {r['ok']}", flush=True)
    if rows:
        total = sum(r["full"] for r in rows)
        print(f"\n{len(rows)} models: default validation {total:.1f}s in all, {total / len(rows):.2f}s per model on "
              f"average, {max(r['full'] for r in rows):.2f}s at most")
    if args.markdown and rows:
        import datetime
        import os

        import onnxruntime

        total = sum(r["full"] for r in rows)
        lines = ["# Seconds of the default validate() per model\n",
                 f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC by "
                 f"`python benchmarks/validation_speed.py` on {os.cpu_count()} cores, one torch thread; torch "
                 f"{torch.__version__}, onnxruntime {onnxruntime.__version__}. {len(rows)} models: "
                 f"{total:.1f}s of default validation in all, {total / len(rows):.2f}s per model on average, "
                 f"{max(r['full'] for r in rows):.2f}s at most. Each time is the best of {args.repeat} run(s) "
                 "after one warm-up validation; input sets: the example, the size sets and the value sets.\n",
                 "| model | export s | validate s (default) | size sets only | value sets only | input sets | pass |",
                 "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['model']} | {r['export']:.2f} | {r['full']:.2f} | {r['sizes']:.2f} | {r['values']:.2f} | "
                  f"{r['sets']} | {r['ok']} |" for r in rows]
        args.markdown.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
