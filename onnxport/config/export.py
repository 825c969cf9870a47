"""``export_from_config``: build, load, check the contract, export, name dims, validate."""

from __future__ import annotations

import dataclasses
import inspect
import time
from typing import Any, Callable

import torch

from onnxport.config import contract
from onnxport.config.checkpoint import load_checkpoint
from onnxport.config.inputs import default_sizes, dynamic_shapes, input_specs, make_inputs
from onnxport.config.parse import load_config
from onnxport.config.schema import ExportConfig, sizes_text
from onnxport.config.target import build_model
from onnxport.capture.guards import adopted_of
from onnxport.capture.relations import parse_relations
from onnxport.errors import FIRST_LINE_LIMIT, ConfigError, ContractError
from onnxport.export import to_onnx
from onnxport.verify import ValidationReport, respecting, validate as run_validation

StepCallback = Callable[[str, float], None]  # (step, seconds), called as each step ends


def _forward_kwargs(module: torch.nn.Module, cfg: ExportConfig, tensors: dict[str, torch.Tensor]) -> dict:
    """The declared inputs as forward() keyword arguments, in forward()'s parameter order."""
    try:
        params = inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return dict(tensors)
    var_kw = any(p.kind == p.VAR_KEYWORD for p in params.values())
    named = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = [n for n in cfg.inputs if n not in named]
    if unknown and not var_kw:
        raise ContractError(f"the config declares input(s) {unknown} but {type(module).__name__}.forward takes "
                            f"({', '.join(named)})", hint="name [inputs.NAME] after forward()'s parameters")
    required = [n for n, p in params.items() if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                and n not in cfg.inputs]
    if required:
        raise ContractError(f"{type(module).__name__}.forward requires {required}, which the config does not declare "
                            f"(it declares {list(cfg.inputs)})", hint="declare an [inputs.NAME] table for each")
    order = [n for n in named if n in tensors] + [n for n in tensors if n not in named]
    return {n: tensors[n] for n in order}


def _eager(module: torch.nn.Module, kwargs: dict, label: str) -> Any:
    try:
        with torch.no_grad():
            return module(**kwargs)
    except Exception as e:  # noqa: BLE001 - the model's forward failed on declared inputs
        sizes = ", ".join(f"{k}: {tuple(v.shape)} {str(v.dtype).replace('torch.', '')}" for k, v in kwargs.items())
        what = f"the model's forward raised on {label}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        with_inputs = f"{what} (inputs {sizes})"  # the inputs on the first line when it stays short, else below
        fits = len(with_inputs) <= FIRST_LINE_LIMIT
        raise ContractError(with_inputs if fits else what, detail=None if fits else f"inputs {sizes}",
                            hint="check the declared dtypes, dims and the [dims] ranges against the model") from e


def export_from_config(config: Any, model: Any = None, checkpoint: Any = None, *,
                       model_args: dict | None = None, validate: bool = True,
                       on_step: StepCallback | None = None, **overrides: Any):
    """Export a model as an export config declares it, and check that it honours the declaration.

    Args:
        config: path of a TOML config, its dict, or an ``ExportConfig`` (see ``onnxport.config``).
        model: a ``torch.nn.Module``, a callable building one, or a target string
            (``pkg.module:build`` / ``file.py:Net``); default: the config's ``target``.
        checkpoint: path of a state dict loaded into the model (``onnxport.config.checkpoint``).
        model_args: keyword arguments of the factory, over the config's ``[model]`` table.
        validate: compare onnxruntime with eager PyTorch on the config's validation sizes.
        on_step: called ``(step, seconds)`` as each step ends: build, the export's steps
            (``onnxport.export.STEPS``), validate.
        overrides: ``opset``, ``inline``, ``optimize``, ``strict``, ``atol``, ``rtol`` over the config.

    Returns the ``ExportResult`` with ONNX inputs/outputs named and dimensioned exactly as
    declared, its ``.config`` and ``.validation`` (a ``ValidationReport``, or None).

    Raises ``ConfigError``, ``ContractError``, ``CheckpointError``, ``TargetError`` and the
    export's own errors (all ``onnxport.ExportError``).
    """
    cfg = load_config(config)
    for key, value in overrides.items():
        if key not in ("opset", "inline", "optimize", "strict", "atol", "rtol"):
            raise TypeError(f"export_from_config got an unexpected keyword argument {key!r}")
        if value is not None:
            setattr(cfg, key, value)
    report = on_step or (lambda *a: None)
    target = model if model is not None else cfg.target
    if target is None:
        raise ConfigError(f"config {cfg.source} names no model", hint="pass a model or set target = \"file.py:build\"")
    t0 = time.perf_counter()
    kwargs = {} if isinstance(target, torch.nn.Module) else {**cfg.model_args, **(model_args or {})}
    module = build_model(target, kwargs)
    if checkpoint is not None:
        load_checkpoint(module, checkpoint)
    example_sizes = cfg.example_sizes()
    example = _forward_kwargs(module, cfg, make_inputs(cfg, example_sizes, seed=0))
    pairs = contract.match_outputs(cfg, _eager(module, example, "the example"))
    contract.check_tensors(cfg, pairs, example_sizes)
    report("build", time.perf_counter() - t0)

    exported = to_onnx(module, (), example, dynamic_shapes=dynamic_shapes(cfg), input_names=list(example),
                       output_names=[n for n, _ in pairs], opset=cfg.opset, optimize=cfg.optimize,
                       inline=cfg.inline, strict=cfg.strict, relations=cfg.relations or None, on_step=report)
    def inputs_at(sizes: dict, seed: int) -> dict:
        return _forward_kwargs(module, cfg, make_inputs(cfg, sizes, seed=seed))

    return check_export(exported, cfg, module, inputs_at, validate=validate, on_step=report)


def check_export(exported, cfg: ExportConfig, module: torch.nn.Module, inputs_at: Callable[[dict, int], dict], *,
                 validate: bool = True, on_step: StepCallback | None = None):
    """Check an export against its config and validate it: the ONNX dims (``contract.check_onnx_dims``),
    the eager outputs at each validation size (``_validation_sizes``), the derived output dims, which
    then get their declared names, and onnxruntime against eager PyTorch.

    ``inputs_at(sizes, seed)``: the keyword arguments of ``module`` at ``sizes``. Returns the result
    with ``.config`` and ``.validation`` (None when ``validate`` is False). Raises ``ContractError``.
    """
    renames = contract.check_onnx_dims(cfg, exported.model)
    t0 = time.perf_counter()
    sets = []
    runs = []
    for i, sizes in enumerate(_validation_sizes(cfg, exported.guards)):
        label = "sizes " + sizes_text(sizes)
        kw = inputs_at(sizes, i + 1)
        got = contract.match_outputs(cfg, _eager(module, kw, label))
        runs.append((label, sizes, contract.check_tensors(cfg, got, sizes, label)))
        sets.append((sizes, kw))
    contract.check_derived_dims(cfg, renames, runs)
    named = exported.model.clone()
    contract.rename_output_dims(named, cfg, renames)
    validation = _validate(exported, cfg, cfg.example_sizes(), sets) if validate else None
    if on_step is not None:
        on_step("validate", time.perf_counter() - t0)
    return exported.replace(model=named, config=cfg, validation=validation)


def _validation_sizes(cfg: ExportConfig, guards: list) -> list[dict[str, int]]:
    """The config's validation sizes: those it lists (each checked against the export's adopted
    constraints), else the generated ones (``config.default_sizes``, the guards' boundaries
    included), moved to the nearest sizes that satisfy the constraints."""
    constraints = adopted_of(guards)
    ranges = {n: (r.min, r.max) for n, r in cfg.dims.items()}
    sets = cfg.sizes if cfg.sizes_given else default_sizes(cfg, guards)
    out = []
    for sizes in sets:
        broken = [str(g) for g in constraints if not g.holds(sizes)]
        if broken and cfg.sizes_given:
            raise ContractError(f"[validate] sizes {sizes_text(sizes)} break the constraint {'; '.join(broken)} the "
                                f"export adopted", hint="list sizes the model takes, or give the dim a range in [dims]")
        moved = respecting(sizes, constraints, ranges, parse_relations(cfg.relations)) if broken else sizes
        if moved is not None and moved not in out and moved != cfg.example_sizes():
            out.append(moved)
    return out


def _validate(result, cfg: ExportConfig, example_sizes: dict, sets: list) -> ValidationReport:
    """``onnxport.verify.validate`` on the example, the generated size sets and, at the example's
    sizes, the other values of the declared inputs (``onnxport.capture.inputs.VALUE_KINDS``);
    sizes in the table."""
    report = run_validation(result, inputs=[((), kw) for _, kw in sets], sizes=[], atol=cfg.atol, rtol=cfg.rtol,
                            specs=input_specs(cfg))
    texts = {f"inputs {i + 1}": sizes_text(s) for i, (s, _) in enumerate(sets)}
    checks = []
    for c in report.checks:
        if c.inputs in texts:
            c = dataclasses.replace(c, sizes=texts[c.inputs], inputs=c.inputs.replace("inputs", "sizes"),
                                    why="sizes from [validate]" if cfg.sizes_given else "generated sizes")
        elif c.inputs == "example":
            c = dataclasses.replace(c, sizes=sizes_text(example_sizes))
        checks.append(c)
    return ValidationReport(tuple(checks))
