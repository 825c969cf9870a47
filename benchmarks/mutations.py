"""Plant known faults one at a time and report which the test suite catches.

Each mutation is a small source change in a temporary copy of the repository (the checkout given by
``--repo``, default this one): a fault of the checker itself (the comparison, the inputs, the
report) or a fault of the exporter that validation exists to catch (an epsilon dropped, branches
inverted, an updated buffer left stale). The tests named for it run on the mutated copy; a failing
run means the suite caught the fault.

    python benchmarks/mutations.py                     # every mutation, a table of caught / missed
    python benchmarks/mutations.py --only nan_one_side --only tol_float32
    python benchmarks/mutations.py --repo /path/to/older/checkout --markdown out.md

The tests of each mutation run once on the unmutated copy first: where they fail already, the
mutation is listed as "baseline fails" instead of counted as caught.

A mutation whose code is absent from the checkout (it predates the code) is listed as "absent":
for a check the checkout does not make at all, the fault is present by construction, so the
suite cannot catch it there.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass
class Mutation:
    name: str
    what: str
    path: str  # file changed, relative to the repository
    edits: list[tuple[str, str]]  # (old, new) alternatives: the first found is applied
    tests: list[str]  # test paths run against the mutated copy (those missing in the checkout skipped)


VERIFY_TESTS = ["tests/verify", "tests/capture/test_inputs.py", "tests/test_result.py", "tests/test_hostile.py"]

MUTATIONS = [
    # ---------------------------------------------------------------- the comparison
    Mutation("dtype_unchecked", "output dtypes not compared (int32 for int64 passes)", "onnxport/verify/compare.py",
             [("    if want is not None and np.dtype(got.dtype) != want:", "    if False:")], VERIFY_TESTS),
    Mutation("nan_one_side", "NaN on one side only accepted", "onnxport/verify/compare.py",
             [("    if (nan_e != nan_g).any():", "    if False:")], VERIFY_TESTS),
    Mutation("int_off_by_one", "integers off by one accepted", "onnxport/verify/compare.py",
             [("return m, m, bool(np.array_equal(expected, got)), \"\"", "return m, m, m <= 1, \"\"")], VERIFY_TESTS),
    Mutation("shape_by_count", "shapes compared by element count", "onnxport/verify/compare.py",
             [("    if tuple(expected.shape) != tuple(got.shape):",
               "    got = got.reshape(expected.shape) if got.size == "
               "expected.size else got\n    if tuple(expected.shape) != tuple(got.shape):")], VERIFY_TESTS),
    Mutation("tol_float32", "float32 tolerance loosened to 1e-2", "onnxport/verify/compare.py",
             [("    torch.float32: (1e-4, 1e-3),", "    torch.float32: (1e-2, 1e-2),")], VERIFY_TESTS),
    Mutation("inf_sign", "infinities of opposite signs accepted", "onnxport/verify/compare.py",
             [("ok = bool(np.all(diff <= atol + rtol * np.abs(e[mask])) and not infinite.any())",
               "ok = bool(np.all(diff <= atol + rtol * np.abs(e[mask])))")], VERIFY_TESTS),
    Mutation("float64_factor_loosened", "float64 bound: 1000x eager float32's distance instead of 8x",
             "onnxport/verify/float64_bound.py", [("K = 8.0  #", "K = 1000.0  #")], VERIFY_TESTS),
    Mutation("float64_floor_loosened", "float64 bound's floor 1e-3 of the output's scale instead of 1e-5",
             "onnxport/verify/float64_bound.py", [("FLOOR = 1e-5  #", "FLOOR = 1e-3  #")], VERIFY_TESTS),
    Mutation("reference_in_float32", "the reference run in float32, not float64", "onnxport/verify/reference.py",
             [("    return run_eager(double.module, fresh, *widened(args, kwargs), input_names, updated)",
               "    return run_eager(double.module.float(), fresh, args, kwargs, input_names, updated)")],
             VERIFY_TESTS),
    Mutation("moved_run_ignored", "eager float32 on inputs moved by one ulp never consulted",
             "onnxport/verify/judge.py",
             [("            if moved is not None and moved.shape == e.shape and moved.dtype == e.dtype:",
               "            if False:")], VERIFY_TESTS),
    Mutation("nonreproducible_reference", "a float64 run eager float32 does not reproduce taken as the reference",
             "onnxport/verify/float64_bound.py",
             [("        return self.scale > 0 and self.eager_ref <= CEILING * self.scale",
               "        return self.scale > 0")], VERIFY_TESTS),
    Mutation("empty_report_ok", "a report with nothing compared counted as ok", "onnxport/verify/report.py",
             [("return bool(compared) and all(c.ok for c in compared)", "return all(c.ok for c in compared)")],
             VERIFY_TESTS),
    # ---------------------------------------------------------------- what is compared, on what
    Mutation("updated_unchecked", "buffer and input updates (.updated) not compared", "onnxport/verify/validate.py",
             [("            if n.endswith(UPDATED):\n                e = after.get(",
               "            if False:\n                e = after.get(")], VERIFY_TESTS),
    Mutation("sizes_mislabelled", "size rows made at the example's sizes", "onnxport/verify/validate.py",
             [("made = inputs_like_example(result.captured, dims, s, seed=i + 1, specs=specs)",
               "made = inputs_like_example(result.captured, dims, examples, seed=i + 1, specs=specs)"),
              ("inputs_like_example(result.captured, dims, s, seed=i + 1)",
               "inputs_like_example(result.captured, dims, examples, seed=i + 1)")], VERIFY_TESTS),
    Mutation("no_value_sets", "no inputs beyond the example's values", "onnxport/verify/validate.py",
             [("    return [k for k in kinds if (k == \"range\" and ints) or (k != \"range\" and floats)]",
               "    return []")], VERIFY_TESTS + ["tests/rewrite/test_branches.py"]),
    Mutation("lengths_past_axis", "lengths may exceed their axis by one", "onnxport/capture/inputs.py",
             [("out = torch.randint(1, max(n, 1) + 1, shape, generator=gen)",
               "out = torch.randint(1, max(n, 1) + 2, shape, generator=gen)")],
             ["tests/capture/test_inputs.py", "tests/verify", "tests/config", "tests/cli/test_export_cli.py"]),
    Mutation("size_estimate_weights_only", "external data chosen by the weights' bytes alone", "onnxport/saving.py",
             [("    return serialized_size(model) > limit",
               "    return sum(v.const_value.nbytes for v in model.graph.initializers.values()) > limit")],
             ["tests/test_saving.py", "tests/test_result.py"]),
    Mutation("no_capture_lock", "exports in several threads not serialized", "onnxport/capture/patches.py",
             [("    with CAPTURE_LOCK:\n        yield\n", "    yield\n")], ["tests/capture/test_patches.py"]),
    # ---------------------------------------------------------------- exporter faults validation must see
    Mutation("layer_norm_no_eps", "fused LayerNorm drops its epsilon", "onnxport/optimize/_norm.py",
             [("return getattr(op, self.op_type)(x, unit, axis=-k, epsilon=scalar(eps))",
               "return getattr(op, self.op_type)(x, unit, axis=-k, epsilon=0.0 if self.op_type == "
               "\"LayerNormalization\" else scalar(eps))")],
             ["tests/optimize/test_fuse_layer_norm.py", "tests/models/test_transformer.py"]),
    Mutation("rms_norm_no_eps", "fused RMSNorm drops its epsilon", "onnxport/optimize/_norm.py",
             [("return getattr(op, self.op_type)(x, unit, axis=-k, epsilon=scalar(eps))",
               "return getattr(op, self.op_type)(x, unit, axis=-k, epsilon=0.0 if self.op_type == "
               "\"RMSNormalization\" else scalar(eps))")],
             ["tests/optimize/test_fuse_rms_norm.py"]),
    Mutation("branch_inverted", "if on a non-bool tensor rewritten with its branches inverted",
             "onnxport/rewrite/branches.py",
             [("p = p if p.dtype == torch.bool else p != 0", "p = p if p.dtype == torch.bool else p == 0")],
             ["tests/rewrite/test_branches.py"]),
    Mutation("stale_buffer", "an updated buffer exported holding its old value", "onnxport/translate/program.py",
             [("        user_out.append(value)\n        out_nodes.append(fx_node)",
               "        user_out.append(next((i for i in initializers if i.name == spec.target), value))\n"
               "        out_nodes.append(fx_node)")], ["tests/test_hostile.py", "tests/verify"]),
    Mutation("specialization_unchecked", "the capture's specialization check made a no-op",
             "onnxport/capture/steps.py",
             [("        request = state.request\n"
               "        by_name = dict(zip(request.names, user_placeholders(state.program)))\n",
               "        return state.but(\"every declared dim stayed symbolic\")\n"
               "        request = state.request\n"
               "        by_name = dict(zip(request.names, user_placeholders(state.program)))\n")],
             ["tests/capture"]),
]


def copy_repo(repo: Path, dest: Path) -> None:
    for part in ("onnxport", "tests", "examples", "pyproject.toml"):
        src = repo / part
        if src.is_dir():
            shutil.copytree(src, dest / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif src.exists():
            shutil.copy2(src, dest / part)


def apply(m: Mutation, root: Path) -> bool:
    path = root / m.path
    if not path.exists():
        return False
    text = path.read_text()
    for old, new in m.edits:
        if old in text:
            path.write_text(text.replace(old, new, 1))
            return True
    return False


def run_tests(root: Path, tests: list[str], workers: int, timeout: int) -> tuple[int, float, str]:
    """(pytest's exit code, seconds, its last output line) of ``tests`` in the copy at ``root``."""
    present = [t for t in tests if (root / t).exists()]
    if not present:
        return 5, 0.0, "no tests"
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *present]
    if workers > 1:
        cmd[4:4] = ["-n", str(workers)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
        code, last = proc.returncode, ((proc.stdout + proc.stderr).strip().splitlines() or [""])[-1]
    except subprocess.TimeoutExpired:
        code, last = -1, "timeout"
    return code, time.perf_counter() - t0, last


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", type=Path, default=ROOT, help="checkout to mutate (default: this one)")
    p.add_argument("--only", action="append", default=[], help="run only these mutations (repeatable)")
    p.add_argument("--workers", type=int, default=2, help="pytest-xdist workers per run (default 2)")
    p.add_argument("--timeout", type=int, default=1800, help="seconds allowed per run")
    p.add_argument("--markdown", type=Path, help="also write the table as Markdown")
    args = p.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    baseline = {}  # tests -> exit code on the unmutated copy: a fault is caught only where they pass
    with tempfile.TemporaryDirectory(prefix="onnxport-baseline-") as tmp:
        copy_repo(args.repo, Path(tmp))
        for tests in dict.fromkeys(tuple(m.tests) for m in chosen):
            for _ in range(2):  # once more when they fail: a busy machine can fail a run (pytest-xdist)
                baseline[tests], seconds, last = run_tests(Path(tmp), list(tests), args.workers, args.timeout)
                if baseline[tests] == 0:
                    break
            state = "pass" if baseline[tests] == 0 else f"FAIL (exit {baseline[tests]}: {last[:80]})"
            print(f"{'(unmutated)':28s} {state:8s} {seconds:6.1f}s  {' '.join(tests)}", flush=True)
    rows = []
    for m in chosen:
        if baseline[tuple(m.tests)] != 0:
            rows.append((m.name, m.what, "baseline fails", 0.0))
            print(f"{m.name:28s} baseline fails: its tests fail without the fault", flush=True)
            continue
        with tempfile.TemporaryDirectory(prefix="onnxport-mutant-") as tmp:
            root = Path(tmp)
            copy_repo(args.repo, root)
            if not apply(m, root):
                rows.append((m.name, m.what, "absent", 0.0))
                print(f"{m.name:28s} absent", flush=True)
                continue
            code, seconds, _ = run_tests(root, m.tests, args.workers, args.timeout)
            if code in (3, 4):  # pytest's internal or usage error, not a failed test: once more
                code, seconds, _ = run_tests(root, m.tests, args.workers, args.timeout)
        # caught: a test failed (1) or the tests could not be collected (2)
        verdict = {0: "MISSED", 1: "caught", 2: "caught", 5: "no tests", -1: "timeout"}.get(code, f"error {code}")
        rows.append((m.name, m.what, verdict, seconds))
        print(f"{m.name:28s} {verdict:8s} {seconds:6.1f}s  {m.what}", flush=True)
    caught = sum(r[2] == "caught" for r in rows)
    print(f"\n{caught} of {len(rows)} mutations caught")
    if args.markdown:
        lines = ["| mutation | fault planted | suite | seconds |", "|---|---|---|---|"]
        lines += [f"| `{n}` | {w} | {v} | {s:.0f} |" for n, w, v, s in rows]
        args.markdown.write_text("\n".join(lines) + f"\n\n{caught} of {len(rows)} caught\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
