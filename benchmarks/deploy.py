"""Deployed speed: onnxruntime latency of BERT, ViT, a Llama prefill and a Llama decoding step with
its cache, exported by torch.onnx (fp32), by onnxport (fp32, int8, int4, fused for onnxruntime) and
by transformers' own exporter (``transformers.exporters``: its onnxruntime fusions and its
onnxruntime quantizer), with ratios to torch.onnx fp32 and each quantized model's accuracy; then
the accuracy of each quantization mode on the tiny trained models of ``benchmarks/trained.py``.

Models: transformers' own classes from configs in code, seeded random weights (no download):
BERT and ViT 4 layers of width 768 (12 heads, 3072 inner; sequence 128, image 224 in 16x16
patches), Llama 4 layers of width 1024 (16 heads, 4 key/value heads, 2816 inner, 8192 tokens);
batch 1. The Llama is exported once with its cache as inputs and outputs; the prefill runs 128
tokens on an empty cache, the decoding step 1 token on a 128-token cache. torch.onnx's Llama comes
through ``transformers.exporters`` (``OnnxConfig(dynamic=True)``: ``torch.onnx.export(dynamo=True)``
with transformers' patches), which takes the cache as transformers flattens it.

Timing: every session warmed up (5 runs), then ``--rounds`` rounds; in each round the variants run
in a rotated order, each for ``--runs`` runs, and the round's mean per run is recorded. The table
gives the median over rounds and the spread (min-max over rounds), for one onnxruntime thread and
for all threads (intra-op = cores). The machine's load average is printed before and after.

Accuracy against eager PyTorch's float32 output on the timing inputs: cosine similarity (mean over
rows of the last axis) of hidden states (BERT, ViT), top-1 agreement of the logits (Llama; random
weights make nearly flat logits, so the trained models' table is the one that speaks for agreement).

    python benchmarks/deploy.py [--models bert,vit,llama] [--rounds 7] [--runs 10] [--markdown DEPLOY.md]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import onnxport  # noqa: E402

CORES = os.cpu_count() or 1


# ------------------------------------------------------------------------------------ models
def bert():
    import transformers

    cfg = transformers.BertConfig(hidden_size=768, num_hidden_layers=4, num_attention_heads=12,
                                  intermediate_size=3072, max_position_embeddings=512)
    model = transformers.BertModel(cfg, add_pooling_layer=False).eval()
    ids = torch.randint(1000, 20000, (1, 128))
    return model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}, \
        {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}


def vit():
    import transformers

    cfg = transformers.ViTConfig(hidden_size=768, num_hidden_layers=4, num_attention_heads=12,
                                 intermediate_size=3072, image_size=224, patch_size=16)
    model = transformers.ViTModel(cfg, add_pooling_layer=False).eval()
    return model, {"pixel_values": torch.randn(1, 3, 224, 224)}, {"pixel_values": {0: "batch"}}


def llama_model():
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=8192, hidden_size=1024, num_hidden_layers=4, num_attention_heads=16,
                                   num_key_value_heads=4, intermediate_size=2816, max_position_embeddings=1024)
    return transformers.LlamaForCausalLM(cfg).eval()


# ------------------------------------------------------------------------------------ exports
def torch_onnx(model, kwargs, dims) -> ir.Model:
    made = {}
    spec = {k: {a: made.setdefault(n, torch.export.Dim(n, max=1024)) for a, n in v.items()} for k, v in dims.items()}
    return torch.onnx.export(model, (), kwargs=kwargs, dynamo=True, dynamic_shapes=spec, optimize=True,
                             verbose=False).model


def hf_export(model, kwargs, **config) -> ir.Model:
    from transformers.exporters import OnnxConfig, OnnxExporter

    with _transformers_cache_nodes():
        return OnnxExporter().export(model, kwargs, config=OnnxConfig(dynamic=True, **config)).program


@contextlib.contextmanager
def _transformers_cache_nodes():
    """transformers' exporter flattens its cache classes its own way (and serializes that into its
    metadata): onnxport's pytree registration of them is lifted while it runs and made again after."""
    from torch.utils import _pytree as pytree

    from onnxport.capture import caches

    lifted = [c for c in list(caches._REGISTERED) if c in pytree.SUPPORTED_NODES]
    for cls in lifted:
        pytree._deregister_pytree_node(cls)
        caches._REGISTERED.discard(cls)
    try:
        yield
    finally:
        for cls in lifted:
            if cls in pytree.SUPPORTED_NODES:
                pytree._deregister_pytree_node(cls)
        caches.register_caches()


def hf_quantizer():
    from transformers.exporters import OnnxRuntimeDynamicConfig, OnnxRuntimeQuantizer

    return OnnxRuntimeQuantizer(OnnxRuntimeDynamicConfig(per_channel=True))


def fused(result) -> ir.Model:
    from onnxscript.rewriter import ort_fusions

    copied = onnx.ModelProto()
    copied.CopyFrom(result.model_proto)  # the fusions change the tensors of the proto they are given
    model, _ = ort_fusions.optimize_for_ort(ir.serde.deserialize_model(copied))
    return model


def _proto(model):
    return model.model_proto if hasattr(model, "model_proto") else ir.serde.serialize_model(model)


# ------------------------------------------------------------------------------------ feeds
_CACHE = re.compile(r"past_key_values\.(?:layers\.)?(\d+)\.(key|value)s?$")


def feeds_for(session, inputs: dict, cache: list | None) -> dict:
    """The session's feed from canonical inputs (input_ids, attention_mask, position_ids...) and
    the cache as ``[(key, value)]`` per layer, whatever each exporter names them."""
    out = {}
    for i in session.get_inputs():
        m = _CACHE.match(i.name)
        if m:
            out[i.name] = cache[int(m.group(1))][0 if m.group(2) == "key" else 1]
        else:
            out[i.name] = inputs[i.name]
    return out


def session(proto, threads: int) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])


# ------------------------------------------------------------------------------------ timing
def time_variants(runs: dict, rounds: int, per_round: int) -> dict:
    """``name -> (median ms, min ms, max ms)`` over rounds; ``runs``: name -> callable."""
    for fn in runs.values():
        for _ in range(5):
            fn()
    names = list(runs)
    samples = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            t0 = time.perf_counter()
            for _ in range(per_round):
                runs[n]()
            samples[n].append((time.perf_counter() - t0) / per_round * 1e3)
    return {n: (statistics.median(s), min(s), max(s)) for n, s in samples.items()}


def accuracy(kind: str, want: np.ndarray, got: np.ndarray) -> str:
    from onnxport.verify.accuracy import cosine_rows

    if kind == "classes":
        agree = (want.reshape(-1, want.shape[-1]).argmax(-1) == got.reshape(-1, want.shape[-1]).argmax(-1)).mean()
        return f"top-1 {agree:.4f}"
    return f"cosine {cosine_rows(want, got).mean():.5f}"


# ------------------------------------------------------------------------------------ cases
def encoder_case(name, build, args):
    model, kwargs, dims = build()
    with torch.no_grad():
        want = model(**kwargs)[0].numpy()
    result = onnxport.to_onnx(model, kwargs=kwargs, dynamic_shapes=dims)
    variants = {"torch.onnx fp32": torch_onnx(model, kwargs, dims), "onnxport fp32": result}
    variants["onnxport int8"] = result.quantize("int8")
    variants["onnxport int4"] = result.quantize("int4")
    variants["onnxport fused"] = fused(result)
    variants["transformers fused"] = hf_export(model, kwargs, ort_fusions="cpu")
    variants["transformers int8"] = hf_export(model, kwargs, quantizer=hf_quantizer())
    inputs = {k: v.numpy() for k, v in kwargs.items()}
    return [(name, variants, inputs, None, want, "hidden")]


def llama_cases(args):
    from transformers import DynamicCache

    torch.manual_seed(0)
    model = llama_model()
    cfg = model.config
    past, seq = 128, 128
    prompt = torch.randint(3, cfg.vocab_size, (1, past + 1))
    cache = DynamicCache(config=cfg)
    with torch.no_grad():
        first = model(input_ids=prompt[:, :past], past_key_values=cache, use_cache=True)
    filled = [(layer.keys.numpy().copy(), layer.values.numpy().copy()) for layer in cache.layers]
    kwargs = dict(input_ids=prompt[:, past:], attention_mask=torch.ones(1, past + 1, dtype=torch.int64),
                  position_ids=torch.tensor([[past]]), past_key_values=cache, use_cache=True)
    with torch.no_grad():
        step = model(**{k: v for k, v in kwargs.items() if k != "past_key_values"},
                     past_key_values=_cache_of(cfg, filled))
    dims = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
            "position_ids": {0: "batch", 1: "seq"}, "past_key_values": {0: "batch", 2: "past"}}
    # onnxport's example: 3 new tokens on a 125-token cache (an example of 1 new token would make
    # transformers' is_causal = (seq > 1) a condition on the size; the export holds for every size)
    short = DynamicCache(config=cfg)
    with torch.no_grad():
        model(input_ids=prompt[:, :past - 3], past_key_values=short, use_cache=True)
    example = dict(input_ids=prompt[:, past - 3:past], attention_mask=torch.ones(1, past, dtype=torch.int64),
                   position_ids=torch.arange(past - 3, past)[None], past_key_values=short, use_cache=True)
    # 125 cached tokens, taken before anything runs the model on the example
    short_cache = [(layer.keys.numpy().copy(), layer.values.numpy().copy()) for layer in short.layers]
    result = onnxport.to_onnx(model, kwargs=example, dynamic_shapes=dims, relations={"total": "past + seq"})
    # transformers' exporter too from 3 new tokens (from 1, its dynamic=True keeps seq at 1)
    hf_kwargs = dict(input_ids=prompt[:, past - 3:past], attention_mask=torch.ones(1, past, dtype=torch.int64),
                     past_key_values=_cache_of(cfg, short_cache), use_cache=True)
    variants = {"torch.onnx fp32": hf_export(model, hf_kwargs), "onnxport fp32": result,
                "onnxport int8": result.quantize("int8"), "onnxport int4": result.quantize("int4"),
                "onnxport fused": fused(result),
                "transformers fused": hf_export(model, {**hf_kwargs, "past_key_values": _cache_of(cfg, short_cache)},
                                                ort_fusions="cpu"),
                "transformers int8": hf_export(model, {**hf_kwargs, "past_key_values": _cache_of(cfg, short_cache)},
                                               quantizer=hf_quantizer())}
    heads, head_dim = cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads
    empty = [(np.zeros((1, heads, 0, head_dim), np.float32),) * 2 for _ in range(cfg.num_hidden_layers)]
    prefill_inputs = {"input_ids": prompt[:, :seq].numpy(), "attention_mask": np.ones((1, seq), np.int64),
                      "position_ids": np.arange(seq)[None]}
    step_inputs = {"input_ids": prompt[:, past:].numpy(), "attention_mask": np.ones((1, past + 1), np.int64),
                   "position_ids": np.array([[past]])}
    return [("Llama prefill", variants, prefill_inputs, empty, first.logits.numpy(), "classes"),
            ("Llama decoding step", variants, step_inputs, filled, step.logits.numpy(), "classes")]


def _cache_of(cfg, tensors):
    from transformers import DynamicCache

    cache = DynamicCache(config=cfg)
    for i, (k, v) in enumerate(tensors):
        cache.update(torch.from_numpy(k.copy()), torch.from_numpy(v.copy()), i)
    return cache


# ------------------------------------------------------------------------------------ trained models
def trained_accuracy() -> list[tuple[str, str, str]]:
    """``(model, mode, figure)`` for each quantization mode on the tiny trained CNN and Llama."""
    import trained
    from transformers import DynamicCache

    rows = []
    cnn = trained.shapes_cnn()
    images, _ = trained.shapes_data(512, seed=7)
    r = onnxport.to_onnx(cnn, (images[:8],), dynamic_shapes={"x": {0: "batch"}})
    for mode in ("int8", "int8-static", "int4"):
        calib = [(images[i:i + 32],) for i in range(256, 512, 32)] if mode == "int8-static" else None
        report = r.quantize(mode, calibration_inputs=calib).validate(inputs=[(images[:256],)], sizes=[])
        s = report.summary()["output"]
        rows.append(("CNN (shapes), 256 held-out images", mode, f"top-1 {s['top1']:.4f}, cosine {s['cosine']:.5f}"))
    model = trained.text_llama()
    ids = torch.tensor([trained.encode(trained.TEXT[:8])] * 2)
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=ids[:, :5], past_key_values=cache, use_cache=True)
    kwargs = dict(input_ids=ids[:, 5:], attention_mask=torch.ones(2, 8, dtype=torch.int64),
                  position_ids=torch.arange(5, 8).expand(2, 3), past_key_values=cache, use_cache=True)
    dims = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
            "position_ids": {0: "batch", 1: "seq"}, "past_key_values": {0: "batch", 2: "past"}}
    r = onnxport.to_onnx(model, kwargs=kwargs, dynamic_shapes=dims, relations={"total": "past + seq"})
    starts = ["the quick b", "all that gl", "knowledge i", "time flies ", "to be or no", "the early b"]
    prompts = torch.tensor([trained.encode(s) for s in starts])
    windows = _text_windows(trained, model.config)
    for mode in ("int8", "int8-static", "int4"):
        q = r.quantize(mode, calibration_inputs=windows if mode == "int8-static" else None)
        g = q.check_generation(model, prompts, max_new_tokens=32)
        rows.append((f"Llama (text), {len(starts)} prompts x 32 tokens", mode,
                     f"greedy agreement {g.agreement:.4f}, first divergence "
                     f"{'none' if g.first_divergence is None else g.first_divergence}"))
    return rows


def _text_windows(trained, cfg, count=8, length=32):
    data = torch.tensor(trained.encode(trained.TEXT))
    heads, head_dim = cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads
    sets = []
    for i in range(count):
        ids = torch.stack([data[11 * i + 40 * j: 11 * i + 40 * j + length] for j in range(2)])
        empty = [(np.zeros((2, heads, 0, head_dim), np.float32),) * 2 for _ in range(cfg.num_hidden_layers)]
        sets.append(((), dict(input_ids=ids, attention_mask=torch.ones(2, length, dtype=torch.int64),
                              position_ids=torch.arange(length).expand(2, length),
                              past_key_values=_cache_of(cfg, empty), use_cache=True)))
    return sets


# ------------------------------------------------------------------------------------ main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="bert,vit,llama")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--markdown", help="also write the tables to this file")
    args = parser.parse_args()
    torch.manual_seed(0)
    load_before = os.getloadavg()
    cases = []
    for name in args.models.split(","):
        t0 = time.perf_counter()
        if name == "bert":
            cases += encoder_case("BERT (seq 128)", bert, args)
        elif name == "vit":
            cases += encoder_case("ViT (224x224)", vit, args)
        elif name == "llama":
            cases += llama_cases(args)
        print(f"# exported {name} in {time.perf_counter() - t0:.0f}s", flush=True)
    lines = ["| model | variant | 1 thread ms (min-max) | ratio | "
             f"{CORES} threads ms (min-max) | ratio | accuracy vs eager fp32 |",
             "|---|---|---|---|---|---|---|"]
    for name, variants, inputs, cache, want, kind in cases:
        protos = {v: _proto(m) for v, m in variants.items()}
        timed = {}
        acc = {}
        for threads in (1, CORES):
            sessions = {v: session(p, threads) for v, p in protos.items()}
            feeds = {v: feeds_for(s, inputs, cache) for v, s in sessions.items()}
            for v, s in sessions.items():
                if threads == 1:
                    acc[v] = accuracy(kind, want[:, -inputs["input_ids"].shape[1]:] if kind == "classes" else want,
                                      s.run(None, feeds[v])[0])
            runs = {v: (lambda s=s, f=feeds[v]: s.run(None, f)) for v, s in sessions.items()}
            timed[threads] = time_variants(runs, args.rounds, args.runs)
        base = {t: timed[t]["torch.onnx fp32"][0] for t in timed}
        for v in variants:
            cells = []
            for t in (1, CORES):
                med, lo, hi = timed[t][v]
                cells += [f"{med:.2f} ({lo:.2f}-{hi:.2f})", f"{med / base[t]:.2f}x"]
            lines.append(f"| {name} | {v} | {' | '.join(cells)} | {acc.get(v, '')} |")
        print("\n".join(lines[-len(variants):]), flush=True)
    load_after = os.getloadavg()
    trained_rows = trained_accuracy()
    out = ["## Latency (onnxruntime CPU, batch 1)", "",
           f"{CORES} cores; load average (1, 5, 15 min) before: {', '.join(f'{v:.2f}' for v in load_before)}, "
           f"after: {', '.join(f'{v:.2f}' for v in load_after)}; onnxruntime {ort.__version__}, "
           f"torch {torch.__version__}; {args.rounds} rounds x {args.runs} runs, median over rounds. "
           "Ratios: to torch.onnx fp32 at the same threads.",
           "", *lines, "", "## Accuracy of each mode on the tiny trained models (default tolerance 0.99)", "",
           "| model | mode | accuracy vs eager fp32 |", "|---|---|---|",
           *[f"| {m} | {mode} | {fig} |" for m, mode, fig in trained_rows]]
    print("\n".join(out[-len(trained_rows) - 4:]))
    if args.markdown:
        Path(args.markdown).write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
