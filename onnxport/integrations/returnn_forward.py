"""A RETURNN model and its config's ``forward_step`` as one ``torch.nn.Module`` over raw tensors.

``ReturnnForward`` takes the raw inputs RETURNN names after ``extern_data`` (``data``, its lengths
``data:size1``; the batch size is no input, it is read from the tensors' shapes) and returns the
raw outputs ``forward_step`` marks, named after ``model_outputs`` (``output``, ``output:size1``).
Semantics: ``ForwardModuleRF`` / ``ForwardModulePT`` of RETURNN's ``tools/torch_export_to_onnx.py``,
with the per-step resets of ``returnn.torch.engine.Engine.forward_with_callback`` so that every
call, eager or traced, starts from clean dims.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch

from onnxport.errors import ContractError, ReturnnError


def complete_dyn_sizes(tensor_dict) -> None:
    """Give each dynamic dim of ``tensor_dict`` other than the batch that has no size template one:
    lengths over the batch (``int32[batch]``), as RETURNN's engine does for the time axis of the
    data it reads (``returnn.torch.data.extern_data.raw_dict_to_extern_data``). A dim declared with
    a scalar size (``Dim(Tensor("time", [], "int32"))``) keeps it: it has no lengths input or output."""
    from returnn.tensor import Tensor, batch_dim

    for value in tensor_dict.data.values():
        for dim in value.dims:
            if dim.is_batch_dim() or dim.dimension is not None or dim.dyn_size_ext is not None:
                continue
            dim.dyn_size_ext = Tensor(dim.name or "time", dims=[batch_dim], dtype="int32")


def raw_output_names(model_outputs) -> list[str]:
    """``model_outputs`` (a RETURNN ``TensorDict``) as raw output names, in order: each output, then
    ``<name>:size<axis>`` for each of its dims whose size is a tensor over other dims (a time
    axis's lengths; not the batch size). Semantics: ``_get_model_outputs_raw_keys`` of RETURNN's
    ``tools/torch_export_to_onnx.py``."""
    names = []
    for key, value in model_outputs.data.items():
        names.append(key)
        for axis, dim in enumerate(value.dims):
            if dim.dyn_size_ext is not None and dim.dyn_size_ext.dims:
                names.append(f"{key}:size{axis}")
    return names


def raw_input_names(extern_data) -> list[str]:
    """``extern_data`` (a RETURNN ``TensorDict``, inference inputs only) as raw input names:
    each tensor, then ``<name>:size<axis>`` for each dynamic dim seen first there whose size is a
    tensor over other dims. Semantics: ``TensorDict.as_raw_tensor_dict(include_scalar_dyn_sizes=False,
    exclude_duplicate_dims=True)``, as RETURNN's ``tools/torch_export_to_onnx.py`` names inputs."""
    names, seen = [], set()
    for key, value in extern_data.data.items():
        names.append(key)
        for axis, dim in enumerate(value.dims):
            if dim in seen:
                continue
            seen.add(dim)
            if not dim.is_batch_dim() and dim.dyn_size_ext is not None and dim.dyn_size_ext.dims:
                names.append(f"{key}:size{axis}")
    return names


class ReturnnForward(torch.nn.Module):
    """Runs ``forward_step(model=..., extern_data=...)`` on raw tensors and returns the raw outputs.

    Args:
        model: what the config's ``get_model`` returned: an ``rf.Module`` (wrapped as RETURNN's
            ``RFModuleAsPTModule``, so that its parameters are this module's) or a ``torch.nn.Module``.
        forward_step: the config's ``forward_step(*, model, extern_data)``.
        extern_data: the inference inputs (RETURNN ``TensorDict`` template).
        model_outputs: the declared outputs (RETURNN ``TensorDict``).
        epoch, step: passed to RETURNN's run context as the engine does.
        scope: ``() -> context manager`` entered around each call: RETURNN's global state for the
            model's config (``ReturnnConfig.scope``).

    ``forward(raw)`` takes a dict of the tensors of ``input_names`` (or the tensors as keyword
    arguments, ``**{"data": x, "data:size1": lengths}``) and returns a dict keyed by ``output_names``.
    Raises ``ContractError`` when ``forward_step`` marks other outputs than ``model_outputs`` declares.
    """

    def __init__(self, model: Any, forward_step: Callable, extern_data, model_outputs, *, epoch: int = 1,
                 step: int = 0, scope: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext):
        super().__init__()
        import returnn.frontend as rf
        from returnn.torch.frontend.bridge import RFModuleAsPTModule

        complete_dyn_sizes(extern_data)
        complete_dyn_sizes(model_outputs)
        self.is_rf = isinstance(model, rf.Module)
        self.model = RFModuleAsPTModule(model) if self.is_rf else model
        self.forward_step = forward_step
        self.extern_data = extern_data
        self.model_outputs = model_outputs
        self.epoch, self.step = epoch, step
        self.scope = scope
        self.input_names = raw_input_names(extern_data)
        self.output_names = raw_output_names(model_outputs)
        self.float_dtype: str | None = None  # RETURNN's default float dtype while it runs (None: the config's)

    def double(self) -> "ReturnnForward":
        """The model in float64: floating parameters and buffers cast (RETURNN's ``RFModuleAsPTModule``
        gives its RF parameters the new dtype), the declared float inputs and outputs ``float64`` and
        RETURNN's default float dtype ``float64`` while it runs (``rf.set_default_float_dtype_ctx``),
        so that ``forward_step`` runs in double precision, as validation's float64 reference needs."""
        super().double()
        for tensors in (self.extern_data, self.model_outputs):
            for tensor in tensors.data.values():
                if tensor.dtype.startswith("float") or tensor.dtype == "bfloat16":
                    tensor.dtype = "float64"
        self.float_dtype = "float64"
        return self

    def forward(self, raw: dict[str, torch.Tensor] | None = None, **tensors: torch.Tensor) -> dict[str, torch.Tensor]:
        """``raw`` (or ``tensors``): the tensors of ``input_names`` by name; returns those of ``output_names``."""
        raw = dict(raw or {}, **tensors)
        missing = [n for n in self.input_names if n not in raw]
        if missing:
            raise ContractError(f"the RETURNN model takes the raw inputs {self.input_names}, {missing} not given",
                                hint="pass a dict with a tensor for each name of input_names")
        with self.scope(), _default_float_dtype(self.float_dtype):
            return self._forward_step(raw)

    def _forward_step(self, raw: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        import returnn.frontend as rf

        rf.select_backend_torch()
        self.model_outputs.reset_content()  # as the engine's forward loop: no dims of the previous call
        for dim in self.extern_data.all_dims():
            if dim.dyn_size_ext is not None or dim.dimension is None:
                dim.reset_eager()
        rf.init_forward_step_run_ctx(expected_outputs=self.model_outputs, step=self.step, epoch=self.epoch)
        extern_data = self.extern_data.copy_template()
        extern_data.assign_from_raw_tensor_dict_({n: raw[n] for n in self.input_names}, with_scalar_dyn_sizes=False,
                                                 duplicate_dims_are_excluded=True)
        _assign_batch_sizes(extern_data)
        if not self.is_rf:
            self.forward_step(model=self.model, extern_data=extern_data)
            return self._outputs()
        with _rf_params_as_module_params(self.model):
            self.forward_step(model=self.model.rf_module, extern_data=extern_data)
            return self._outputs()

    def _outputs(self) -> dict[str, torch.Tensor]:
        import returnn.frontend as rf

        ctx = rf.get_run_ctx()
        outputs = ctx.outputs.as_raw_tensor_dict(include_scalar_dyn_sizes=False)
        got, declared = list(outputs), self.output_names
        if set(got) != set(declared) or any(v is None for v in outputs.values()):
            missing = [n for n in declared if n not in got or outputs[n] is None]
            extra = [n for n in got if n not in declared]
            raise ContractError(f"forward_step marks the outputs {got}, model_outputs declares {declared}"
                                + (f"; missing {missing}" if missing else "") + (f"; extra {extra}" if extra else ""),
                                hint="mark each output of model_outputs (mark_as_output / mark_as_default_output) "
                                     "with the dims model_outputs gives it")
        return {n: outputs[n] for n in declared}


def _default_float_dtype(dtype: str | None) -> contextlib.AbstractContextManager:
    """RETURNN's default float dtype ``dtype`` within (unchanged when None)."""
    if dtype is None:
        return contextlib.nullcontext()
    import returnn.frontend as rf

    return rf.set_default_float_dtype_ctx(dtype)


@contextlib.contextmanager
def _rf_params_as_module_params(module: torch.nn.Module):
    """For one call, let each RF parameter hold the tensor its ``RFModuleAsPTModule`` holds under its
    name now (the same tensor in eager mode; the parameter torch.export traces, while it traces),
    so that the exported weights are the module's parameters with their names, not constants.
    Semantics: ``RFModuleAsPTModule._apply`` of RETURNN, which syncs them the same way."""
    from returnn.torch.frontend.bridge import RFModuleAsPTModule

    saved = []
    for pt in module.modules():
        if not isinstance(pt, RFModuleAsPTModule):
            continue
        for name, rf_param in pt.rf_module.named_parameters(recurse=False):
            current = getattr(pt, name, None)
            if isinstance(current, torch.Tensor) and current is not rf_param.raw_tensor:
                saved.append((rf_param, rf_param.raw_tensor))
                rf_param.raw_tensor = current
    try:
        yield
    finally:
        for rf_param, raw in reversed(saved):
            rf_param.raw_tensor = raw


def _assign_batch_sizes(extern_data) -> None:
    """Give each dim whose size is a scalar (the batch) its size from the raw tensor's shape.
    Semantics: ``_assign_scalar_dyn_dims`` of RETURNN's ``tools/torch_export_to_onnx.py``."""
    import returnn.frontend as rf

    for value in extern_data.data.values():
        if value.raw_tensor is None:
            continue
        shape = value.raw_tensor.shape
        for axis, dim in enumerate(value.dims):
            ext = dim.dyn_size_ext
            if ext is None or ext.dims != () or ext.raw_tensor is not None:
                continue
            ext.raw_tensor = rf.cast(rf.copy_to_device(rf.convert_to_tensor(shape[axis], _backend=value._raw_backend),
                                                       rf.get_default_dim_size_device()), ext.dtype).raw_tensor


def require_returnn() -> None:
    """Raise ``ReturnnError`` when RETURNN or dm-tree cannot be imported."""
    try:
        import returnn.frontend  # noqa: F401
        import tree  # noqa: F401 - dm-tree, which returnn.frontend needs and does not declare
    except ImportError as e:
        raise ReturnnError(f"RETURNN models need the packages returnn and dm-tree: {e}",
                           hint="pip install 'onnxport[returnn]' (or pip install returnn dm-tree)") from e
