"""PyTorch's OpInfo database through onnxport and torch.onnx.export(dynamo=True), in one run.

Per op (float32 and int64 where the op supports them, the first ``--samples`` samples of each):
the status of onnxport and of torch.onnx, each one of ok / wrong / unsupported / crash (see
``tests/opinfo/opinfo_harness.py``), the first failure's message, and totals.

    OMP_NUM_THREADS=1 python benchmarks/opinfo_sweep.py [--samples 1] [--ops abs,fft.fft] [--no-torch-onnx]
        [--jobs 2] [--out sweep.tsv]
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "opinfo"))

import torch  # noqa: E402

import opinfo_harness as h  # noqa: E402

torch.set_num_threads(1)
TIMEOUT = 120  # seconds per exporter and case
CHUNK = 60  # ops per pool of worker processes


def sweep_op(name: str, samples: int, with_torch_onnx: bool) -> tuple[str, str, str, str, str, float]:
    """(op, onnxport status, its first failure, torch.onnx status, its first failure, seconds)."""
    import warnings

    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    op = next(o for o in h.op_db() if h.op_id(o) == name)
    ours, theirs = [], []

    def timeout(*_):
        raise TimeoutError(f"no answer in {TIMEOUT}s")

    signal.signal(signal.SIGALRM, timeout)
    for dtype in h.op_dtypes(op):
        for case in h.cases(op, dtype, samples):
            for outcomes, run in ((ours, h.run_onnxport), (theirs, h.run_torch_onnx if with_torch_onnx else None)):
                if run is None:
                    continue
                signal.alarm(TIMEOUT)
                try:
                    outcomes.append((dtype, run(case, shape_only=name in h.RANDOM, skip=h.TIE_INDICES.get(name, ()))))
                except TimeoutError as e:
                    outcomes.append((dtype, h.Outcome("crash", str(e))))
                finally:
                    signal.alarm(0)

    def summary(outcomes):
        status = h.worst([o.status for _, o in outcomes])
        detail = next((f"{d}: {o.detail}" for d, o in outcomes if o.status == status and o.detail), "")
        return status, detail

    s1, d1 = summary(ours)
    s2, d2 = summary(theirs) if with_torch_onnx else ("-", "")
    return name, s1, d1, s2, d2, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=1, help="samples per op and dtype (default 1)")
    parser.add_argument("--ops", default="", help="comma-separated op ids (default: all of op_db)")
    parser.add_argument("--no-torch-onnx", action="store_true", help="skip torch.onnx.export")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--out", default="", help="also write the table as tab-separated values here")
    args = parser.parse_args()

    names = [h.op_id(o) for o in h.op_db()]
    if args.ops:
        wanted = args.ops.split(",")
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            sys.exit(f"unknown ops: {', '.join(unknown)}")
        names = [n for n in names if n in wanted]
    rows = []
    t0 = time.perf_counter()
    pending = list(names)
    for attempt in range(2):  # a worker that dies (a native crash) breaks its pool: its ops run again once
        failed = []
        context = multiprocessing.get_context("spawn")
        # a fresh pool per chunk of ops keeps the workers' memory bounded
        for start in range(0, len(pending), CHUNK):
            with concurrent.futures.ProcessPoolExecutor(args.jobs, mp_context=context) as pool:
                futures = {pool.submit(sweep_op, n, args.samples, not args.no_torch_onnx): n
                           for n in pending[start:start + CHUNK]}
                for future in concurrent.futures.as_completed(futures):
                    try:
                        rows.append(future.result())
                        print(f"[{len(rows)}/{len(names)}] {rows[-1][0]}: {rows[-1][1]} / {rows[-1][3]}",
                              file=sys.stderr, flush=True)
                    except concurrent.futures.process.BrokenProcessPool:
                        failed.append(futures[future])
        pending = failed
        if not pending:
            break
    rows.sort()
    width = max(len(r[0]) for r in rows)
    lines = [f"{'op':<{width}}  {'onnxport':<11}  {'torch.onnx':<11}  first failure (onnxport | torch.onnx)"]
    for name, s1, d1, s2, d2, _ in rows:
        detail = " | ".join(x for x in (d1[:150], d2[:150]) if x)
        lines.append(f"{name:<{width}}  {s1:<11}  {s2:<11}  {detail}")
    print("\n".join(lines))
    ours = collections.Counter(r[1] for r in rows)
    theirs = collections.Counter(r[3] for r in rows)
    print(f"\n{len(rows)} OpInfo entries, {args.samples} sample(s) per dtype, {time.perf_counter() - t0:.0f}s")
    print(f"{'status':<12} {'onnxport':>9} {'torch.onnx':>11}")
    for s in h.STATUS_ORDER[::-1]:
        print(f"{s:<12} {ours.get(s, 0):>9} {theirs.get(s, 0) if not args.no_torch_onnx else '-':>11}")
    if args.out:
        with open(args.out, "w") as f:
            f.write("op\tonnxport\tonnxport_failure\ttorch_onnx\ttorch_onnx_failure\tseconds\n")
            for r in rows:
                f.write("\t".join(str(x).replace("\t", " ") for x in r[:5]) + f"\t{r[5]:.2f}\n")


if __name__ == "__main__":
    main()
