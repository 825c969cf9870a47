"""Model targets: ``module.path:callable`` and ``path/to/file.py:callable`` resolved to a built
module (``build_model``), and the example a target's module gives (``example_call``).

A target's inputs come from, in order (``onnxport.config.export.export_target``):

1. an export config or ``--input`` declarations (the config's contract checked);
2. otherwise an ``example_inputs()`` function in the factory's module, returning
   ``(args, dynamic_shapes)`` as ``onnxport.to_onnx`` takes them, or a dict with any of ``args``,
   ``kwargs``, ``dynamic_shapes`` and ``relations`` (a Hugging Face call with its cache:
   ``{"kwargs": {"input_ids": ..., "past_key_values": cache, "use_cache": True}, ...}``), or
   ``{"calls": [...]}``: calls of the model at the sizes that vary, from which ``onnxport.observe``
   writes the example, the dynamic shapes and the relations.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import os
import sys
from typing import Any, Callable

import torch

from onnxport.errors import TargetError


def parse_model_args(pairs: list[str]) -> dict[str, Any]:
    """``["depth=4", "name=tiny", "sizes=[1, 2]"]`` -> keyword arguments; values are read as Python
    literals, and kept as strings when they are not one. Raises ``TargetError`` without ``=``."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise TargetError(f"--model-arg {pair!r} is not KEY=VALUE", hint="write e.g. --model-arg depth=4")
        try:
            out[key] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            out[key] = text.strip()
    return out


def _import_file(path: str) -> Any:
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise TargetError(f"model file {path} does not exist", hint="TARGET is path/to/file.py:callable")
    name = "onnxport_target_" + hashlib.sha1(path.encode()).hexdigest()[:10]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, os.path.dirname(path))
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the user's file failed to import
        sys.modules.pop(name, None)
        raise TargetError(f"importing {path} failed: {type(e).__name__}: {e}",
                          hint="run the file with python to see the full error") from e
    finally:
        sys.path.remove(os.path.dirname(path))
    return module


def resolve_target(target: str) -> Callable[..., Any]:
    """The callable named by ``module.path:callable`` or ``path/to/file.py:callable`` (the
    callable may be dotted: ``file.py:Models.build``). Raises ``TargetError``."""
    where, sep, attr = target.rpartition(":")
    if not sep or not where or not attr:
        raise TargetError(f"target {target!r} is not MODULE:CALLABLE or FILE.py:CALLABLE",
                          hint="e.g. mypkg.models:build_conformer or model.py:Net")
    if where.endswith(".py") or os.sep in where or "/" in where:
        module = _import_file(where)
    else:
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())  # as `python -m`: modules of the current directory import
        try:
            module = importlib.import_module(where)
        except ImportError as e:
            raise TargetError(f"cannot import module {where!r}: {e}",
                              hint="install the package or run from the directory that holds it") from e
        except Exception as e:  # noqa: BLE001 - the module raised on import
            raise TargetError(f"importing {where!r} failed: {type(e).__name__}: {e}") from e
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))
            raise TargetError(f"{where} has no attribute {attr!r}",
                              hint=f"callables there: {', '.join(names[:12]) or 'none'}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise TargetError(f"{target} is a {type(obj).__name__}, not a callable")
    return obj


def build_model(target: str | Callable[..., Any] | torch.nn.Module,
                kwargs: dict[str, Any] | None = None) -> torch.nn.Module:
    """Build the model: resolve ``target`` when it is a string, call it with ``kwargs``, and check
    the result is a ``torch.nn.Module`` (returned in eval mode). Raises ``TargetError``."""
    kwargs = dict(kwargs or {})
    if isinstance(target, torch.nn.Module):
        if kwargs:
            raise TargetError(f"model arguments {sorted(kwargs)} were given for an already built module",
                              hint="pass the factory, not the module, to use model arguments")
        return target.eval()
    name = target if isinstance(target, str) else getattr(target, "__qualname__", repr(target))
    factory = resolve_target(target) if isinstance(target, str) else target
    try:
        model = factory(**kwargs)
    except TypeError as e:
        raise TargetError(f"calling {name} with {kwargs or 'no arguments'} failed: {e}",
                          hint="pass its arguments with --model-arg KEY=VALUE or the config's [model] table") from e
    except Exception as e:  # noqa: BLE001 - the user's factory raised
        raise TargetError(f"calling {name} failed: {type(e).__name__}: {e}") from e
    if not isinstance(model, torch.nn.Module):
        raise TargetError(f"{name} returned a {type(model).__name__}, not a torch.nn.Module",
                          hint="TARGET must be a module class or a function returning a module")
    return model.eval()


ONNX_SUFFIXES = (".onnx", ".onnxtxt", ".pb")


def is_onnx_file(spec: str) -> bool:
    """True when ``spec`` names an ONNX file (by suffix, or an existing file that is not Python)."""
    if spec.lower().endswith(ONNX_SUFFIXES):
        return True
    return os.path.isfile(spec) and not spec.endswith(".py")


def example_inputs_of(target: Any) -> tuple[Callable[[], Any], str]:
    """The ``example_inputs`` function of the module defining ``target`` (a target string, a factory,
    or a built module's class) and that module's file, for messages.

    Raises ``TargetError`` (``no inputs declared: ...``) when the module defines none.
    """
    if isinstance(target, str):
        factory: Any = resolve_target(target)
    else:
        factory = type(target) if isinstance(target, torch.nn.Module) else target
    module_obj = sys.modules.get(getattr(factory, "__module__", None) or "", None)
    example = getattr(module_obj, "example_inputs", None)
    where = getattr(module_obj, "__file__", None) or (target.rpartition(":")[0] if isinstance(target, str) else
                                                      getattr(factory, "__module__", "its module"))
    if not callable(example):
        label = target if isinstance(target, str) else getattr(factory, "__qualname__", repr(factory))
        raise TargetError(
            f"no inputs declared: the module of {label} defines no example_inputs(), and no config or --input "
            "declares them",
            hint=f"define example_inputs() in {where} returning (args, dynamic_shapes), "
                 f"or declare inputs with --input \"x: float32[batch, 16]\" or --config export.toml")
    return example, where


def example_call(example: Callable[[], Any], where: str, model: torch.nn.Module) -> dict[str, Any]:
    """What ``example()`` (a target module's ``example_inputs``, defined in ``where``) returns, as
    ``to_onnx`` arguments: a dict with keys among ``args``, ``kwargs``, ``dynamic_shapes`` and
    ``relations``.

    ``{"calls": [call, ...]}`` (each call a dict with ``args`` and/or ``kwargs``, a tuple of
    positional inputs or one tensor) runs ``model`` on each call under ``onnxport.observe``, whose
    example, dynamic shapes and relations are returned (``onnxport.observation``).

    Raises ``TargetError`` when it raises, or returns neither an ``(args, dynamic_shapes)`` pair nor
    such a dict, when a call is of another form, or when the model raises on one.
    """
    try:
        pair = example()
    except Exception as e:  # noqa: BLE001 - the user's function raised
        raise TargetError(f"example_inputs() of {where} failed: {type(e).__name__}: {e}") from e
    keys = {"args", "kwargs", "dynamic_shapes", "relations"}
    if isinstance(pair, dict) and set(pair) == {"calls"}:
        return observed_call(model, pair["calls"], where)
    if isinstance(pair, dict) and pair and set(pair) <= keys:
        return dict(pair)
    if isinstance(pair, tuple) and len(pair) == 2:
        return {"args": pair[0], "dynamic_shapes": pair[1]}
    raise TargetError(f"example_inputs() of {where} returned a {type(pair).__name__}, not (args, dynamic_shapes) "
                      f"nor a dict with keys among {sorted(keys)} or 'calls'",
                      hint="return a pair, e.g. ((torch.randn(2, 16),), {'x': {0: 'batch'}}), or "
                           "{'calls': [(torch.randn(2, 16),), (torch.randn(3, 16),)]}")


def observed_call(model: torch.nn.Module, calls: Any, where: str) -> dict[str, Any]:
    """``to_onnx`` arguments from calls of ``model`` (``example_call``'s ``calls``), observed in
    order under ``torch.no_grad()``. Raises ``TargetError`` for a call of another form or one the
    model raises on."""
    from onnxport.observation import observe

    if not isinstance(calls, (list, tuple)) or not calls:
        raise TargetError(f"example_inputs() of {where}: 'calls' must be a non-empty list of calls",
                          hint="e.g. {'calls': [(torch.randn(2, 16),), (torch.randn(3, 16),)]}")
    with torch.no_grad(), observe(model) as seen:
        for i, call in enumerate(calls):
            if isinstance(call, dict) and call and set(call) <= {"args", "kwargs"}:
                args, kwargs = call.get("args", ()), call.get("kwargs") or {}
            elif isinstance(call, (tuple, torch.Tensor)):
                args, kwargs = call, {}
            else:
                raise TargetError(f"example_inputs() of {where}: call {i} is a {type(call).__name__}, not a tuple of "
                                  "inputs, a tensor or a dict with 'args' and/or 'kwargs'",
                                  hint="e.g. {'kwargs': {'input_ids': ids, 'attention_mask': mask}}")
            args = (args,) if isinstance(args, torch.Tensor) else tuple(args)
            try:
                model(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - the user's model raised
                raise TargetError(f"the model raised on call {i} of example_inputs() of {where}: "
                                  f"{type(e).__name__}: {e}", hint="give calls the model runs eagerly") from e
    return seen.arguments
