"""ExportResult: the exported model (or the models of one export, its parts), saving, validation and a
summary."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import warnings
from typing import Any

import onnx
import onnx_ir as ir

from onnxport.capture.guards import adopted_of
from onnxport.metadata import FLOAT32_COMPUTE_KEY
from onnxport.errors import ExportError, SaveError, ValidationError
from onnxport.saving import PROTOBUF_LIMIT, needs_external_data, save_model, write_file
from onnxport.weights import materialize, on_meta


class ExportResult:
    """An exported model, complete when built: nothing sets its attributes afterwards (a changed
    result is a new one, ``replace``).

    One export gives one model, or several that work together (an encoder and a decoder with its
    cache, exported from one model): then ``model`` is None, each is a result of its own in
    ``parts``, and the result saves as a directory of them (``save``).

    Attributes:
        model: the ``onnx_ir.Model``; None for a result of ``parts``.
        program: the ``torch.export.ExportedProgram`` it came from (None when loaded from a file).
        module: the eager module (for validation), or None.
        example: ``(args, kwargs)`` the export used.
        captured: what capture handed forward (``onnxport.capture.Captured``).
        timings: seconds per step (``capture``, ``translate``, ``optimize``...).
        dim_names: torch's symbols -> the dimension names used as ONNX dim_params.
        rewrite_notes: with ``rewrite_control_flow=True``, the loops and branches left as written.
        config: the export config, for a result of ``export_target`` with a config or declarations.
        validation: its ``ValidationReport`` (None when not validated; for a result of ``parts``,
            each part holds its own).
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
            example's piece, its guards those of every piece (each qualified by its interval). For
            a branch on a state input's value exported one side at a time (``onnxport.value_sides``),
            each ``(ValueSide, ExportResult)`` of the two sides, the result's ``captured`` the
            example's side with the guards of both. Empty otherwise.
        parts: name -> ``ExportResult`` of each model of an export that makes several, saved as
            ``<name>.onnx``: ``encoder`` and ``decoder`` (``onnxport.encoder_decoder``),
            ``encoder_model`` and ``decoder_model`` or ``model`` (``export_pretrained``, as Optimum
            names the files). Empty for one model.
        files: what a directory save writes beside the models: file name -> a dict (written as
            JSON: ``genai_config.json``) or the path of a file copied (the source's config and
            tokenizer files). Empty otherwise.
        generation: ``(label, GenerationReport)`` of each greedy decoding the export compared with
            the model's ``generate`` (``export_pretrained``); empty when none ran.
        task: the task a ``save_pretrained`` directory was exported for (``export_pretrained``), or None.
        source: the directory it was loaded from, or None.
        optimization: the optimizer's node counts, ``{"nodes_before": n, "nodes_after": m}`` (main
            graph, subgraphs and local functions); empty when it did not run (``optimize=False``,
            a loaded model). For a model exported in pieces, the example's piece's (each of
            ``pieces`` holds its own).
    """

    external_data_threshold = PROTOBUF_LIMIT  # bytes of the serialized model, not of the weights alone
    _FIELDS = ("model", "program", "module", "example", "captured", "timings", "dim_names", "rewrite_notes",
               "config", "validation", "decomposed", "quantization", "weights", "pieces", "parts", "files",
               "generation", "task", "source", "optimization")

    def __init__(self, model: ir.Model | None, *, program=None, module=None, example=None, captured=None,
                 timings: dict | None = None, dim_names: dict | None = None, rewrite_notes: list | None = None,
                 config: Any = None, validation: Any = None, decomposed: dict | None = None,
                 quantization: Any = None, weights: Any = None, pieces: tuple = (), parts: dict | None = None,
                 files: dict | None = None, generation: tuple = (), task: str | None = None,
                 source: str | None = None, optimization: dict | None = None):
        values = dict(model=model, program=program, module=module, example=example, captured=captured,
                      timings=dict(timings or {}), dim_names=dict(dim_names or {}),
                      rewrite_notes=list(rewrite_notes or []), config=config, validation=validation,
                      decomposed=dict(decomposed or {"local": [], "whole_program": []}), quantization=quantization,
                      weights=weights, pieces=tuple(pieces), parts=dict(parts or {}), files=dict(files or {}),
                      generation=tuple(generation), task=task, source=source,
                      optimization=dict(optimization or {}))
        if model is None and not values["parts"]:
            raise TypeError("ExportResult needs a model, or parts")
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
        if self.parts:
            return [g for part in self.parts.values() for g in part.guards]
        return list(getattr(self.captured, "guards", None) or [])

    @property
    def constraints(self) -> list:
        """The conditions adopted as constraints of the export (``time % 4 == 0``, ``time >= 5``):
        the model is exported and validated for sizes that satisfy them."""
        return adopted_of(self.guards)

    @property
    def ok(self) -> bool:
        """Every check the export ran passed: its validation, every part's, every decoding check
        (True when none ran)."""
        return (getattr(self.validation, "ok", True) and all(p.ok for p in self.parts.values())
                and all(g.ok for _, g in self.generation))

    def _one_model(self, what: str) -> None:
        """``ExportError`` when this result holds several models (``parts``) and ``what`` needs one."""
        if self.model is None:
            raise ExportError(f"{what} needs one model, and this result holds {len(self.parts)}: "
                              f"{', '.join(self.parts)}", hint="use one of them: result.parts[name]")

    @property
    def model_proto(self) -> onnx.ModelProto:
        """The model as an ``onnx.ModelProto`` (serialized once, cached); ``ExportError`` for a result
        of several models (``parts``)."""
        self._one_model("model_proto")
        if self._proto is None:
            object.__setattr__(self, "_proto", ir.serde.serialize_model(self.model))
        return self._proto

    def weights_bytes(self) -> int:
        """Bytes of the initializers' data (of every part's, for a result of ``parts``)."""
        if self.model is None:
            return sum(p.weights_bytes() for p in self.parts.values())
        return sum(v.const_value.nbytes for v in self.model.graph.initializers.values() if v.const_value is not None)

    def needs_external_data(self) -> bool:
        """True when the model serialized as one protobuf message would exceed
        ``external_data_threshold`` bytes (protobuf's limit, 2 GiB - 1): its size counts the
        weights, the graph, the local functions and the names (``onnxport.saving.serialized_size``);
        for a result of ``parts``, True when one of them would."""
        if self.model is None:
            return any(p.needs_external_data() for p in self.parts.values())
        return needs_external_data(self.model, self.external_data_threshold)

    def save(self, path: str | os.PathLike, *, external_data: bool | None = None) -> str | list[str]:
        """Write the model to ``path``; returns the path.

        A result of ``parts`` saves as a directory: ``path`` is the directory (created, with its
        parents), each part written as ``<name>.onnx`` as below, then ``files`` beside them (each
        replaced whole, ``onnxport.saving.write_file``); returns the paths written, in that order.

        Weights go to ``<path>.<token>.data`` (a name new to each save) beside it when ``external_data``
        is True, or when None and the serialized model would exceed ``external_data_threshold`` bytes (protobuf's
        2 GiB limit). The ``.onnx`` file and its data change together: a failed or interrupted save
        leaves the previous model readable as it was (``onnxport.saving``). Data files of an earlier
        save at ``path`` that the new model does not read are removed.

        A model exported from its checkpoint (``weights`` set) saves its weights as external data
        by default, read from the checkpoint and written one tensor at a time.

        Raises ``SaveError`` when the directory does not exist (it is not created), ``path`` is
        a directory, or writing fails; nothing new is then left beside ``path``.
        """
        if self.model is None:
            return self._save_directory(os.fspath(path), external_data)
        if external_data is None:
            external_data = self.weights is not None or self.needs_external_data()
        return save_model(self.model, path, external_data)

    def _save_directory(self, directory: str, external_data: bool | None) -> list[str]:
        """``save`` of a result of ``parts``: the directory, the models, then ``files``."""
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise SaveError(f"{directory} is a file: a result of several models saves as a directory")
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as e:
            raise SaveError(f"cannot create the directory {directory}: {e}") from e
        paths = [part.save(os.path.join(directory, f"{name}.onnx"), external_data=external_data)
                 for name, part in self.parts.items()]
        for name, content in self.files.items():
            target = os.path.join(directory, name)
            if isinstance(content, dict):
                paths.append(write_file(target, lambda f, c=content: f.write(json.dumps(c, indent=4).encode())))
            elif os.path.abspath(content) != os.path.abspath(target):
                paths.append(write_file(target, lambda f, source=content: _copy(source, f)))
        return paths

    def quantize(self, mode: str, **options: Any) -> "ExportResult":
        """A new result with the model quantized (``"int8"``, ``"int8-static"``, ``"int4"``), the
        embeddings, the final projection and ``keep_float`` layers left in float; this result is
        unchanged. Options and errors: ``onnxport.quantize.quantize`` (``ExportError`` for a result
        of several models: quantize each of ``parts``)."""
        from onnxport.quantize import quantize

        self._one_model("quantize")

        return quantize(self, mode, **options)

    @property
    def target(self) -> str:
        """The runtime target the model was rewritten for (``to_onnx(target=...)``, ``onnxport.targets``):
        ``"onnxruntime"`` (the export as it is), ``"portable"`` or ``"openvino"``, as its metadata
        records it (``onnxport.target``); a result of ``parts``: that of its first part."""
        from onnxport.metadata import TARGET_KEY

        if self.model is None:
            return next(iter(self.parts.values())).target
        return self.model.metadata_props.get(TARGET_KEY, "onnxruntime")

    def validate(self, inputs: Any = None, sizes: Any = None, *, values: Any = None, atol: float | None = None,
                 rtol: float | None = None, load_eager: bool = False, runtime: str | None = None):
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
        not compared.

        A result of ``parts`` validates each part at its own default sizes (the arguments passed to
        each) and returns one ``ValidationReport`` whose rows say which part (``decoder: sizes 2``).

        ``runtime`` runs the ONNX model (``onnxport.verify.runtimes``): ``"onnxruntime"``,
        ``"openvino"`` (CPU, float32 forced; ``pip install onnxport[openvino]``) or ``"reference"``
        (``onnx.reference.ReferenceEvaluator``); default: the runtime of the result's ``target``
        (OpenVINO for ``target="openvino"``, onnxruntime otherwise). A runtime computing the model
        wrongly fails the validation, the report naming it. A model of target ``genai-cpu`` whose
        attention is ``GroupQueryAttention`` is compared at that target's ``check_sizes`` instead of
        the example, the default sizes and value kinds (the operator refuses the example), on inputs
        fed as onnxruntime-genai feeds them (``Target.check_inputs``). The
        quantized and checkpoint-only checks run in onnxruntime only (``ValidationError`` for another runtime)."""
        from onnxport.targets import target

        chosen = target(self.target)
        runtime = chosen.runtime if runtime is None else runtime
        if self.model is None:
            from onnxport.verify import ValidationReport

            reports = [(name, part.validate(inputs, sizes, values=values, atol=atol, rtol=rtol, load_eager=load_eager,
                                            runtime=runtime)) for name, part in self.parts.items()]
            return ValidationReport(tuple(dataclasses.replace(c, inputs=f"{name}: {c.inputs}")
                                          for name, report in reports for c in report.checks),
                                    runtime=reports[0][1].runtime if reports else "onnxruntime")
        eager_less = self.weights is not None and not load_eager
        if runtime != "onnxruntime" and (self.quantization is not None or eager_less):
            raise ValidationError(f"the {'quantized' if self.quantization is not None else 'checkpoint-only'} "
                                  f"validation runs in onnxruntime only, not {runtime}",
                                  hint="validate(runtime='onnxruntime')" + ("" if self.quantization is not None else
                                                                             ", or load_eager=True"))
        if self.weights is not None and self.module is not None and on_meta(self.module):
            if not load_eager:
                from onnxport.verify.weightless import check_without_eager

                return check_without_eager(self, sizes=sizes, inputs=inputs)
            return self.replace(module=materialize(self.module, self.weights)).validate(
                inputs, sizes, values=values, atol=atol, rtol=rtol, runtime=runtime)
        check = chosen.check_sizes
        fixed = check(self.model) if check is not None and sizes is None else None
        made = chosen.check_inputs(self, fixed) if fixed and chosen.check_inputs is not None else []
        if made:  # the check's sets made as the target's runtime feeds the model (Target.check_inputs)
            inputs, fixed = list(inputs or []) + made, []
        if self.quantization is not None:
            from onnxport.verify.accuracy import validate_quantized

            return validate_quantized(self, inputs=inputs, sizes=fixed if fixed is not None else sizes,
                                      include_example=fixed is None)
        if self.pieces:
            from onnxport.verify.pieces import validate_pieces

            return validate_pieces(self, inputs=inputs, sizes=sizes, values=values, atol=atol, rtol=rtol,
                                   runtime=runtime)
        from onnxport.verify import validate

        if fixed is not None:  # a runtime form refusing the example's sizes (targets.genai_cpu.check_sizes)
            return validate(self, inputs=inputs, sizes=fixed, values=[], atol=atol, rtol=rtol, runtime=runtime,
                            include_example=False)
        return validate(self, inputs=inputs, sizes=sizes, values=values, atol=atol, rtol=rtol, runtime=runtime)

    def check_generation(self, model: Any, prompt_ids: Any = None, *, attention_mask: Any = None,
                         max_new_tokens: int = 16, atol: float | None = None, rtol: float | None = None,
                         encoder_inputs: dict | None = None):
        """Greedy decoding with this model (a decoder exported with its cache as inputs and outputs)
        in onnxruntime against ``model``'s own greedy ``generate``, step by step: the ``present.*``
        outputs are fed back as ``past_key_values.*``.

        For an encoder-decoder (``parts`` ``encoder`` and ``decoder``, or ``encoder_model`` and
        ``decoder_model``): the encoder once on ``encoder_inputs``, then greedy decoding with the
        decoder, against ``model.generate(**encoder_inputs)``. A result of one part checks that part.

        Args:
            model: the transformers model the decoder was exported from (eval mode).
            prompt_ids: int64 ``[batch, prompt]``; for an encoder-decoder, its encoder inputs may be
                given here instead of ``encoder_inputs``.
            attention_mask: ``[batch, prompt]``, 0 on (left) padding; ones when None.
            max_new_tokens: tokens to generate.
            atol, rtol: tolerance of the logits (default 1e-3 each).
            encoder_inputs: an encoder-decoder's encoder inputs by name, as ``generate`` takes them
                (``input_ids`` and ``attention_mask``, or ``input_features``).

        A quantized result reports greedy-token agreement instead (``GenerationAgreement``: each
        step fed eager's tokens so far, the fraction of steps choosing eager's token, judged by
        ``quantization.tolerance.tokens``, and the first step where free decoding diverges).

        Returns a ``GenerationReport`` (``.ok``, ``.first_difference``, printable); see
        ``onnxport.verify.generation.check_generation``, which raises ``ValidationError`` when the
        decoder's inputs are not a decoder's (input_ids, past_key_values.*) or generate fails;
        ``ExportError`` for a result of other parts.
        """
        from onnxport.verify.generation import LOGITS_ATOL, LOGITS_RTOL, check_generation

        if self.model is None:
            roles = {name.removesuffix("_model"): part for name, part in self.parts.items()}
            if len(self.parts) == 1:
                return next(iter(self.parts.values())).check_generation(
                    model, prompt_ids, attention_mask=attention_mask, max_new_tokens=max_new_tokens, atol=atol,
                    rtol=rtol)
            if set(roles) != {"encoder", "decoder"}:
                self._one_model("check_generation")
            return check_generation(model, roles["decoder"].model_proto, encoder=roles["encoder"].model_proto,
                                    encoder_inputs=encoder_inputs if encoder_inputs is not None else prompt_ids,
                                    max_new_tokens=max_new_tokens, atol=LOGITS_ATOL if atol is None else atol,
                                    rtol=LOGITS_RTOL if rtol is None else rtol)
        if self.quantization is not None:
            from onnxport.verify.accuracy import generation_agreement

            return generation_agreement(model, self.model_proto, prompt_ids, attention_mask=attention_mask,
                                        max_new_tokens=max_new_tokens, tolerance=self.quantization.tolerance.tokens)
        return check_generation(model, self.model_proto, prompt_ids, attention_mask=attention_mask,
                                max_new_tokens=max_new_tokens, atol=LOGITS_ATOL if atol is None else atol,
                                rtol=LOGITS_RTOL if rtol is None else rtol)

    def validate_stream(self, states: Any, initial: Any = None, *, chunks: list | None = None, make_step: Any = None,
                        steps: int = 6, batches: Any = None, chunk_lengths: Any = None, model: Any = None,
                        atol: float | None = None, rtol: float | None = None, **dims: Any):
        """Run this model as a stream in onnxruntime, chunk after chunk from ``initial``, the outputs
        named in ``states`` fed back as the inputs they name (``{"cache_out": "cache_in"}``), against
        eager PyTorch (``model``, default this result's module) doing the same with its own states;
        every output of every step compared as ``validate`` compares one, at two batch sizes and two
        chunk lengths where those dims are dynamic. ``dims``: ``batch_dim``, ``chunk_dim``.

        Returns a ``StreamReport`` (``.ok``, a table of per-step errors); raises ``ValidationError``
        when the arguments do not describe a stream of this model (an unknown state name, a state
        output whose shape cannot feed its input...) and ``ExportError`` for a result of several
        models (check each of ``parts``). See ``onnxport.verify.stream.check_stream``."""
        from onnxport.verify.stream import check_stream

        self._one_model("validate_stream")
        return check_stream(self, model, states=states, initial=initial, chunks=chunks, make_step=make_step,
                            steps=steps, batches=batches, chunk_lengths=chunk_lengths, atol=atol, rtol=rtol, **dims)

    def pretty(self, **kwargs) -> str:
        """Compact text rendering (``onnxport.pretty_onnx``); ``ExportError`` for a result of ``parts``."""
        from onnxport.show.pretty import pretty_onnx

        self._one_model("pretty")

        return pretty_onnx(self, **kwargs)

    def plot(self, path: str | None = None, format: str = "png") -> str:
        """Graphviz DOT text, rendered to ``path`` when given (``onnxport.plot_dot``); ``ExportError``
        for a result of ``parts``."""
        from onnxport.show.dot import plot_dot

        self._one_model("plot")

        return plot_dot(self, path=path, format=format)

    def report(self, path: str | os.PathLike, *, validate: bool = False, title: str | None = None) -> str:
        """Write an HTML report of what the export decided to ``path``; returns its absolute path.

        One self-contained page (inline CSS and SVG; it loads nothing): the graph drawn by graphviz
        (subgraphs and local functions in collapsible sections), the inputs and outputs with their
        dim names, the constraints adopted with your line, the capture steps (applied, or skipped
        and why), the optimizer's node counts before and after, and the validation table
        (``validation``; with ``validate=True`` and none yet, ``validate()`` runs first, else the
        page says it was not run). A result of ``parts`` has these once per model. See
        ``onnxport.show.report_html``.

        The file is replaced whole (``onnxport.saving.write_file``): a failed write leaves the
        previous one. Drawing the graph needs graphviz's ``dot``; without it the page says so.
        Raises ``SaveError`` when the file cannot be written, ``ValidationError`` when
        ``validate=True`` and validation cannot run.
        """
        from onnxport.show.report_html import result_html

        result = self
        if validate and self.validation is None and not self.parts:
            result = self.replace(validation=self.validate())
        elif validate and self.parts and any(p.validation is None for p in self.parts.values()):
            result = self.replace(parts={n: p if p.validation is not None else p.replace(validation=p.validate())
                                         for n, p in self.parts.items()})
        text = result_html(result, title=title or "onnxport export report").encode("utf-8")
        return write_file(os.fspath(path), lambda f: f.write(text))

    def count_nodes(self, recursive: bool = True) -> int:
        """Nodes in the main graph (and in subgraphs and local functions when ``recursive``); of every
        part's, for a result of ``parts``."""
        if self.model is None:
            return sum(p.count_nodes(recursive) for p in self.parts.values())
        n = 0
        for node in ir.traversal.RecursiveGraphIterator(self.model.graph) if recursive else self.model.graph:
            n += 1
        if recursive:
            for f in self.model.functions.values():
                n += sum(1 for _ in ir.traversal.RecursiveGraphIterator(f))
        return n

    @property
    def float32_compute(self) -> list[str]:
        """The bfloat16 operator types this model computes in float32 between Casts, where
        onnxruntime's CPU provider has no bfloat16 kernel (``onnxport.optimize.bfloat16``); empty
        when none does (read from the model's metadata, so a loaded model says it too)."""
        if self.model is None:
            return []
        text = self.model.metadata_props.get(FLOAT32_COMPUTE_KEY, "")
        return [t for t in text.split(", ") if t]

    def __repr__(self) -> str:
        if self.model is None:
            task = f", task={self.task!r}" if self.task else ""
            return (f"ExportResult(parts={{{', '.join(f'{n}: {p!r}' for n, p in self.parts.items())}}}{task}, "
                    f"files=[{', '.join(self.files)}])")
        g = self.model.graph

        def sig(v: ir.Value) -> str:
            dt = v.dtype.name.lower() if v.dtype is not None else "?"
            dims = ", ".join(str(d) for d in v.shape) if v.shape is not None else "?"
            return f"{v.name}: {dt}[{dims}]"

        opset = self.model.opset_imports.get("", None)
        constraints = f", constraints=[{'; '.join(str(c) for c in self.constraints)}]" if self.constraints else ""
        quantized = f", quantized={self.quantization.mode}" if self.quantization is not None else ""
        widened = f", float32_compute=[{', '.join(self.float32_compute)}]" if self.float32_compute else ""
        return (f"ExportResult(inputs=[{'; '.join(sig(v) for v in g.inputs)}], "
                f"outputs=[{'; '.join(sig(v) for v in g.outputs)}], nodes={self.count_nodes()}, "
                f"functions={len(self.model.functions)}, opset={opset}{constraints}{quantized}{widened})")

    def __str__(self) -> str:
        """``repr`` for one model; for a result of ``parts`` or with decoding checks, a summary:
        the task and source, each model, each part's validation table and each decoding check."""
        if self.model is not None and not self.generation:
            return repr(self)
        lines = [f"{self.task} from {self.source}"] if self.task else []
        parts = self.parts or {"model": self}
        for name, part in parts.items():
            lines.append(f"{name}.onnx: {part!r}")
        for name, part in parts.items():
            if part.validation is not None:
                lines += [f"\nvalidation of {name}.onnx:", str(part.validation)]
        for label, report in self.generation:
            lines += [f"\ngreedy decoding, {label}:", str(report)]
        return "\n".join(lines)

    # ---------------------------------------------------------------------------- deprecated names
    def _deprecated(self, old: str, new: str) -> None:
        warnings.warn(f"ExportResult.{old} is deprecated: use result.{new}", DeprecationWarning, stacklevel=3)

    @property
    def encoder(self) -> "ExportResult":
        """Deprecated: ``parts["encoder"]`` (the result of ``export_encoder_decoder``)."""
        self._deprecated("encoder", 'parts["encoder"]')
        return self.parts["encoder"]

    @property
    def decoder(self) -> "ExportResult":
        """Deprecated: ``parts["decoder"]`` (the result of ``export_encoder_decoder``)."""
        self._deprecated("decoder", 'parts["decoder"]')
        return self.parts["decoder"]

    @property
    def models(self) -> dict:
        """Deprecated: ``parts`` (the models of ``export_pretrained``, by file stem)."""
        self._deprecated("models", "parts")
        return dict(self.parts)

    @property
    def genai_config(self) -> dict | None:
        """Deprecated: ``files["genai_config.json"]`` (``export_pretrained`` of a decoder)."""
        self._deprecated("genai_config", 'files["genai_config.json"]')
        return self.files.get("genai_config.json")


def _copy(source: str, f: Any) -> None:
    with open(source, "rb") as src:
        shutil.copyfileobj(src, f)
