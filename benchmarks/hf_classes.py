"""Which class a model type of transformers builds, and from which config (``hf_tiny.build``):

* ``model_class``: the base model class (``AutoModel``'s) of the type, else its first head class, else
  (a sub-model's config: ``clip_text_model``) the model class of its modeling module whose
  ``config_class`` is the config class, else a part built from its config alone (SAM's mask decoder), a
  part taking an unannotated ``config`` (VibeVoice's diffusion head) or a part built from the config of
  its whole model (SAM's prompt encoder, from ``SamConfig``);
* ``with_parent``: the config such a part is built from, its whole model's made small by the same
  rules, and the part's own.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch


def model_class(model_type: str) -> type:
    """The base model class (``AutoModel``) of ``model_type``, else its first head class, else (a
    sub-model's config: ``clip_text_model``) the model class of its modeling module whose
    ``config_class`` is the config class, a base model (no head) first."""
    import importlib

    from transformers import PreTrainedModel
    from transformers.models.auto import modeling_auto as ma
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    config_cls = CONFIG_MAPPING[model_type]
    for mapping in (ma.MODEL_MAPPING, ma.MODEL_FOR_CAUSAL_LM_MAPPING, ma.MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING,
                    ma.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING, ma.MODEL_FOR_CTC_MAPPING, ma.MODEL_FOR_BACKBONE_MAPPING):
        if config_cls in mapping:
            try:
                cls = mapping[config_cls]
            except (ValueError, AttributeError):  # a class the mapping names its package does not export
                continue
            return cls[0] if isinstance(cls, (list, tuple)) else cls
    module = importlib.import_module(config_cls.__module__.replace(".configuration_", ".modeling_"))
    found = [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, PreTrainedModel)
             and c.__dict__.get("config_class", getattr(c, "config_class", None)) is config_cls
             and not c.__name__.endswith("PreTrainedModel")]
    found.sort(key=lambda c: ("For" in c.__name__, len(c.__name__)))
    if not found:  # a part built from its config alone (SAM 2's mask decoder: Sam2MaskDecoderConfig)
        stem = config_cls.__name__.removesuffix("Config")
        found = sorted((c for c in vars(module).values() if isinstance(c, type) and issubclass(c, torch.nn.Module)
                        and c.__name__.startswith(stem) and (_takes_config(c, config_cls) or (
                            c.__name__ == stem and (_takes_config(c, None) or _parent(c, config_cls))))),
                       key=lambda c: (c.__name__ != stem, not c.__name__.endswith(("Transformer", "Model")),
                                      len(c.__name__)))
    if not found:
        raise LookupError(f"no model class for {model_type}")
    return found[0]


def _takes_config(cls: type, config_cls: type | None) -> bool:
    """Whether ``cls.__init__``'s first parameter is annotated as ``config_cls`` (named ``config`` and
    not annotated, where ``config_cls`` is None: VibeVoice's diffusion head) and it needs no other."""
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())
    except (TypeError, ValueError):
        return False
    if len(params) < 2:
        return False
    first = params[1]
    named = first.annotation is inspect.Parameter.empty and first.name == "config" if config_cls is None else \
        first.annotation in (config_cls, config_cls.__name__)
    return named and all(
        p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params[2:])


def _parent(cls: type, config_cls: type) -> tuple[type, str] | None:
    """``(parent config class, field)`` where ``cls`` is built from the config of the whole model
    that holds ``config_cls`` as a sub-config (SAM's prompt encoder from ``SamConfig``, whose
    ``prompt_encoder_config`` it reads beside its ``vision_config``), else None."""
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())
    except (TypeError, ValueError):
        return None
    parent = params[1].annotation if len(params) > 1 else None
    if not isinstance(parent, type) or parent is config_cls or any(
            p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            for p in params[2:]):
        return None
    field = next((k for k, v in (getattr(parent, "sub_configs", None) or {}).items() if v is config_cls), None)
    return (parent, field) if field else None


def with_parent(cls: type, config: Any, rules: Any) -> tuple[Any, Any]:
    """``(config to build cls from, config of the part)``: a part built from its whole model's config
    (``_parent``) gets that config made small by the same rules, the part's config its sub-config;
    else ``config`` both."""
    found = _parent(cls, type(config))
    if found is None:
        return config, config
    from hf_config import construct, overrides

    whole = construct(found[0], {}, overrides(found[0](), rules))
    return whole, getattr(whole, found[1])
