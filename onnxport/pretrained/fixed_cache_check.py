"""The check of a fixed-buffer cache decoder (``onnxport.pretrained.fixed_cache``) against eager PyTorch
at other sizes: one decoding step of the transformers model (``CausalLMWithCache``, a ``DynamicCache`` of
``past`` tokens the model filled itself) against the ONNX model fed the same cache at the start of buffers
of ``max_length`` = past + new + ``SPARE``, the rest of each buffer random values the step must neither read
nor write.

Compared: ``logits``, and each ``present.<i>.*``: its first past + new positions against eager's grown
cache, the rest unchanged (exactly). The sets: the example's (2 rows, 5 cached, 3 new), one row (1
cached, 4 new), a decoding step on 3 rows whose second is left-padded by 2 (7 cached,
1 new), several new tokens after a padded past (2 rows, 2 cached, 2 new). A first prompt (nothing
cached) is the decoding checks' first step.
"""

from __future__ import annotations

import numpy as np
import torch

from onnxport.verify.compare import compare
from onnxport.verify.report import Check, ValidationReport
from onnxport.verify.runner import OrtRunner

SPARE = 3  # buffer positions past the step's last, filled with random values
SETS = (("example", 2, 5, 3, 0), ("one row", 1, 1, 4, 0), ("padded step", 3, 7, 1, 2),
        ("padded past", 2, 2, 2, 1))  # (label, batch, past, new, left padding of the second row)


def _eager_step(model: torch.nn.Module, batch: int, past: int, new: int, pad: int, seed: int):
    from onnxport.pretrained.decoder import CausalLMWithCache, example_step

    inputs, _ = example_step(model, batch, past, new, seed=seed)
    if pad:
        inputs["attention_mask"][1, :pad] = 0
    cache = inputs["past_key_values"]
    before = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
    with torch.no_grad():
        out = CausalLMWithCache(model).eval()(**inputs)
    grown = [(layer.keys, layer.values) for layer in out["present"].layers]
    return inputs, before, out["logits"], grown


def check_fixed_cache(model_proto, model: torch.nn.Module) -> ValidationReport:
    """Compare the fixed-buffer decoder ``model_proto`` (an ``onnx.ModelProto``) with ``model`` (the
    transformers ``*ForCausalLM`` it was exported from, eval mode) at ``SETS`` (module docstring), in
    onnxruntime. Returns a ``ValidationReport`` (one ``Check`` per output and set)."""
    runner = OrtRunner(model_proto)
    names = runner.input_names
    gen = np.random.default_rng(0)
    checks = []
    for seed, (label, batch, past, new, pad) in enumerate(SETS):
        inputs, before, logits, grown = _eager_step(model, batch, past, new, pad, seed)
        total, length = past + new, past + new + SPARE
        feed = {n: inputs[n].numpy() for n in ("input_ids", "attention_mask", "position_ids") if n in names}
        buffers = {}
        for i, (k, v) in enumerate(before):
            for kind, t in (("key", k), ("value", v)):
                buffer = gen.standard_normal((t.shape[0], t.shape[1], length, t.shape[3])).astype(np.float32)
                buffer[:, :, :past] = t.numpy()
                buffers[f"past_key_values.{i}.{kind}"] = buffer
        out = dict(zip(runner.output_names, runner.session.run(None, {**feed, **buffers})))
        sizes = f"batch={batch}, past={past}, new={new}, max_length={length}" + (f", row 1 padded by {pad}"
                                                                                  if pad else "")
        expected = {"logits": logits}
        for i, (k, v) in enumerate(grown):
            expected[f"present.{i}.key"], expected[f"present.{i}.value"] = k, v
        for name, want in expected.items():
            got = out[name]
            if name == "logits":
                max_abs, max_rel, ok, note = compare(want.numpy(), got, want.dtype)
            else:
                max_abs, max_rel, ok, note = compare(want.numpy(), got[:, :, :total], want.dtype)
                past_name = "past_key_values" + name[len("present"):]
                if ok and not np.array_equal(got[:, :, total:], buffers[past_name][:, :, total:]):
                    ok, note = False, f"positions {total}.. of the buffer were written"
            checks.append(Check(label, sizes, name, tuple(got.shape), max_abs, max_rel, ok, note,
                                why="fixed-buffer cache step"))
    return ValidationReport(tuple(checks))
