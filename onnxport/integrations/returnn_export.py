"""``export_returnn_config``: a RETURNN config and checkpoint to ONNX, with RETURNN's input and output
names, checked against ``model_outputs`` and validated against RETURNN eager.

Steps: read the config (``returnn_config``), build the model with ``get_model`` and load the
checkpoint, wrap it with ``forward_step`` (``returnn_forward.ReturnnForward``), run it eagerly on the
example and check its outputs against ``model_outputs``, export with RETURNN's capture hooks
(``returnn.capture_hooks``), check the ONNX dims, and compare onnxruntime with eager RETURNN on other
sizes (the ``onnxport.config`` checks and validation).
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import torch

from onnxport.config import contract
from onnxport.config.export import check_export, eager_outputs
from onnxport.config.inputs import dynamic_shapes, make_inputs
from onnxport.errors import CheckpointError, ReturnnError
from onnxport.export import to_onnx
from onnxport.integrations.returnn import capture_hooks
from onnxport.integrations.returnn_config import ReturnnConfig, export_config, load_returnn_config
from onnxport.integrations.returnn_forward import ReturnnForward
from onnxport.targets import DEFAULT_TARGET
from onnxport.weights import bind, materialize, open_checkpoint

StepCallback = Callable[[str, float], None]  # (step, seconds), called as each step ends


def build_returnn_model(rc: ReturnnConfig, checkpoint: str | os.PathLike | None = None, *,
                        seed: int = 42) -> ReturnnForward:
    """The config's model, its checkpoint loaded, as a ``ReturnnForward`` in eval mode.

    Args:
        rc: the read config (``load_returnn_config``).
        checkpoint: a RETURNN checkpoint (``{"model": state_dict, "epoch": ..., "step": ...}``, as
            RETURNN's torch engine saves it) or a plain state dict, read through
            ``onnxport.weights`` (``torch.load(weights_only=True, mmap=True)``; a safetensors file
            or sharded index too); None keeps the weights ``get_model`` makes, seeded with
            ``rf.set_random_seed(seed)``.
        seed: RETURNN's random seed before ``get_model`` (42, as RETURNN's export tool).

    Semantics: ``main`` of RETURNN's ``tools/torch_export_to_onnx.py``: ``get_model(epoch=, step=)``
    with the checkpoint's epoch and step (1 and 0 without one), an ``rf.Module`` wrapped as
    ``RFModuleAsPTModule`` and its parameters loaded under RETURNN's names.

    Raises ``ReturnnError`` when ``get_model`` raises or returns neither an ``rf.Module`` nor a
    ``torch.nn.Module``; ``CheckpointError`` when the checkpoint cannot be read or does not fit.
    """
    import returnn.frontend as rf
    from returnn.util.basic import get_fwd_compat_kwargs

    opened, epoch, step = None, 1, 0
    if checkpoint is not None:
        opened = open_checkpoint(checkpoint)
        epoch, step = int(opened.extras.get("epoch", epoch)), int(opened.extras.get("step", step))
    with rc.scope():
        rf.init_forward_step_run_ctx(expected_outputs=rc.model_outputs, step=step, epoch=epoch)
        rf.set_random_seed(seed)
        try:
            model = rc.get_model(epoch=epoch, step=step, **get_fwd_compat_kwargs())
        except Exception as e:  # noqa: BLE001 - the user's get_model raised
            raise ReturnnError(f"get_model(epoch={epoch}, step={step}) of {rc.path} raised {type(e).__name__}: {e}",
                               hint="run the config's get_model in RETURNN to see the full error") from e
    if not isinstance(model, (rf.Module, torch.nn.Module)):
        raise ReturnnError(f"get_model of {rc.path} returned a {type(model).__name__}",
                           hint="return a returnn.frontend.Module or a torch.nn.Module")
    module = ReturnnForward(model, rc.forward_step, rc.extern_data, rc.model_outputs, epoch=epoch, step=step,
                            scope=rc.scope)
    if opened is not None:
        try:
            materialize(module.model, bind(module.model, opened, cast=True), in_place=True)
        except CheckpointError as e:
            raise CheckpointError(
                e.what, hint="use a checkpoint of a model this config's get_model builds "
                             "(RETURNN saves {'model': state_dict, 'epoch': ..., 'step': ...})") from e
    return module.eval()


def export_returnn_config(config: str | os.PathLike, checkpoint: str | os.PathLike | None = None, *,
                          validate: bool = True, sizes: list[dict[str, int]] | None = None,
                          opset: int | None = None, atol: float | None = None, rtol: float | None = None,
                          on_step: StepCallback | None = None, target: str = DEFAULT_TARGET):
    """Export the model of a RETURNN config to ONNX and check it against RETURNN eager.

    Args:
        config: path of the RETURNN config (Python): ``extern_data``, ``model_outputs``,
            ``get_model``, ``forward_step``.
        checkpoint: RETURNN checkpoint loaded into the model (see ``build_returnn_model``).
        validate: compare onnxruntime with eager RETURNN on other sizes.
        sizes: validation sizes (``[{"batch": 1, "time": 9}, ...]``, dims named as the ONNX inputs
            name them); default: generated below and above the example (batch 3, time 50) and on
            both sides of every shape guard.
        opset, atol, rtol: ONNX opset (default 20) and validation tolerances.
        on_step: called ``(step, seconds)`` as each step ends: build, the export's steps, validate.
        target: the runtime the model is for (``to_onnx``'s ``target``: ``"onnxruntime"``,
            ``"portable"``, ``"openvino"``); validation runs on its runtime.

    Returns the ``ExportResult``: inputs named as RETURNN names them (``data``, ``data:size1``;
    no batch-size input), outputs as ``model_outputs`` declares them (``output``,
    ``output:size1``), its ``.validation`` (a ``ValidationReport``, None without validation).

    The model's outputs are checked against ``model_outputs`` (names, dtypes, static dims, dims
    shared with the inputs) at the example and each validation size, the ONNX outputs' dims too;
    an output's own dynamic dim must be one formula of the input sizes, and gets its declared name.

    Raises ``ReturnnError`` (config), ``CheckpointError``, ``ContractError`` (outputs differ from
    ``model_outputs``) and the export's own errors (all ``onnxport.ExportError``).
    """
    report = on_step or (lambda *a: None)
    t0 = time.perf_counter()
    rc = load_returnn_config(config)
    cfg = export_config(rc, sizes=sizes, opset=opset, atol=atol, rtol=rtol)
    module = build_returnn_model(rc, checkpoint)
    example_sizes = cfg.example_sizes()
    example = make_inputs(cfg, example_sizes, seed=0)
    pairs = contract.match_outputs(cfg, eager_outputs(module, example, "the example"))
    contract.check_tensors(cfg, pairs, example_sizes)
    report("build", time.perf_counter() - t0)

    spec = dynamic_shapes(cfg)
    exported = to_onnx(module, (example,), dynamic_shapes=({n: spec[n] for n in example},),
                       input_names=list(example), output_names=[n for n, _ in pairs], opset=cfg.opset,
                       on_step=report, capture_hooks=capture_hooks, target=target)
    return check_export(exported, cfg, module, lambda s, seed: make_inputs(cfg, s, seed=seed), validate=validate,
                        on_step=report)


def returnn_inputs(result, sizes: dict[str, int], seed: int = 0) -> dict[str, Any]:
    """Inputs of an exported RETURNN model at ``sizes`` (dim name -> size): random features, lengths
    between 1 and the padded size with the longest equal to it, zeros past each length."""
    return make_inputs(result.config, {**result.config.example_sizes(), **sizes}, seed=seed)
