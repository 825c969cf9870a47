"""The config/target door, ``export_target``: build the model a target names, load its checkpoint
(``onnxport.weights``), export it with the inputs a config, ``--input`` declarations or the target's
``example_inputs()`` give, check the config's contract (``config.contract``: names, dims, outputs)
and validate it. ``onnxport export`` and the targets of ``show`` / ``plot`` / ``validate`` call it.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import time
import warnings
from typing import Any, Callable, Iterable

import torch

from onnxport.config import contract
from onnxport.config.declarations import config_from_declarations
from onnxport.config.inputs import default_sizes, dynamic_shapes, input_specs, make_inputs
from onnxport.config.parse import load_config
from onnxport.config.schema import ExportConfig, sizes_text
from onnxport.config.target import build_model, example_call, example_inputs_of
from onnxport.capture.guards import adopted_of
from onnxport.capture.relations import parse_relations
from onnxport.errors import FIRST_LINE_LIMIT, ConfigError, ContractError
from onnxport.export import to_onnx
from onnxport.result import ExportResult
from onnxport.targets import DEFAULT_TARGET, target_runtime
from onnxport.verify import ValidationReport, respecting, validate as run_validation
from onnxport.weights import bind, materialize, open_checkpoint

StepCallback = Callable[[str, float], None]  # (step, seconds), called as each step ends
CheckpointPath = str | os.PathLike | Iterable[str | os.PathLike]  # a file, a folder, an index, or a list of files


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
    required = [n for n, p in params.items()
                if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                and n not in cfg.inputs]
    if required:
        raise ContractError(f"{type(module).__name__}.forward requires {required}, which the config does not declare "
                            f"(it declares {list(cfg.inputs)})", hint="declare an [inputs.NAME] table for each")
    order = [n for n in named if n in tensors] + [n for n in tensors if n not in named]
    return {n: tensors[n] for n in order}


def eager_outputs(module: torch.nn.Module, kwargs: dict, label: str) -> Any:
    """``module(**kwargs)`` without gradients; ``ContractError`` naming ``label`` and the inputs' sizes when
    the model's forward raises on them (declared inputs the model does not take)."""
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


def export_target(target: Any = None, *, config: Any = None, inputs: list[str] | None = None,
                  outputs: list[str] | None = None, dims: list[str] | None = None, model_args: dict | None = None,
                  checkpoint: CheckpointPath | None = None, validate: bool = True, on_step: StepCallback | None = None,
                  opset: int | None = None, inline: bool | None = None, optimize: bool | None = None,
                  strict: bool | None = None, atol: float | None = None, rtol: float | None = None,
                  runtime_target: str | None = None) -> ExportResult:
    """Build the model ``target`` names, load its checkpoint, export it and check it: the door of
    ``onnxport export`` (which only parses its arguments and calls this), and of the targets
    ``onnxport show`` / ``plot`` / ``validate`` export on the fly.

    The inputs come from ``config``, else from ``inputs`` declarations, else from the
    ``example_inputs()`` function of the target's module (``onnxport.config.target``). With a
    config or declarations the ONNX inputs and outputs are named and dimensioned exactly as
    declared and the model is checked to honour them (``check_export``).

    Args:
        target: ``file.py:factory`` or ``module.path:factory`` (the factory may be a class), a
            callable building a ``torch.nn.Module``, or a built module; default: the config's
            ``target``.
        config: an export config: the path of a TOML file, its dict, or an ``ExportConfig``
            (``onnxport.config``).
        inputs: ``--input`` declarations instead of a config (``"x: float32[batch, 16]"``).
        outputs: ``--declare-output`` declarations of the outputs, with ``inputs``.
        dims: ``--dim`` ranges of named dims, with ``inputs`` (``"batch=1:64"``).
        model_args: keyword arguments of the factory, over the config's ``[model]`` table.
        checkpoint: the model's weights, read through ``onnxport.weights``: a ``torch.save`` state
            dict (read with ``weights_only=True, mmap=True``; its ``model`` or ``state_dict``
            entry when it holds several things), a safetensors file, a sharded checkpoint's
            ``*.safetensors.index.json`` (or its folder), or a list of such files. Matched with
            the built model's parameters and buffers by name (``onnxport.weights.bind``; a tensor
            of another floating dtype is cast to the model's) and loaded into it.
        validate: compare onnxruntime with eager PyTorch: at the config's validation sizes, or
            with ``ExportResult.validate`` for a target exported from its ``example_inputs()``.
        on_step: called ``(step, seconds)`` as each step ends: build, the export's steps
            (``onnxport.export.STEPS``), validate.
        opset, inline, optimize, strict: ``to_onnx`` options, over the config's ``[export]``
            (default: the config's, else ``to_onnx``'s).
        atol, rtol: validation tolerances, over the config's ``[validate]``.
        runtime_target: ``to_onnx``'s ``target``, the runtime the model is for (``onnxport.targets``:
            ``"onnxruntime"``, ``"portable"``, ``"openvino"``, ``"genai-cpu"``), over the config's
            ``[export] target`` (default: the config's, else ``"onnxruntime"``); validation runs on its
            runtime.

    Returns:
        the ``ExportResult``, with ``.config`` (None without one) and ``.validation`` (a
        ``ValidationReport``, None when not validated).

    Raises:
        ConfigError: a config and declarations both given, declarations of outputs or dims
            without inputs, no target given, an unreadable or inconsistent config.
        TargetError: the target does not resolve or build; no config, declarations nor
            ``example_inputs()`` give the inputs; ``example_inputs()`` raises or returns neither an
            ``(args, dynamic_shapes)`` pair nor a dict of ``to_onnx`` arguments.
        CheckpointError: the checkpoint cannot be read or does not fit the model.
        ContractError: the model does not honour the declared inputs and outputs.
        And the export's own errors (all ``onnxport.ExportError``).
    """
    report = on_step or (lambda *a: None)
    cfg = _config(config, inputs, outputs, dims)
    if target is None and cfg is not None and cfg.target is not None:
        target = cfg.target
    if target is None:
        if cfg is None or config is None:
            raise ConfigError("no TARGET given",
                              hint="e.g. onnxport export model.py:Net --input \"x: float32[batch, 16]\"")
        raise ConfigError(f"config {cfg.source} names no model", hint="pass a model or set target = \"file.py:build\"")
    runtime_target = runtime_target or (cfg.runtime_target if cfg is not None else None) or DEFAULT_TARGET
    if cfg is None:
        return _export_example(target, model_args, checkpoint, validate, report, opset=opset, inline=inline,
                               optimize=optimize, strict=strict, atol=atol, rtol=rtol, runtime_target=runtime_target)
    given = dict(opset=opset, inline=inline, optimize=optimize, strict=strict, atol=atol, rtol=rtol)
    cfg = dataclasses.replace(cfg, **{k: v for k, v in given.items() if v is not None})
    t0 = time.perf_counter()
    kwargs = {} if isinstance(target, torch.nn.Module) else {**cfg.model_args, **(model_args or {})}
    module = load_weights(build_model(target, kwargs), checkpoint)
    example_sizes = cfg.example_sizes()
    example = _forward_kwargs(module, cfg, make_inputs(cfg, example_sizes, seed=0))
    pairs = contract.match_outputs(cfg, eager_outputs(module, example, "the example"))
    contract.check_tensors(cfg, pairs, example_sizes)
    report("build", time.perf_counter() - t0)

    exported = to_onnx(module, (), example, dynamic_shapes=dynamic_shapes(cfg), input_names=list(example),
                       output_names=[n for n, _ in pairs], opset=cfg.opset, optimize=cfg.optimize,
                       inline=cfg.inline, strict=cfg.strict, relations=cfg.relations or None, on_step=report,
                       target=runtime_target)

    def inputs_at(sizes: dict, seed: int) -> dict:
        return _forward_kwargs(module, cfg, make_inputs(cfg, sizes, seed=seed))

    return check_export(exported, cfg, module, inputs_at, validate=validate, on_step=report)


def _config(config: Any, inputs: list[str] | None, outputs: list[str] | None,
            dims: list[str] | None) -> ExportConfig | None:
    """The checked config ``config`` or the declarations give, None without either."""
    if config is not None and (inputs or outputs or dims):
        raise ConfigError("--config and --input/--declare-output/--dim were both given",
                          hint="declare everything in the config, or use only the command-line declarations")
    if config is not None:
        return load_config(config)
    if not inputs:
        if outputs or dims:
            raise ConfigError("no inputs declared", hint='give --config export.toml or --input "x: float32[batch, 16]"')
        return None
    return load_config(config_from_declarations(list(inputs), list(outputs or []), list(dims or [])))


def _export_example(target: Any, model_args: dict | None, checkpoint: CheckpointPath | None, validate: bool,
                    report: StepCallback, *, opset: int | None, atol: float | None, rtol: float | None,
                    runtime_target: str, **options: Any) -> ExportResult:
    """``export_target`` of a target whose module's ``example_inputs()`` gives the inputs."""
    example, where = example_inputs_of(target)
    t0 = time.perf_counter()
    module = load_weights(build_model(target, model_args or {}), checkpoint)
    call = example_call(example, where, module)
    report("build", time.perf_counter() - t0)
    result = to_onnx(module, call.get("args", ()), call.get("kwargs"), dynamic_shapes=call.get("dynamic_shapes"),
                     relations=call.get("relations"), opset=opset or 20, on_step=report, target=runtime_target,
                     **{k: v for k, v in options.items() if v is not None})
    if not validate:
        return result
    t0 = time.perf_counter()
    validation = result.validate(atol=atol, rtol=rtol)
    report("validate", time.perf_counter() - t0)
    return result.replace(validation=validation)


def load_weights(module: torch.nn.Module, checkpoint: CheckpointPath | None) -> torch.nn.Module:
    """``module`` with the values of ``checkpoint`` (None: as built), read through
    ``onnxport.weights`` (``open_checkpoint``, ``bind`` casting another floating dtype to the
    model's, ``materialize`` into the module itself); returns the module.

    Raises ``CheckpointError`` when the checkpoint cannot be read or does not fit the model (every
    missing, unexpected or mis-shaped name listed).
    """
    if checkpoint is None:
        return module
    return materialize(module, bind(module, open_checkpoint(checkpoint), cast=True), in_place=True)


def export_from_config(config: Any, model: Any = None, checkpoint: Any = None, *, model_args: dict | None = None,
                       validate: bool = True, on_step: StepCallback | None = None, **overrides: Any) -> ExportResult:
    """Deprecated: ``export_target(model, config=config, ...)`` (the same arguments; ``overrides``:
    ``opset``, ``inline``, ``optimize``, ``strict``, ``atol``, ``rtol``). Warns with a
    ``DeprecationWarning``; raises as ``export_target``, and ``TypeError`` for another keyword."""
    warnings.warn("onnxport.export_from_config(config, model) is deprecated: use "
                  "onnxport.export_target(model, config=config, ...)", DeprecationWarning, stacklevel=2)
    for key in overrides:
        if key not in ("opset", "inline", "optimize", "strict", "atol", "rtol"):
            raise TypeError(f"export_from_config got an unexpected keyword argument {key!r}")
    return export_target(model, config=config, checkpoint=checkpoint, model_args=model_args, validate=validate,
                         on_step=on_step, **overrides)


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
        got = contract.match_outputs(cfg, eager_outputs(module, kw, label))
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
                            specs=input_specs(cfg), runtime=target_runtime(result.target))
    texts = {f"inputs {i + 1}": sizes_text(s) for i, (s, _) in enumerate(sets)}
    checks = []
    for c in report.checks:
        if c.inputs in texts:
            c = dataclasses.replace(c, sizes=texts[c.inputs], inputs=c.inputs.replace("inputs", "sizes"),
                                    why="sizes from [validate]" if cfg.sizes_given else "generated sizes")
        elif c.inputs == "example":
            c = dataclasses.replace(c, sizes=sizes_text(example_sizes))
        checks.append(c)
    return ValidationReport(tuple(checks), runtime=report.runtime)
