"""Tiny models of every architecture transformers ships, and the probe that finds the first one that
runs in eager on generic inputs (``hf_inputs.py``).

``attempts``: each model type is tried under ``hf_rules.ATTEMPTS``, smallest first (``tiny``,
``shallow``, ``narrow``), its config made by ``hf_config.make_config`` (generic rules on the config
class's constructor: ``hf_rules.py``, ``hf_widths.py``); a config with more than ``MAX_PARAMETERS``
parameters (counted on the meta device) is not built; an attribute the model reads that its config
lacks (a sub-config split from its parent) set: from a sub-config holding it, else by its name
(dropout 0, ``rope_theta``...: ``instantiate``).

``build(model_type, attempt)`` makes the base model (``hf_classes.model_class``: ``AutoModel``'s class
for the type, else a part built from its config alone: SAM's mask decoder, or from its whole model's:
SAM's prompt encoder; token ids it keeps beyond the tiny vocabulary moved to its end; a VQ-VAE
without a forward run as its encoder; seeded; its weights fixed where the initialization leaves eager
undefined or degenerate: ``hf_weights.py``);
``probe`` finds the first attempt whose model runs in eager on one of its input sets
(``hf_inputs.candidates``, the forward's required parameters filled where a maker knows them) and
which dims eager also runs at another size: batch always tried, the text length, the decoder's
length, the image size, the audio length each kept dynamic only where eager runs at another size.
"""

from __future__ import annotations

import contextlib
import inspect
import re
from typing import Any

import torch

import hf_inputs
from hf_classes import model_class, with_parent
from hf_config import make_config
from hf_inputs import Inputs, candidates
from hf_rules import ATTEMPTS, _value
from hf_weights import fix_weights

MAX_PARAMETERS = 40_000_000


_MISSING = re.compile(r"^'(\w+)' object has no attribute '(\w+)'$")


def _unset_default(config: Any, name: str, root: Any = None) -> Any:
    """A value for an attribute a model reads that its config class does not define (a sub-config
    split from its parent, the parent's field left behind: MusicGen's ``dropout``, DBRX's attention
    ``rope_theta``), by its name or as one of its sub-configs holds it, else as another part of the whole
    model ``root`` holds it (Qwen3-Omni's talker: the thinker's vision's ``spatial_merge_size``); None where
    no rule names it."""
    held = next((_value(c, name) for c in _configs(config)[1:] if _value(c, name) is not None), None)
    if held is not None:  # a field of one of its sub-configs (Qwen3-Omni's talker: its vision's spatial_merge_size)
        return held
    if "dropout" in name or name == "layerdrop":
        return 0.0
    if name == "initializer_range":
        return 0.02
    if name == "rope_theta":
        return 10000.0
    if name == "num_key_value_heads":
        return _value(config, "num_attention_heads")
    if name.endswith("intermediate_size"):
        return _value(config, "moe_intermediate_size") or _value(config, "intermediate_size")
    return next((_value(c, name) for c in (_configs(root) if root is not None else [])
                 if c is not config and _value(c, name) is not None and not isinstance(_value(c, name), dict)), None)


def instantiate(cls: type, config: Any, tries: int = 20) -> torch.nn.Module:
    """``cls(config)``; where the model reads an attribute no config under ``config`` defines, the
    attribute set (``_unset_default``) on the configs of the class named, again."""
    for _ in range(tries):
        try:
            return cls(config)
        except TypeError as e:  # a tuple default the model extends as a list (ViTMatte's fusion_hidden_sizes)
            if "concatenate list (not \"tuple\")" not in str(e) or not _listed(config):
                raise
        except AttributeError as e:
            found = _MISSING.match(str(e))
            if not found:
                raise
            fixed = False
            for c in _configs(config):
                if type(c).__name__ == found[1] and not hasattr(c, found[2]):
                    value = _unset_default(c, found[2], config)
                    if value is None:
                        raise
                    setattr(c, found[2], value)
                    fixed = True
            if not fixed:
                raise
    return cls(config)


def _listed(config: Any) -> bool:
    """Whether tuples of ints in ``config`` and its sub-configs were made lists (some were)."""
    changed = False
    for c in _configs(config):
        for name, value in vars(c).items():
            if isinstance(value, tuple) and value and all(isinstance(v, int) for v in value):
                setattr(c, name, list(value))
                changed = True
    return changed


def parameters_on_meta(cls: type, config: Any) -> int:
    with torch.device("meta"):
        model = instantiate(cls, config)
    return sum(p.numel() for p in model.parameters())


def build(model_type: str, attempt: str) -> torch.nn.Module:
    """The seeded base model of ``model_type`` under the attempt named ``attempt``, eval, float32,
    its cache off."""
    rules = next(r for r in ATTEMPTS if r.name == attempt)
    cls = model_class(model_type)
    config, own = with_parent(cls, make_config(model_type, rules), rules)
    for c in _configs(config):
        if hasattr(c, "use_cache"):
            c.use_cache = False
    torch.manual_seed(0)
    model = instantiate(cls, config)
    fix_weights(model)
    _fix_model_ids(model)
    if not hasattr(model, "config"):  # a part that keeps no config: its inputs are read from its own
        model.config = own
    if type(model).forward is torch.nn.Module.forward and callable(getattr(model, "encode", None)):
        model.forward = model.encode  # a VQ-VAE without a forward (Chameleon's): run as its encoder
    return model.eval().float()



def _fix_model_ids(model: torch.nn.Module) -> None:
    """Token ids a model keeps as its own attributes, read from its config or defaulting to ids of the
    full vocabulary (ShieldGemma 2's ``yes_token_index``, 10784), moved to the end of the tiny one."""
    config = getattr(model, "config", None)
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    vocab = getattr(text, "vocab_size", None)
    if not isinstance(vocab, int):
        return
    moved = 0
    for name, value in list(vars(model).items()):
        if re.search(r"_token_(index|id)$", name) and isinstance(value, int) and value >= vocab \
                and not hasattr(config, name):  # a config's ids are moved with its vocabulary (hf_config)
            moved += 1
            setattr(model, name, vocab - moved)


def _configs(config: Any, seen: set | None = None) -> list:
    """``config`` and every sub-config under it (``text_config``, ColPali's ``vlm_config.text_config``)."""
    from transformers import PretrainedConfig

    seen = set() if seen is None else seen
    if id(config) in seen:
        return []
    seen.add(id(config))
    out = [config]
    for value in vars(config).values():
        if isinstance(value, PretrainedConfig):
            out += _configs(value, seen)
    return out


@contextlib.contextmanager
def as_traced():
    """Eager PyTorch taking the paths transformers' code takes under ``torch.export`` and
    ``torch.compile`` (``torch.compiler.is_compiling()`` true: masks built in full, no shortcuts
    decided on the data)."""
    original = torch.compiler.is_compiling
    torch.compiler.is_compiling = lambda: True
    try:
        yield
    finally:
        torch.compiler.is_compiling = original


def traced_difference(model: torch.nn.Module, inputs: dict) -> float:
    """The largest difference between eager outputs as traced (``as_traced``) and as run, relative
    to the outputs' scale: transformers' code can take another path when it is not traced (Aimv2's
    text model skips its causal mask for a full attention mask under SDPA and attends both ways)."""
    plain = run(model, inputs)
    with as_traced():
        traced = run(model, inputs)
    worst = 0.0
    for a, b in zip(plain, traced):
        if a.shape != b.shape:
            return float("inf")
        if a.is_floating_point() and a.numel():
            worst = max(worst, float((a - b).abs().max()) / max(1.0, float(a.abs().max())))
        elif not a.is_floating_point() and not torch.equal(a, b):
            return float("inf")
    return worst


def run(model: torch.nn.Module, inputs: dict) -> list[torch.Tensor]:
    """Eager outputs, flattened (tensors only, in pytree order)."""
    return flat(outputs(model, inputs))


def outputs(model: torch.nn.Module, inputs: dict) -> Any:
    """Eager outputs, as the model returns them."""
    with torch.no_grad():
        return model(**inputs)


def flat(out: Any, numbers: bool = False) -> list[torch.Tensor]:
    """The tensors of a model's output in order (a ``ModelOutput`` by its fields; a transformers cache
    returned as an output by its layers' tensors, ``0.key``, ``0.value``, ..., the order the exporters
    flatten it in). ``numbers``: a Python int, float or bool among them as a 0-d tensor (MaskFormer-Swin
    returns its feature maps' sizes, which an exporter may return as outputs)."""
    from onnxport.capture.caches import cache_leaves, is_cache

    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    tensors = []
    for leaf in torch.utils._pytree.tree_leaves(out):
        if is_cache(leaf):  # not a pytree node in eager: without this its tensors would not be compared
            tensors.extend(t for _, t in cache_leaves(leaf) if isinstance(t, torch.Tensor))
        elif isinstance(leaf, torch.Tensor):
            tensors.append(leaf)
        elif numbers and isinstance(leaf, (bool, int, float)):
            tensors.append(torch.tensor(leaf))
    return tensors


def missing_required(model: torch.nn.Module, names: list) -> list[str]:
    """``forward``'s parameters without a default that ``names`` does not give."""
    params = inspect.signature(model.forward).parameters
    return [n for n, p in params.items() if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n not in names]


def probe(model_type: str) -> dict:
    """The first attempt that builds and runs in eager, its inputs and their dynamic dims; or why
    none does (``status``: ``built``, ``no-build``, ``no-inputs``, ``too-large``)."""
    errors = []
    for rules in ATTEMPTS:
        try:
            cls = model_class(model_type)
            config = with_parent(cls, make_config(model_type, rules), rules)[0]
            count = parameters_on_meta(cls, config)
            if count > MAX_PARAMETERS:
                errors.append(f"{rules.name}: {count / 1e6:.0f}M parameters")
                continue
            model = build(model_type, rules.name)
        except Exception as e:  # noqa: BLE001 - any failure of the generic config is a finding
            errors.append(f"{rules.name}: build: {type(e).__name__}: {_line(e)}")
            continue
        for inputs in candidates(model):
            filled = hf_inputs.fill(model, inputs.names, inputs.dims, inputs.fixed)
            if filled is not None:
                inputs = Inputs(*filled)
            need = missing_required(model, inputs.names)
            if need:
                errors.append(f"{rules.name}: forward requires {need}")
                continue
            try:
                example = run(model, inputs.make(model, 0))
            except Exception as e:  # noqa: BLE001
                errors.append(f"{rules.name}: eager: {type(e).__name__}: {_line(e)}")
                continue
            if not example:
                errors.append(f"{rules.name}: no tensor output")
                continue
            stochastic = _differs(example, run(model, inputs.make(model, 0)))
            given = _with_noise(model, inputs) if stochastic else None
            if given is not None:
                inputs, example, stochastic = *given, False
            dynamic = _dynamic_dims(model, inputs)
            try:
                traced = traced_difference(model, inputs.make(model, 0))
            except Exception:  # noqa: BLE001 - a model that cannot run so is judged against plain eager
                traced = 0.0
            return {"status": "built", "attempt": rules.name, "class": type(model).__name__, "parameters": count,
                    "inputs": inputs.names, "fixed": inputs.fixed,
                    "eager_paths_differ": traced > 1e-4 and not stochastic,
                    "stochastic": stochastic,
                    "dims": {d: list(v) for d, v in dynamic.items()},
                    "all_dims": {d: list(v) for d, v in inputs.dims.items()},
                    "static": sorted(set(inputs.dims) - set(dynamic)), "outputs": len(example)}
    status = "too-large" if errors and all("parameters" in e for e in errors) else \
        "no-inputs" if any("forward requires" in e or "eager:" in e for e in errors) else "no-build"
    return {"status": status, "errors": errors}


def _with_noise(model: torch.nn.Module, inputs: Inputs) -> tuple[Inputs, list] | None:
    """``inputs`` with the random draw given as the forward's ``noise`` argument (ViTMAE's masking:
    "noise ... mainly used for testing purposes to control randomness") and the eager outputs on them,
    where the model then gives the same outputs twice; else None."""
    if "noise" not in inspect.signature(model.forward).parameters or "noise" in inputs.names \
            or "pixel_values" not in inputs.names:
        return None
    given = Inputs(inputs.names + ["noise"], inputs.dims, inputs.fixed)
    try:
        example = run(model, given.make(model, 0))
        return None if _differs(example, run(model, given.make(model, 0))) else (given, example)
    except Exception:  # noqa: BLE001 - the model's noise is not one value per patch
        return None


def _differs(first: list, second: list) -> bool:
    """Whether two eager runs on the same inputs differ (a model drawing random numbers in its
    forward, ViTMAE's random masking): no exporter's output can be compared with such a model's. Relative to
    the output's own magnitude: a model drawing noise into outputs of 1e-7 (Qwen2.5-Omni's token2wav) differs
    from itself too, though under any absolute tolerance."""
    for a, b in zip(first, second):
        if a.shape != b.shape:
            return True
        if a.is_floating_point() and a.numel():
            if float((a - b).abs().max()) > 1e-4 * float(a.abs().max()):
                return True
        elif not a.is_floating_point() and not torch.equal(a, b):
            return True
    return False


def _dynamic_dims(model: torch.nn.Module, inputs: Inputs) -> dict:
    """The dims of ``inputs`` eager also runs at their other size: all at once, else one by one."""
    def runs(dims: dict) -> bool:
        trial = Inputs(inputs.names, {d: (v if d in dims else (v[0], v[0])) for d, v in inputs.dims.items()},
                       inputs.fixed)
        try:
            return bool(run(model, trial.make(model, 1)))
        except Exception:  # noqa: BLE001
            return False

    if runs(inputs.dims):
        return dict(inputs.dims)
    keep = {}
    for d, v in inputs.dims.items():
        if runs({d: v}):
            keep[d] = v
    return keep


def _line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else "")[:200]


def restore(record: dict) -> tuple[torch.nn.Module, Inputs]:
    """The model and inputs a probe record describes (rebuilt: same seed, same weights)."""
    model = build(record["type"], record["attempt"])
    dims = {d: tuple(v) for d, v in record["dims"].items()}
    return model, Inputs(record["inputs"], dims, {**record["fixed"], **_static_sizes(record)})


def _static_sizes(record: dict) -> dict:
    """Sizes of the dims that stayed static, at their example size (the probe's first value)."""
    out = {}
    for d in record.get("static", []):
        out[d] = record["all_dims"][d][0]
    return out
