"""Checks that a model honours the outputs its export config declares.

Three moments: the structure and tensors the eager model returns (``match_outputs``,
``check_tensors``), the dims of the exported ONNX outputs (``check_onnx_dims``), and the sizes of
the outputs over the validation sizes (``check_derived_dims``), after which the derived output dims
get their declared names (``rename_output_dims``). Every failure is a ``ContractError`` that names
what the config declares and what the model gives.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import onnx_ir as ir
import sympy
import torch

from onnxport.config.schema import ExportConfig, TensorDecl
from onnxport.errors import ContractError


def _names_of(returned: Any) -> tuple[list[str | None], list[Any]]:
    """(names, values) of what forward returned: dict keys, or None per position."""
    if isinstance(returned, torch.Tensor):
        return [None], [returned]
    if isinstance(returned, dict):
        return [str(k) for k in returned], list(returned.values())
    if isinstance(returned, (tuple, list)):
        return [None] * len(returned), list(returned)
    if dataclasses.is_dataclass(returned):
        fields = [f.name for f in dataclasses.fields(returned)]
        return fields, [getattr(returned, f) for f in fields]
    raise ContractError(f"the model returns a {type(returned).__name__}; the config declares outputs by name",
                        hint="return a tensor, a tuple of tensors in declared order, "
                             "or a dict keyed by the declared names")


def _missing_extra(missing: list, extra: list) -> str:
    """``"missing [...]; extra (not declared) [...]"``, each part only when non-empty."""
    parts = [f"missing {missing}"] if missing else []
    if extra:
        parts.append(f"extra (not declared) {extra}")
    return "; ".join(parts)


def match_outputs(cfg: ExportConfig, returned: Any) -> list[tuple[str, torch.Tensor]]:
    """Pair the model's returned tensors with the declared outputs.

    A dict (or dataclass) is matched by key, a tuple/list by position (declaration order), a single
    tensor with the one declared output. Returns ``[(declared name, tensor)]`` in the model's
    order (the ONNX output order). Raises ``ContractError`` naming the missing and the extra outputs.
    """
    declared = list(cfg.outputs)
    names, values = _names_of(returned)
    if not declared:
        return [(n if n is not None else ("output" if len(values) == 1 else f"output_{i}"), v)
                for i, (n, v) in enumerate(zip(names, values))]
    if all(n is not None for n in names):
        missing = [d for d in declared if d not in names]
        extra = [n for n in names if n not in cfg.outputs]
        if missing or extra:
            raise ContractError(
                f"the model returns outputs {names} but the config declares {declared}: "
                + _missing_extra(missing, extra),
                hint="declare [outputs.NAME] for each returned key, or change what forward returns")
        pairs = list(zip(names, values))
    else:
        if len(values) != len(declared):
            missing = declared[len(values):]
            extra = [f"output {i}" for i in range(len(declared), len(values))]
            raise ContractError(
                f"the model returns {len(values)} output(s) but the config declares {len(declared)} {declared}: "
                + _missing_extra(missing, extra),
                hint="tuple outputs match the [outputs.*] tables in order; return a dict to match by name")
        pairs = list(zip(declared, values))
    for name, value in pairs:
        if not isinstance(value, torch.Tensor):
            raise ContractError(f"output {name!r}: the config declares a tensor, the model returns a "
                                f"{type(value).__name__}", hint="return tensors only")
    return pairs


def check_tensors(cfg: ExportConfig, pairs: list[tuple[str, torch.Tensor]], sizes: dict[str, int],
                  label: str = "the example") -> dict[str, int]:
    """Check dtype, rank, static dims and input-named dims of eager outputs at ``sizes``.

    Returns the size of every other (derived) output dim name, checked to be the same wherever
    the name appears. Raises ``ContractError`` naming the declared and the actual value.
    """
    derived: dict[str, tuple[int, str]] = {}
    for name, t in pairs:
        decl = cfg.outputs.get(name)
        if decl is None:
            continue
        side = f"output {name!r} on {label}"
        if t.dtype != decl.dtype:
            raise ContractError(f"{side}: the config declares {decl}, the model gives dtype "
                                f"{str(t.dtype).replace('torch.', '')}",
                                hint="fix the dtype in the config or cast in forward")
        if t.dim() != len(decl.dims):
            raise ContractError(f"{side}: the config declares rank {len(decl.dims)} ({decl}), the model gives "
                                f"shape {tuple(t.shape)}", hint="fix the dims in the config")
        for axis, (d, n) in enumerate(zip(decl.dims, t.shape)):
            n = int(n)
            if isinstance(d, int):
                if d != n:
                    raise ContractError(f"{side}: axis {axis} is declared {d} ({decl}), the model gives {n} "
                                        f"(shape {tuple(t.shape)})", hint="fix the static dim in the config")
            elif d in sizes:
                if sizes[d] != n:
                    raise ContractError(
                        f"{side}: axis {axis} is declared {d!r}, the inputs' dim of size {sizes[d]}, "
                        f"but the model gives {n} (shape {tuple(t.shape)})",
                        hint=f"name this axis differently (e.g. out_{d}) if it is derived from {d!r}")
            else:
                seen = derived.get(d)
                if seen is not None and seen[0] != n:
                    raise ContractError(f"{side}: axis {axis} is declared {d!r}, of size {n}, but {d!r} is "
                                        f"{seen[0]} in {seen[1]}", hint="use two dim names for two sizes")
                derived.setdefault(d, (n, f"output {name!r} axis {axis}"))
        _check_lengths_output(cfg, decl, t, pairs, side)
    return {k: v[0] for k, v in derived.items()}


def _check_lengths_output(cfg, decl: TensorDecl, t: torch.Tensor, pairs, side: str) -> None:
    if decl.lengths_of is None or t.numel() == 0:
        return
    ref_name, dim = decl.lengths_of
    ref = dict(pairs).get(ref_name)
    if ref is None:
        return
    limit = int(ref.shape[cfg.outputs[ref_name].dims.index(dim)])
    lo, hi = int(t.min()), int(t.max())
    if lo < 0 or hi > limit:
        raise ContractError(f"{side}: declared lengths of {ref_name}.{dim} (size {limit}), but holds values "
                            f"{lo}..{hi}", hint="lengths must lie between 0 and the size of that axis")


def check_onnx_dims(cfg: ExportConfig, model: ir.Model) -> dict[tuple[str, int], str]:
    """Check the ONNX inputs' and outputs' dims against the declaration.

    Inputs must carry exactly the declared dims. For outputs: a static dim must be that int; a dim
    named like an input dim must carry that dim_param; any other named dim must be dynamic.
    Returns ``{(output, axis): dim_param}`` for the derived dims whose dim_param is not yet the
    declared name. Raises ``ContractError``.
    """
    inputs = set(cfg.input_dims)
    for v in model.graph.inputs:
        decl = cfg.inputs.get(v.name)
        if decl is None:
            continue
        got = [d if isinstance(d, int) else str(d) for d in v.shape]
        if got != list(decl.dims):
            raise ContractError(f"ONNX input {v.name!r} has dims {got}, the config declares {decl.dims}",
                                hint="a declared dim came out static or renamed; check the model's use of it")
    renames: dict[tuple[str, int], str] = {}
    for v in model.graph.outputs:
        decl = cfg.outputs.get(v.name)
        if decl is None:
            continue
        shape = list(v.shape) if v.shape is not None and len(v.shape) == len(decl.dims) else [None] * len(decl.dims)
        for axis, (d, got) in enumerate(zip(decl.dims, shape)):
            side = f"output {v.name!r} axis {axis}"
            if got is None or (isinstance(got, ir.SymbolicDim) and got.value is None):
                renames[(v.name, axis)] = ""  # unknown to shape inference: the eager checks hold
            elif isinstance(d, int):
                if got != d:
                    shown = got if isinstance(got, int) else repr(str(got))
                    raise ContractError(f"{side}: the config declares {d}, the exported model gives {shown}",
                                        hint="a dim that varies with the inputs must be declared by name")
            elif isinstance(got, int):
                raise ContractError(f"{side}: the config declares the dynamic dim {d!r}, the exported model gives "
                                    f"the constant {got}", hint=f"declare it as {got}, or find what fixes its size")
            elif d in inputs:
                if str(got) != d:
                    raise ContractError(f"{side}: the config declares the input dim {d!r}, the exported model gives "
                                        f"{str(got)!r}", hint=f"name this axis differently if it is derived from {d!r}")
            elif str(got) != d:
                renames[(v.name, axis)] = str(got)
    return renames


def evaluate_dim(expr: str, sizes: dict[str, int]) -> int | None:
    """The value of a dim_param expression (``((time - 1)//2 - 1)//2 + 1``, ``floor(time/2)``) at
    ``sizes``; None when it cannot be read."""
    local = {n: sympy.Symbol(n, integer=True, positive=True) for n in sizes}
    local.update({"floor": sympy.floor, "ceiling": sympy.ceiling, "Max": sympy.Max, "Min": sympy.Min,
                  "FloorDiv": lambda a, b: sympy.floor(a / b), "CeilDiv": lambda a, b: sympy.ceiling(a / b),
                  "Mod": sympy.Mod})
    try:
        value = sympy.sympify(expr, locals=local).xreplace({local[n]: v for n, v in sizes.items()})
        value = sympy.nsimplify(value) if not value.is_Integer else value
        return int(value) if value.is_Integer else None
    except Exception:  # noqa: BLE001 - any unreadable expression is reported as such
        return None


def check_derived_dims(cfg: ExportConfig, renames: dict[tuple[str, int], str],
                       runs: list[tuple[str, dict[str, int], dict[str, int]]]) -> dict[str, str]:
    """Check each derived output dim is one consistent function of the input dims.

    ``runs``: ``(label, input sizes, derived sizes from check_tensors)`` for each validation set.
    The ONNX expression of a declared name must give the eager size at every run, one declared name
    must not stand for two expressions, nor two names for one data-dependent size. Returns
    ``{dim_param: declared name}``.
    """
    mapping: dict[str, str] = {}
    by_name: dict[str, str] = {}
    for (output, axis), expr in renames.items():
        name = cfg.outputs[output].dims[axis]
        if not expr or not isinstance(name, str):
            continue
        other = by_name.get(name)
        if other is not None and other != expr:
            checks = [(label, evaluate_dim(other, s), evaluate_dim(expr, s)) for label, s, _ in runs]
            if any(a != b for _, a, b in checks):
                raise ContractError(f"output {output!r} axis {axis} is declared {name!r} but its size {expr!r} "
                                    f"differs from {other!r}, the size of {name!r} elsewhere",
                                    hint="use two dim names for two sizes")
        by_name.setdefault(name, expr)
        known = next((n for e, n in mapping.items() if e == expr and n != name), None)
        if known is not None and runs and evaluate_dim(expr, runs[0][1]) is None:
            raise ContractError(f"output {output!r} axis {axis} is declared {name!r}, but it is the size declared "
                                f"{known!r} elsewhere: one size computed from the model's data ({expr!r})",
                                hint=f"declare both axes {known!r}")
        for label, sizes, derived in runs:
            value = evaluate_dim(expr, sizes)
            eager = derived.get(name)
            if value is not None and eager is not None and value != eager:
                raise ContractError(f"output {output!r} axis {axis} ({name!r}): the exported size {expr} is {value} "
                                    f"on {label}, the model gives {eager}",
                                    hint="the exported shape formula disagrees with the model; report this")
        mapping[expr] = name
    return mapping


def rename_output_dims(model: ir.Model, cfg: ExportConfig, renames: dict[tuple[str, int], str]) -> None:
    """Give the derived output dims their declared names (in place)."""
    for v in model.graph.outputs:
        if v.name not in cfg.outputs:
            continue
        declared = cfg.outputs[v.name].dims
        axes = [axis for axis in range(len(declared)) if (v.name, axis) in renames]
        if not axes:
            continue
        dims = list(v.shape) if v.shape is not None and len(v.shape) == len(declared) else list(declared)
        for axis in axes:
            dims[axis] = declared[axis]
        v.shape = ir.Shape(dims)

