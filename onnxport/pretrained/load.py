"""A local ``save_pretrained`` directory read for a task: its config, and the model class the task
runs, loaded from its weights. Nothing is downloaded (``local_files_only=True``) and no code from the
directory runs (``trust_remote_code=False``).

Semantics: ``transformers.AutoConfig.from_pretrained`` and the auto classes' ``from_pretrained``
(``AutoModel``, ``AutoModelForCausalLM``...), transformers 5.x; a task is served by a model type when
the task's auto class maps the type's config class to a model class.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from onnxport.errors import TargetError
from onnxport.pretrained.tasks import TASKS, Task

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
# beside the exported models: what a runtime needs to tokenize, decode and read the model's ids
SIDE_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
              "special_tokens_map.json", "vocab.txt", "vocab.json", "merges.txt", "tokenizer.model", "spiece.model",
              "sentencepiece.bpe.model", "added_tokens.json", "preprocessor_config.json", "chat_template.jinja")


def _auto(name: str) -> Any:
    import transformers

    return getattr(transformers, name)


def read_config(directory: str) -> Any:
    """The ``PretrainedConfig`` of ``directory``. Raises ``TargetError`` when ``directory`` is not a
    directory, has no ``config.json``, or transformers cannot read it (an unknown model type, a
    config that needs the directory's own code)."""
    if not os.path.isdir(directory):
        raise TargetError(f"{directory} is not a directory",
                          hint="give the directory a model's save_pretrained() wrote (config.json and weights)")
    if not os.path.isfile(os.path.join(directory, "config.json")):
        raise TargetError(f"{directory} has no config.json",
                          hint="give the directory a model's save_pretrained() wrote (config.json and weights)")
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(directory, local_files_only=True, trust_remote_code=False)
    except (ValueError, OSError, KeyError) as e:
        raise TargetError(f"transformers cannot read {os.path.join(directory, 'config.json')}: "
                          f"{str(e).splitlines()[0][:300]}",
                          hint="onnxport runs no code from the directory: the model type must be one the installed "
                               "transformers ships", detail=str(e)) from e


def tasks_of(config: Any) -> list[str]:
    """The tasks (``TASKS`` keys) whose auto classes have a model class for ``config``'s type."""
    return [name for name, task in TASKS.items() if task_class(task, config) is not None]


def task_class(task: Task, config: Any) -> type | None:
    """The model class ``task`` runs for ``config`` (the first of its auto classes that maps the
    config's class), or None."""
    for auto in task.auto_classes:
        mapping = _auto(auto)._model_mapping
        if type(config) in mapping:
            try:
                return mapping[type(config)]
            except (KeyError, ValueError):  # a mapping entry whose class the installed version lacks
                continue
    return None


def infer_task(config: Any) -> str:
    """The task of the architecture ``config.architectures`` names (its head: ``*ForCausalLM`` ->
    ``text-generation-with-past``...), else the first task the model type serves.

    Raises ``TargetError`` when no task serves the model type."""
    available = tasks_of(config)
    if not available:
        raise TargetError(f"no task of onnxport export-hf serves the model type {config.model_type!r}",
                          hint=f"the tasks are {', '.join(TASKS)}")
    for arch in getattr(config, "architectures", None) or ():
        for name in available:
            cls = task_class(TASKS[name], config)
            if cls is not None and cls.__name__ == arch:
                return name
    return available[0]


def load_model(directory: str, task: str | None = None) -> tuple[torch.nn.Module, Task]:
    """``(model, task)``: the model class of ``task`` for the directory's config, loaded from its
    weights in float32, in eval mode; ``task`` None: ``infer_task``.

    Raises ``TargetError`` for an unknown task, a task the model type does not serve (the message
    lists those it does), a directory without weights, or weights transformers cannot load."""
    config = read_config(directory)
    if task is None:
        task = infer_task(config)
    if task not in TASKS:
        raise TargetError(f"unknown task {task!r}", hint=f"the tasks are {', '.join(TASKS)}")
    spec = TASKS[task]
    cls = task_class(spec, config)
    if cls is None:
        served = tasks_of(config)
        raise TargetError(f"the task {task} has no model class for the model type {config.model_type!r}",
                          hint=f"its tasks are {', '.join(served)}" if served else
                          "no task of onnxport export-hf serves this model type")
    if not any(os.path.isfile(os.path.join(directory, f)) for f in WEIGHT_FILES):
        raise TargetError(f"{directory} has no weights ({' or '.join(WEIGHT_FILES[::2])})",
                          hint="save the model with save_pretrained() into that directory")
    try:
        model = cls.from_pretrained(directory, local_files_only=True, trust_remote_code=False, dtype=torch.float32)
    except (OSError, ValueError, RuntimeError, KeyError) as e:
        raise TargetError(f"{cls.__name__}.from_pretrained({directory!r}) failed: {str(e).splitlines()[0][:300]}",
                          hint="check that the weights belong to the config of the directory", detail=str(e)) from e
    return model.eval(), spec


def side_files(directory: str) -> tuple[str, ...]:
    """The names of the files of ``directory`` copied beside the exported models (``SIDE_FILES``:
    config, generation config, tokenizer, preprocessor)."""
    return tuple(f for f in SIDE_FILES if os.path.isfile(os.path.join(directory, f)))
