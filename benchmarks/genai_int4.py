"""int4 against float decoding in onnxruntime-genai on one thread: a small Qwen2-style decoder (8 layers,
grouped-query attention, hidden 256, tied embeddings) trained for ``--train-steps`` Adam steps (seeded: the
same model on any machine, however loaded) to continue a repeated pattern (``PATTERN``: 24 tokens over
12 ids, cycled; one token does not tell the next, a few do), written by ``save_pretrained``, exported
by ``export_pretrained`` in float and with ``quantize="int4"`` (``onnxport export-hf --quantize int4``).

Prints:

- decode ms/token of each model in onnxruntime-genai (``intra_op_num_threads`` 1 in
  ``genai_config.json``): each round decodes ``--tokens`` tokens greedily after a prompt of the
  text, the first token (the prompt's step) left out; rounds alternate float and int4; the median
  over rounds;
- how well the float model learnt the pattern (its greedy tokens that continue the cycle), and the
  accuracy of int4 against the float model: greedy-token agreement with ``generate`` (each step fed
  the float model's tokens so far) on prompts cut from the cycle, the export's own decoding
  checks and the logits' top-1 agreement and largest error of its validation, and how many tokens
  onnxruntime-genai's free greedy decoding of int4 shares with float's before they diverge.

Run: ``.venv/bin/python benchmarks/genai_int4.py [--train-steps 200] [--rounds 7] [--tokens 64]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import numpy as np
import torch

VOCAB = 1024  # the pattern's ids among many never seen: a lm_head of a realistic shape
PATTERN = [int(v) for v in torch.randint(3, 15, (24,), generator=torch.Generator().manual_seed(7))]


def cycle(start: int, length: int) -> list[int]:
    """``length`` tokens of the repeated ``PATTERN`` from position ``start``."""
    return [PATTERN[(start + i) % len(PATTERN)] for i in range(length)]


TRAIN_STEPS = 200  # this benchmark's training, in steps (a count of seconds would give another model per load)


def train_qwen2(steps: int, seed: int = 0, window: int = 32):
    """A Qwen2ForCausalLM (8 layers, hidden 256, 8 heads, 2 key/value heads, tied embeddings)
    trained by Adam for ``steps`` steps on batches of 8 windows of the cycled ``PATTERN`` (the
    weights and the batches seeded by ``seed``); ``(model, seconds, loss)``."""
    import transformers

    torch.manual_seed(seed)
    cfg = transformers.Qwen2Config(vocab_size=VOCAB, hidden_size=256, intermediate_size=768, num_hidden_layers=8,
                                   num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=512,
                                   tie_word_embeddings=True, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    model = transformers.Qwen2ForCausalLM(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(seed)
    start, loss = time.perf_counter(), float("nan")
    for _ in range(steps):
        starts = torch.randint(0, len(PATTERN), (8,), generator=g)
        batch = torch.tensor([cycle(s, window) for s in starts.tolist()])
        out = model(input_ids=batch, labels=batch)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        loss = float(out.loss.detach())
    return model.eval(), time.perf_counter() - start, loss


def one_thread(directory: str) -> None:
    """Set onnxruntime-genai's decoder session to one intra-op thread."""
    path = os.path.join(directory, "genai_config.json")
    with open(path) as f:
        config = json.load(f)
    config["model"]["decoder"]["session_options"]["intra_op_num_threads"] = 1
    config["model"]["decoder"]["session_options"]["inter_op_num_threads"] = 1
    with open(path, "w") as f:
        json.dump(config, f, indent=2)


def decode(og, model, prompt: list[int], tokens: int) -> tuple[list[int], list[float]]:
    """Greedy decoding of ``tokens`` tokens; ``(tokens, seconds of each step after the first)``."""
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + tokens, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(np.array([prompt], dtype=np.int32))
    out, times = [], []
    while not generator.is_done():
        start = time.perf_counter()
        generator.generate_next_token()
        times.append(time.perf_counter() - start)
        out.append(int(generator.get_next_tokens()[0]))
    return out, times[1:]


def trained_model(steps: int):
    """``train_qwen2(steps)``, its description printed; ``(model, prompts)``, the prompts 8 tokens cut from the
    cycle every 3 positions."""
    model, seconds, loss = train_qwen2(steps)
    print(f"Qwen2-style decoder, 8 layers, hidden 256, 8 heads / 2 key-value heads, vocab {VOCAB}, tied embeddings; "
          f"trained {steps} steps ({seconds:.1f} s), last loss {loss:.3f}")
    return model, [cycle(i, 8) for i in range(0, len(PATTERN), 3)]


def time_decoding(og, models: dict, prompts: list[list[int]], rounds: int, tokens: int) -> dict[str, float]:
    """Decode ms/token of each of ``models`` (name -> ``og.Model``): one warm-up each, then ``rounds`` rounds of
    ``tokens`` tokens, the order of the models reversed every other round; prints each model's median and rounds
    and each model's median over the first model's; returns the medians."""
    for m in models.values():
        decode(og, m, prompts[0], 8)  # warm-up
    timings: dict[str, list[float]] = {name: [] for name in models}
    order = list(models)
    for r in range(rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            _, times = decode(og, models[name], prompts[r % len(prompts)], tokens)
            timings[name].append(1000 * statistics.mean(times))
    med = {name: statistics.median(v) for name, v in timings.items()}
    for name, v in timings.items():
        print(f"decode {name}: median {med[name]:.3f} ms/token over {rounds} rounds of {tokens} tokens "
              f"(rounds: {', '.join(f'{t:.3f}' for t in v)})")
    for name in order[1:]:
        print(f"{name} / {order[0]}: {med[name] / med[order[0]]:.2f}")
    return med


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train-steps", type=int, default=TRAIN_STEPS,
                        help="Adam steps of the model's training (seeded)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()

    import onnxruntime_genai as og

    from onnxport.pretrained import export_pretrained
    from onnxport.verify.accuracy import generation_agreement

    torch.set_num_threads(1)
    model, prompts = trained_model(args.train_steps)
    with tempfile.TemporaryDirectory(prefix="onnxport-genai-int4-") as tmp:
        source = os.path.join(tmp, "qwen2")
        model.save_pretrained(source)
        dirs, results = {}, {}
        for mode in ("float", "int4"):
            start = time.perf_counter()
            result = export_pretrained(source, validate=mode == "int4", generate=16 if mode == "int4" else 0,
                                       quantize=None if mode == "float" else mode)
            dirs[mode] = os.path.join(tmp, mode)
            result.save(dirs[mode])
            one_thread(dirs[mode])
            results[mode] = result
            size = os.path.getsize(os.path.join(dirs[mode], "model.onnx")) + sum(
                os.path.getsize(os.path.join(dirs[mode], f)) for f in os.listdir(dirs[mode]) if f.endswith(".data"))
            print(f"{mode}: exported in {time.perf_counter() - start:.1f} s, {size / 1e6:.1f} MB")
        q = results["int4"].parts["model"]
        print(f"int4: {q.quantization}")
        logits = q.validation.summary()["logits"]
        sizes = len({c.inputs for c in q.validation.checks}) - 1
        print(f"int4 validation against eager float (example and {sizes} other sizes, random tokens): "
              f"logits top-1 agreement {logits['top1']:.4f} (>= {q.validation.top1_min:g}), "
              f"max abs error {logits['max_abs']:.3g}")
        for label, g in results["int4"].generation:
            print(f"int4 export's decoding check, {label} (random prompt tokens): greedy-token agreement "
                  f"{g.agreement:.4f} (>= {g.tolerance:g})")
        agree = [generation_agreement(model, q.model_proto, torch.tensor([p]), max_new_tokens=32) for p in prompts]
        right = [np.mean([t == c for t, c in zip(a.expected[0], cycle(i + 8, 32))])
                 for i, a in zip(range(0, len(PATTERN), 3), agree)]
        print(f"float model's greedy tokens continuing the pattern (8 prompts, 32 tokens): {np.mean(right):.4f}")
        print(f"int4 greedy-token agreement on {len(prompts)} prompts cut from the cycle, 32 tokens each, "
              f"each step fed the float model's tokens: {statistics.mean(a.agreement for a in agree):.4f} "
              f"(least {min(a.agreement for a in agree):.4f})")
        print(f"  e.g. prompt {prompts[1]}: float {list(agree[1].expected[0][:16])}, "
              f"int4 {list(agree[1].free[0][:16])}")

        models = {mode: og.Model(d) for mode, d in dirs.items()}
        same = []
        for p in prompts:
            f_tokens, _ = decode(og, models["float"], p, args.tokens)
            q_tokens, _ = decode(og, models["int4"], p, args.tokens)
            same.append(next((i for i, (a, b) in enumerate(zip(f_tokens, q_tokens)) if a != b), len(f_tokens)))
        print(f"onnxruntime-genai free greedy decoding, int4 against float: tokens before the first difference "
              f"{same} (of {args.tokens})")
        time_decoding(og, models, prompts, args.rounds, args.tokens)


if __name__ == "__main__":
    main()
