"""The check of a model rewritten for a runtime target against eager PyTorch (``stages.retarget``).

The rewritten model is validated as any export is: each float32 output against eager PyTorch in
float64, within ``K * eager-f64 + FLOOR`` of the scale (``verify.float64_bound``). A target whose
rewrites put operators of another rounding in the graph (``Target.kernel_factor``: genai-cpu's
onnxruntime contrib kernels) may leave a right model beyond that bound, where the standard export
was within it: the contrib kernels round differently from the standard operators they replace, and
a trained decoder carries that rounding to its logits. Where the rewritten model fails the check,
the standard export is validated on the same input sets, and each float32 output judged against the
float64 reference passes when it is within the larger of its own limit and ``kernel_factor`` times
the standard export's distance from float64 (at most ``CEILING`` of the scale): the rewrite may round
as much more than the standard operators as the factor says, never more.

Basis of genai-cpu's factor (``onnxport.targets.CONTRIB_FACTOR``), measured on decoders trained on a repeated pattern
(``benchmarks/genai_int4.py``'s Qwen2 and a Llama of its shape, 8 layers, hidden 256, trained 20 to
100 seeded steps; 7 models), at the check's sizes, each fusion applied alone: only
``SkipSimplifiedLayerNormalization`` moves the logits further from float64 than the standard export
(a Qwen2 trained 52 steps, batch 2, 3 new tokens, no past: 2.65e-5 of the scale against the standard
export's 1.12e-5, a limit of 2.43e-5); ``GroupQueryAttention``, ``RotaryEmbedding`` and the packed
projections leave it as it was. On one norm alone (hidden 256) onnxruntime's kernel lies 1.1 ulp
from float64 on average and 3.1e-7 of the scale at most, the standard nodes (``Pow``, ``ReduceMean``,
``Sqrt``, ``Reciprocal``, ``Mul``) 0.69 ulp and 1.6e-7: its float32 rounding, not its semantics. The
fully rewritten decoders lie within 2.4 times the standard export's distance where it is large
(1e-6 of the scale and more), and within 4.1 times where it is a few ulps; the factor is twice
that. A wrong rewrite lies orders of magnitude beyond it (on a tiny Qwen2, a rotary turned
the wrong way: 3e4 times the standard export's distance; keys and values swapped: 1e6 times;
``tests/targets/test_genai_cpu_check.py``).
"""

from __future__ import annotations

import dataclasses
import math

from onnxport.verify.float64_bound import CEILING
from onnxport.verify.report import FLOAT64, Check, ValidationReport


def check_rewritten(standard, rewritten, sizes: list[dict] | None, kernel_factor: float | None) -> ValidationReport:
    """The validation of ``rewritten`` (an ``ExportResult`` of the target's model) against eager PyTorch
    at ``sizes`` (None: the example) on the target's runtime (``Target.runtime``, onnxruntime where
    that is OpenVINO and it is not installed; the standard export on the same), the inputs made at
    those sizes by the target's ``check_inputs`` where it has one (as its runtime feeds the model),
    judged as the module docstring says.

    Args:
        standard: the ``ExportResult`` of the standard export, the model before the rewrite
            (validated only where ``rewritten`` fails and ``kernel_factor`` is given).
        rewritten: the ``ExportResult`` of the rewritten model.
        sizes: size assignments of the check (``Target.check_sizes``), or None for the example.
        kernel_factor: how many times as far from float64 as the standard export the rewritten
            model may lie (``Target.kernel_factor``), or None: its own limits alone.

    Returns the ``ValidationReport`` (``.ok``); rows whose limit the standard export widened say so
    in their note. Raises ``ValidationError`` where the check cannot run.
    """
    from onnxport.targets import target
    from onnxport.verify.runtimes import openvino_available
    from onnxport.verify.validate import validate

    chosen = target(rewritten.target)
    # both models on the runtime of the target; where that runtime is not installed (OpenVINO, an optional
    # extra), on onnxruntime: the rewrite's semantics are ONNX's, and validate() on the target's runtime says
    # how to install it
    runtime = chosen.runtime if chosen.runtime != "openvino" or openvino_available() else "onnxruntime"
    # the sets fed as the target's runtime feeds the model (Target.check_inputs), the same for both models
    inputs = chosen.check_inputs(rewritten, sizes) if sizes and chosen.check_inputs is not None else []

    def run(result) -> ValidationReport:
        return validate(result, inputs=inputs, sizes=[] if inputs else sizes or [], values=[], runtime=runtime,
                        include_example=sizes is None, explain=False)

    report = run(rewritten)
    if report.ok or kernel_factor is None:
        return report
    return widened(report, run(standard), kernel_factor)


def widened(report: ValidationReport, standard: ValidationReport, factor: float) -> ValidationReport:
    """``report`` with each output judged against float64 (``Check.basis`` ``FLOAT64``) re-judged
    within ``max(its limit, factor * the standard export's ONNX-f64)``, at most ``CEILING``; the
    standard's row is the one of the same input set and output (the same inputs: validation makes
    them from the sizes alone). Other rows (exact, dtype tolerance, a NaN where eager has none) stand."""
    base = {(c.inputs, c.output): c for c in standard.checks}

    def rejudge(c: Check) -> Check:
        s = base.get((c.inputs, c.output))
        if c.basis != FLOAT64 or s is None or s.basis != FLOAT64 or math.isnan(c.onnx_vs_float64):
            return c
        limit = min(factor * s.onnx_vs_float64, CEILING)
        if limit <= c.limit:
            return c
        note = (f"limit {factor:g} x the standard export's ONNX-f64 {s.onnx_vs_float64:.1e} "
                "(onnxruntime contrib kernels round otherwise than the standard operators)")
        return dataclasses.replace(c, limit=limit, ok=c.onnx_vs_float64 <= limit, note=c.note or note)

    return dataclasses.replace(report, checks=tuple(rejudge(c) for c in report.checks))
