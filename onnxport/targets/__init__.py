"""Runtime targets: rewrites of a finished export toward the runtime that will run it.

``to_onnx(target=...)`` names one of ``TARGETS``:

* ``"onnxruntime"`` (the default): the export as it is; control-flow bodies are local functions
  unless ``inline=True``.
* ``"portable"``: a model any runtime implementing the ONNX standard should load: no local
  functions (``targets.inline``), no Scan or Loop body reading a value of an enclosing graph other
  than an initializer (``targets.outer_scope``: each passed in explicitly), operators of the
  standard domains only (``targets.domains``). ``If`` branches still read their enclosing graph:
  ONNX gives them no inputs.
* ``"openvino"``: portable, plus the forms OpenVINO computes as the ONNX specification says
  (``targets.recurrent_lengths``: an LSTM, GRU or RNN with ``sequence_lens``, which OpenVINO runs
  as if every sequence had the full length, as the operator without lengths per direction, masked
  and read at the lengths, or as a Scan masking each step where an LSTM's cell state is read).
* ``"genai-cpu"``: a decoder with its cache (``export-hf``'s ``text-generation-with-past``) in the
  forms onnxruntime-genai's model builder writes for CPU (``targets.genai_cpu``): attention as
  ``com.microsoft.GroupQueryAttention`` rotating the packed QKV it reads (prompts as onnxruntime-genai
  feeds them: not left-padded), or rotary as ``RotaryEmbedding`` and packed QKV split,
  ``SkipSimplifiedLayerNormalization``, the cache one buffer shared by past and present; each
  fusion that does not match is skipped with its reason (``targets.genai_cpu.genai_fusions``);
  checked against eager at the sizes the operator runs (``Target.check_sizes``) on inputs fed as
  onnxruntime-genai feeds them (``Target.check_inputs``), each output within
  its float64 limit or ``CONTRIB_FACTOR`` times the standard export's distance from float64
  (the contrib kernels round otherwise than the standard operators; ``verify.rewritten``).

A target is a rewrite after the standard export (``stages.retarget`` runs it and checks the
rewritten model against eager PyTorch); the model records its target in its metadata under
``onnxport.target`` (``ExportResult.target``), and ``ExportResult.validate`` runs on the target's
runtime by default (``Target.runtime``).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable

import onnx_ir as ir

from onnxport.errors import RuntimeTargetError
from onnxport.metadata import TARGET_KEY
from onnxport.options import DEFAULT_TARGET

# genai-cpu: the rewritten model may lie this many times as far from float64 as the standard export
# (twice the largest ratio measured on trained decoders; the basis: ``onnxport.verify.rewritten``)
CONTRIB_FACTOR = 8.0


@dataclasses.dataclass(frozen=True)
class Later:
    """A function of a module of ``onnxport.targets`` (``"inline:inline_functions"``), imported when
    first called: ``import onnxport`` (and ``TARGETS``) imports no rewrite."""

    where: str

    def __call__(self, *args: Any) -> Any:
        module, _, name = self.where.partition(":")
        return getattr(importlib.import_module(f"onnxport.targets.{module}"), name)(*args)


@dataclasses.dataclass(frozen=True)
class Target:
    """One runtime target: its name, the runtime ``validate()`` uses by default, and its rewrites
    in order (each ``ir.Model -> None``, in place)."""

    name: str
    runtime: str
    rewrites: tuple[Callable[[ir.Model], None], ...]
    doc: str
    # the sizes of the check against eager for a rewritten model whose runtime form does not run at the example
    check_sizes: Callable[[ir.Model], list[dict] | None] | None = None
    # the input sets of that check, made at those sizes (``(result, sizes) -> [(args, kwargs)]``; None: as any
    # validation makes them)
    check_inputs: Callable[[Any, list[dict]], list] | None = None
    # what the rewrites read of the eager module, recorded in the model first (``(model, module) -> None``)
    prepare: Callable[[ir.Model, Any], None] | None = None
    # how many times as far from float64 as the standard export the rewritten model may lie where it
    # fails its own limits (operators that round otherwise, ``verify.rewritten``); None: its own limits alone
    kernel_factor: float | None = None


inline_functions, pass_outer_values = Later("inline:inline_functions"), Later("outer_scope:pass_outer_values")
check_standard_domains = Later("domains:check_standard_domains")
mask_sequence_lengths = Later("recurrent_lengths:mask_sequence_lengths")
PORTABLE = (inline_functions, pass_outer_values, check_standard_domains)
TARGETS = {t.name: t for t in (
    Target(DEFAULT_TARGET, "onnxruntime", (), "the export as it is (local functions kept)"),
    Target("portable", "onnxruntime", PORTABLE,
           "no local functions, loop bodies reading only their inputs and initializers, standard domains"),
    # the recurrent rewrite makes Scans whose bodies read values of the main graph: the outer values are passed after it
    Target("openvino", "openvino", (inline_functions, mask_sequence_lengths, pass_outer_values, check_standard_domains),
           "portable, and an LSTM/GRU/RNN with sequence lengths masked and read at the lengths"),
    Target("genai-cpu", "onnxruntime", (Later("genai_cpu:rewrite_for_genai_cpu"),),
           "a decoder with its cache in onnxruntime-genai's CPU forms: GroupQueryAttention, RotaryEmbedding, "
           "packed QKV, SkipSimplifiedLayerNormalization, a shared cache buffer",
           check_sizes=Later("genai_cpu:check_sizes"), check_inputs=Later("genai_cpu:check_inputs"),
           prepare=Later("genai_rotary:record_max_positions"),
           kernel_factor=CONTRIB_FACTOR),
)}
TARGET_NAMES = tuple(TARGETS)  # to_onnx's target, a config's [export] target, the CLI's --target


def target(name: str) -> Target:
    """The ``Target`` called ``name``. Raises ``RuntimeTargetError`` for an unknown name."""
    if name not in TARGETS:
        raise RuntimeTargetError(f"target {name!r} is not a runtime target",
                                 hint=f"choose one of {', '.join(TARGET_NAMES)} (default {DEFAULT_TARGET})")
    return TARGETS[name]


def target_runtime(name: str) -> str:
    """The runtime ``validate()`` uses by default for a model of target ``name``."""
    return target(name).runtime


def apply_target(model: ir.Model, name: str) -> ir.Model:
    """``model`` rewritten for the target ``name`` (in place; returned), its name recorded in the
    model's metadata (``onnxport.target``), then sorted, named and checked as ``finalize`` does.

    Raises:
        RuntimeTargetError: an unknown target, a node the target cannot keep (a custom domain under
            ``portable``), or a rewritten model the ONNX checker refuses.
    """
    chosen = target(name)
    if not chosen.rewrites:
        return model
    for rewrite in chosen.rewrites:
        rewrite(model)
    model.metadata_props[TARGET_KEY] = name
    _tidy(model, name)
    return model


def _tidy(model: ir.Model, name: str) -> None:
    import onnx_ir.passes.common as common

    common.RemoveUnusedFunctionsPass()(model)
    common.RemoveUnusedNodesPass()(model)  # and the initializers a rewrite left unread
    common.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0)(model)
    common.LiftSubgraphInitializersToMainGraphPass()(model)
    common.TopologicalSortPass()(model)
    common.NameFixPass()(model)
    common.RemoveUnusedOpsetsPass()(model)
    try:
        common.CheckerPass()(model)
    except Exception as e:  # noqa: BLE001 - onnx.checker's ValidationError (and what wraps it)
        raise RuntimeTargetError(f"the model rewritten for target {name!r} fails the ONNX checker: "
                                 f"{str(e).splitlines()[0][:300]}",
                                 hint="this is an exporter bug: report it with the model; export with "
                                      "target='onnxruntime' meanwhile") from e
