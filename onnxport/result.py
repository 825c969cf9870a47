"""ExportResult: the exported model, saving, validation and a summary."""

from __future__ import annotations

import os
from typing import Any

import onnx
import onnx_ir as ir

from onnxport.capture.guards import adopted_of
from onnxport.saving import PROTOBUF_LIMIT, needs_external_data, save_model
from onnxport.weights import materialize, on_meta


class ExportResult:
    """An exported model, complete when built: nothing sets its attributes afterwards (a changed
    result is a new one, ``replace``).

    Attributes:
        model: the ``onnx_ir.Model``.
        program: the ``torch.export.ExportedProgram`` it came from (None when loaded from a file).
        module: the eager module (for validation), or None.
        example: ``(args, kwargs)`` the export used.
        captured: what capture handed forward (``onnxport.capture.Captured``).
        timings: seconds per step (``capture``, ``translate``, ``optimize``...).
        dim_names: torch's symbols -> the dimension names used as ONNX dim_params.
        rewrite_notes: with ``rewrite_control_flow=True``, the loops and branches left as written.
        config: the export config, for a result of ``export_from_config``.
        validation: its ``ValidationReport`` (None when not validated).
        decomposed: the ATen ops without a translation, decomposed node by node (``"local"``), and
            those that made the whole program be decomposed by torch anew (``"whole_program"``).
        quantization: for a result of ``quantize``, how it was quantized
            (``onnxport.quantize.Quantization``: mode, what stayed in float, the accuracy tolerance);
            None for a float model.
        weights: for a model exported from its checkpoint (``to_onnx(weights=...)``), where each
            initializer's values are (``onnxport.weights.Weights``); its initializers read them
            when saved. None otherwise.
        pieces: for a model exported in pieces (a branch on a size, ``onnxport.pieces``), each
            ``(Interval, ExportResult)``: the interval of the dim and what was exported there (its
            program, guards and example; its model the joined one); the result's ``captured`` is the
            example's piece, its guards those of every piece (each qualified by its interval).
            Empty otherwise.
    """

    external_data_threshold = PROTOBUF_LIMIT  # bytes of the serialized model, not of the weights alone
    _FIELDS = ("model", "program", "module", "example", "captured", "timings", "dim_names", "rewrite_notes",
               "config", "validation", "decomposed", "quantization", "weights", "pieces")

    def __init__(self, model: ir.Model, *, program=None, module=None, example=None, captured=None,
                 timings: dict | None = None, dim_names: dict | None = None, rewrite_notes: list | None = None,
                 config: Any = None, validation: Any = None, decomposed: dict | None = None,
                 quantization: Any = None, weights: Any = None, pieces: tuple = ()):
        values = dict(model=model, program=program, module=module, example=example, captured=captured,
                      timings=dict(timings or {}), dim_names=dict(dim_names or {}),
                      rewrite_notes=list(rewrite_notes or []), config=config, validation=validation,
                      decomposed=dict(decomposed or {"local": [], "whole_program": []}), quantization=quantization,
                      weights=weights, pieces=tuple(pieces))
        for name, value in values.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_proto", None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"ExportResult.{name} is read-only: make a changed copy with result.replace({name}=...)")

    def replace(self, **changes: Any) -> "ExportResult":
        """A new result with ``changes`` (field name -> value); the others shared with this one."""
        unknown = sorted(set(changes) - set(self._FIELDS))
        if unknown:
            raise TypeError(f"ExportResult has no field(s) {unknown}")
        fields = {name: getattr(self, name) for name in self._FIELDS if name != "model"}
        fields.update({k: v for k, v in changes.items() if k != "model"})
        new = ExportResult(changes.get("model", self.model), **fields)
        if "model" not in changes:
            object.__setattr__(new, "_proto", self._proto)
        return new

    @property
    def guards(self) -> list:
        """Every condition on sizes the export relies on, decided (``onnxport.capture.guards.Guard``, its
        ``status`` a ``GuardStatus``:
        proved, kept or adopted), with the user's line."""
        return list(getattr(self.captured, "guards", None) or [])

    @property
    def constraints(self) -> list:
        """The conditions adopted as constraints of the export (``time % 4 == 0``, ``time >= 5``):
        the model is exported and validated for sizes that satisfy them."""
        return adopted_of(self.guards)

    @property
    def model_proto(self) -> onnx.ModelProto:
        """The model as an ``onnx.ModelProto`` (serialized once, cached)."""
        if self._proto is None:
            object.__setattr__(self, "_proto", ir.serde.serialize_model(self.model))
        return self._proto

    def weights_bytes(self) -> int:
        """Bytes of the initializers' data."""
        return sum(v.const_value.nbytes for v in self.model.graph.initializers.values() if v.const_value is not None)

    def needs_external_data(self) -> bool:
        """True when the model serialized as one protobuf message would exceed
        ``external_data_threshold`` bytes (protobuf's limit, 2 GiB - 1): its size counts the
        weights, the graph, the local functions and the names (``onnxport.saving.serialized_size``)."""
        return needs_external_data(self.model, self.external_data_threshold)

    def save(self, path: str | os.PathLike, *, external_data: bool | None = None) -> str:
        """Write the model to ``path``; returns the path.

        Weights go to ``<path>.<token>.data`` (a name new to each save) beside it when ``external_data`` is True, or when
        None and the serialized model would exceed ``external_data_threshold`` bytes (protobuf's
        2 GiB limit). The ``.onnx`` file and its data change together: a failed or interrupted save
        leaves the previous model readable as it was (``onnxport.saving``). Data files of an earlier
        save at ``path`` that the new model does not read are removed.

        A model exported from its checkpoint (``weights`` set) saves its weights as external data
        by default, read from the checkpoint and written one tensor at a time.

        Raises ``SaveError`` when the directory does not exist (it is not created), ``path`` is
        a directory, or writing fails; nothing new is then left beside ``path``.
        """
        if external_data is None:
            external_data = self.weights is not None or self.needs_external_data()
        return save_model(self.model, path, external_data)

    def quantize(self, mode: str, **options: Any) -> "ExportResult":
        """A new result with the model quantized (``"int8"``, ``"int8-static"``, ``"int4"``), the
        embeddings, the final projection and ``keep_float`` layers left in float; this result is
        unchanged. Options and errors: ``onnxport.quantize.quantize``."""
        from onnxport.quantize import quantize

        return quantize(self, mode, **options)

    def validate(self, inputs: Any = None, sizes: Any = None, *, values: Any = None, atol: float | None = None,
                 rtol: float | None = None, load_eager: bool = False):
        """Run eager PyTorch and onnxruntime on the example, other sizes, other values and
        ``inputs``, and compare every output (updated buffers and inputs included); see
        ``onnxport.verify.validate`` (``values``: the value kinds, default all). Returns a
        ``ValidationReport``; raises ``ValidationError`` when validation cannot run.

        A quantized result is compared with eager PyTorch's float outputs in the user's terms
        instead (``onnxport.verify.accuracy.validate_quantized``: per output the error, top-1
        agreement or cosine similarity, judged by ``quantization.tolerance``); ``values``, ``atol``
        and ``rtol`` do not apply there. Returns an ``AccuracyReport``.

        A model exported from its checkpoint (``weights`` set, the module on the meta device) has
        no eager model to compare with: with ``load_eager=True`` the checkpoint is loaded into a
        real copy of the module (memory for all the weights) and validation runs as above;
        otherwise onnxruntime runs the saved model on the example, the size sets (or ``sizes``)
        and ``inputs``, and each output is checked without eager PyTorch (its dtype and shape as
        declared, no NaN or infinity; see ``onnxport.verify.weightless``), each row saying it was
        not compared."""
        if self.weights is not None and self.module is not None and on_meta(self.module):
            if not load_eager:
                from onnxport.verify.weightless import check_without_eager

                return check_without_eager(self, sizes=sizes, inputs=inputs)
            return self.replace(module=materialize(self.module, self.weights)).validate(
                inputs, sizes, values=values, atol=atol, rtol=rtol)
        if self.quantization is not None:
            from onnxport.verify.accuracy import validate_quantized

            return validate_quantized(self, inputs=inputs, sizes=sizes)
        if self.pieces:
            from onnxport.verify.pieces import validate_pieces

            return validate_pieces(self, inputs=inputs, sizes=sizes, values=values, atol=atol, rtol=rtol)
        from onnxport.verify import validate

        return validate(self, inputs=inputs, sizes=sizes, values=values, atol=atol, rtol=rtol)

    def check_generation(self, model: Any, prompt_ids: Any = None, *, attention_mask: Any = None,
                         max_new_tokens: int = 16, atol: float | None = None, rtol: float | None = None):
        """Greedy decoding with this model (a decoder exported with its cache as inputs and outputs)
        in onnxruntime against ``model``'s own greedy ``generate``, step by step: the ``present.*``
        outputs are fed back as ``past_key_values.*``.

        Args:
            model: the transformers model the decoder was exported from (eval mode).
            prompt_ids: int64 ``[batch, prompt]``.
            attention_mask: ``[batch, prompt]``, 0 on (left) padding; ones when None.
            max_new_tokens: tokens to generate.
            atol, rtol: tolerance of the logits (default 1e-3 each).

        A quantized result reports greedy-token agreement instead (``GenerationAgreement``: each
        step fed eager's tokens so far, the fraction of steps choosing eager's token, judged by
        ``quantization.tolerance.tokens``, and the first step where free decoding diverges).

        Returns a ``GenerationReport`` (``.ok``, ``.first_difference``, printable); see
        ``onnxport.verify.generation.check_generation``, which raises ``ValidationError`` when the
        decoder's inputs are not a decoder's (input_ids, past_key_values.*) or generate fails.
        """
        if self.quantization is not None:
            from onnxport.verify.accuracy import generation_agreement

            return generation_agreement(model, self.model_proto, prompt_ids, attention_mask=attention_mask,
                                        max_new_tokens=max_new_tokens, tolerance=self.quantization.tolerance.tokens)
        from onnxport.verify.generation import LOGITS_ATOL, LOGITS_RTOL, check_generation

        return check_generation(model, self.model_proto, prompt_ids, attention_mask=attention_mask,
                                max_new_tokens=max_new_tokens, atol=LOGITS_ATOL if atol is None else atol,
                                rtol=LOGITS_RTOL if rtol is None else rtol)

    def pretty(self, **kwargs) -> str:
        """Compact text rendering (``onnxport.pretty_onnx``)."""
        from onnxport.show.pretty import pretty_onnx

        return pretty_onnx(self, **kwargs)

    def plot(self, path: str | None = None, format: str = "png") -> str:
        """Graphviz DOT text, rendered to ``path`` when given (``onnxport.plot_dot``)."""
        from onnxport.show.dot import plot_dot

        return plot_dot(self, path=path, format=format)

    def count_nodes(self, recursive: bool = True) -> int:
        """Nodes in the main graph (and in subgraphs and local functions when ``recursive``)."""
        n = 0
        for node in ir.traversal.RecursiveGraphIterator(self.model.graph) if recursive else self.model.graph:
            n += 1
        if recursive:
            for f in self.model.functions.values():
                n += sum(1 for _ in ir.traversal.RecursiveGraphIterator(f))
        return n

    def __repr__(self) -> str:
        g = self.model.graph

        def sig(v: ir.Value) -> str:
            dt = v.dtype.name.lower() if v.dtype is not None else "?"
            dims = ", ".join(str(d) for d in v.shape) if v.shape is not None else "?"
            return f"{v.name}: {dt}[{dims}]"

        opset = self.model.opset_imports.get("", None)
        constraints = f", constraints=[{'; '.join(str(c) for c in self.constraints)}]" if self.constraints else ""
        quantized = f", quantized={self.quantization.mode}" if self.quantization is not None else ""
        return (f"ExportResult(inputs=[{'; '.join(sig(v) for v in g.inputs)}], "
                f"outputs=[{'; '.join(sig(v) for v in g.outputs)}], nodes={self.count_nodes()}, "
                f"functions={len(self.model.functions)}, opset={opset}{constraints}{quantized})")
