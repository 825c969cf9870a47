"""int4 and int8 against float decoding in onnxruntime-genai on one thread: a small Qwen2-style decoder
(8 layers, grouped-query attention, hidden 256, tied embeddings) trained for ``--train-steps`` Adam steps
(seeded: the same model on any machine, however loaded) to continue a repeated pattern (``PATTERN``: 24
tokens over 12 ids, cycled; one token does not tell the next, a few do), written by ``save_pretrained``,
exported by ``export_pretrained`` in float and with each ``quantize`` mode of ``--quantize`` (``int4``,
``int8``, comma-separated; ``onnxport export-hf --quantize int4|int8``). The file keeps its name from
when it measured int4 only; it measures int8 the same way.

Prints, for each quantized model against the float model (and the float export itself against eager
PyTorch, as the baseline):

- how well the float model learnt the pattern (its greedy tokens that continue the cycle);
- greedy-token agreement with ``generate`` (each step fed eager float's tokens so far,
  ``onnxport.verify.accuracy.generation_agreement``) on 8 prompts of 8 tokens cut from the cycle every
  3 positions, 32 tokens each: the mean over prompts and the least;
- top-1 agreement of the logits with eager float's at every position of 4 sequences of 40 random
  token ids (no cache), and the largest logit error relative to scale (the largest absolute error
  over the largest absolute eager float logit) on those and on the cycle (each prompt followed by
  eager's 32 tokens, no cache);
- the export's own checks, judged by the quantization's tolerance (``AccuracyTolerance``: logits'
  top-1 agreement and greedy-token agreement >= 0.99 on random tokens): its validation's top-1
  agreement and largest error, its decoding checks' greedy-token agreement;
- how many tokens onnxruntime-genai's free greedy decoding of each quantized model shares with
  float's before they diverge (``--tokens`` tokens after each prompt);
- decode ms/token of each model in onnxruntime-genai (``intra_op_num_threads`` 1 in
  ``genai_config.json``): each round decodes ``--tokens`` tokens greedily after a prompt of the
  text, the first token (the prompt's step) left out; after a warm-up of each, rounds alternate the
  models (the order reversed every other round); the median (min-max) over rounds and each quantized
  model's ratio to float's time in the same round, median (min-max) over rounds.

The script judges nothing itself: it prints the figures (the export's checks say ok or FAIL by their
tolerance). ``--markdown PATH`` also writes them as a table with the run's command, machine and versions.

Run: ``.venv/bin/python benchmarks/genai_int4.py [--quantize int4,int8] [--train-steps 200] [--rounds 7]
[--tokens 64] [--markdown benchmarks/GENAI_QUANT.md]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
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
    print(describe(steps, seconds, loss))
    return model, prompts_of_cycle()


def describe(steps: int, seconds: float, loss: float) -> str:
    """The trained model in a sentence."""
    return (f"Qwen2-style decoder, 8 layers, hidden 256, 8 heads / 2 key-value heads, vocab {VOCAB}, tied embeddings; "
            f"trained {steps} steps ({seconds:.1f} s), last loss {loss:.3f}")


def prompts_of_cycle() -> list[list[int]]:
    """8-token prompts cut from the cycle every 3 positions."""
    return [cycle(i, 8) for i in range(0, len(PATTERN), 3)]


def decode_rounds(og, models: dict, prompts: list[list[int]], rounds: int, tokens: int) -> dict[str, list[float]]:
    """Decode ms/token of each of ``models`` (name -> ``og.Model``) in each round: one warm-up each, then ``rounds``
    rounds of ``tokens`` tokens after ``prompts[round % len(prompts)]``, the order of the models reversed every
    other round; name -> ms/token per round."""
    for m in models.values():
        decode(og, m, prompts[0], 8)  # warm-up
    timings: dict[str, list[float]] = {name: [] for name in models}
    order = list(models)
    for r in range(rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            _, times = decode(og, models[name], prompts[r % len(prompts)], tokens)
            timings[name].append(1000 * statistics.mean(times))
    return timings


def time_decoding(og, models: dict, prompts: list[list[int]], rounds: int, tokens: int) -> dict[str, float]:
    """``decode_rounds``, printed: each model's median and rounds and each model's median over the first model's;
    returns the medians."""
    timings = decode_rounds(og, models, prompts, rounds, tokens)
    order = list(models)
    med = {name: statistics.median(v) for name, v in timings.items()}
    for name, v in timings.items():
        print(f"decode {name}: median {med[name]:.3f} ms/token over {rounds} rounds of {tokens} tokens "
              f"(rounds: {', '.join(f'{t:.3f}' for t in v)})")
    for name in order[1:]:
        print(f"{name} / {order[0]}: {med[name] / med[order[0]]:.2f}")
    return med


def full_logits(runner, ids: np.ndarray) -> np.ndarray:
    """The exported decoder's logits ``[batch, seq, vocab]`` (float32) of ``ids`` ``[batch, seq]`` in one step
    with an empty cache."""
    from onnxport.verify.decoding import Layout, empty_cache

    layout = Layout.of(runner)
    feeds = empty_cache(runner, layout, ids.shape[0])
    feeds[layout.tokens] = ids.astype(np.int64)
    if layout.mask:
        feeds[layout.mask] = np.ones(ids.shape, np.int64)
    if layout.positions:
        feeds[layout.positions] = np.broadcast_to(np.arange(ids.shape[1], dtype=np.int64), ids.shape).copy()
    if layout.cache_position:
        feeds[layout.cache_position] = np.arange(ids.shape[1], dtype=np.int64)
    out = dict(zip(runner.output_names, runner.session.run(None, feeds)))
    return out[layout.logits].astype(np.float32)


def logits_against_eager(model, runner, ids: np.ndarray, rows: slice = slice(None)) -> tuple[float, float]:
    """Top-1 agreement and largest absolute error over the largest absolute eager logit, of the exported
    decoder's logits against ``model``'s (eager float32) on ``ids`` ``[batch, seq]``, at the positions
    ``rows``."""
    with torch.no_grad():
        expected = model(input_ids=torch.tensor(ids, dtype=torch.int64)).logits.float().numpy()[:, rows]
    got = full_logits(runner, ids)[:, rows]
    top1 = float((expected.argmax(-1) == got.argmax(-1)).mean())
    return top1, float(np.abs(got - expected).max() / np.abs(expected).max())


def spread(values: list[float], fmt: str = ".2f") -> str:
    """``median (min-max)`` of ``values``."""
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def write_markdown(path: str, header: list[str], lines: list[str]) -> None:
    """``path`` written atomically (a ``.tmp`` beside it, then ``os.replace``): ``header`` then ``lines``."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(header + lines) + "\n")
    os.replace(tmp, path)


def machine() -> str:
    """The CPU's model name (``/proc/cpuinfo``) and core count."""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), platform.machine())
    except OSError:
        cpu = platform.machine()
    return f"{cpu}, {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quantize", default="int4", help="comma-separated quantize modes to measure (int4, int8)")
    parser.add_argument("--train-steps", type=int, default=TRAIN_STEPS,
                        help="Adam steps of the model's training (seeded)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--markdown", help="also write the figures as a table to this file "
                                           "(e.g. benchmarks/GENAI_QUANT.md)")
    args = parser.parse_args()
    quantized = [m.strip() for m in args.quantize.split(",") if m.strip()]
    if not quantized or any(m not in ("int4", "int8") for m in quantized) or len(set(quantized)) < len(quantized):
        parser.error(f"--quantize takes int4 and/or int8, comma-separated; got {args.quantize!r}")

    import onnxruntime_genai as og

    from onnxport.pretrained import export_pretrained
    from onnxport.verify.accuracy import generation_agreement
    from onnxport.verify.runner import OrtRunner

    command = " ".join(shlex.quote(a) for a in [os.path.relpath(sys.executable), *sys.argv])
    began, load_start = time.time(), os.getloadavg()
    torch.set_num_threads(1)
    model, seconds, loss = train_qwen2(args.train_steps)
    trained = describe(args.train_steps, seconds, loss)
    print(trained)
    prompts = prompts_of_cycle()
    modes = ["float", *quantized]
    rows: dict[str, dict] = {mode: {} for mode in modes}
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="onnxport-genai-quant-") as tmp:
        source = os.path.join(tmp, "qwen2")
        model.save_pretrained(source)
        dirs, results = {}, {}
        for mode in modes:
            start = time.perf_counter()
            result = export_pretrained(source, validate=mode != "float", generate=16 if mode != "float" else 0,
                                       quantize=None if mode == "float" else mode)
            dirs[mode] = os.path.join(tmp, mode)
            result.save(dirs[mode])
            one_thread(dirs[mode])
            results[mode] = result
            size = os.path.getsize(os.path.join(dirs[mode], "model.onnx")) + sum(
                os.path.getsize(os.path.join(dirs[mode], f)) for f in os.listdir(dirs[mode]) if f.endswith(".data"))
            rows[mode]["size"] = size / 1e6
            print(f"{mode}: exported in {time.perf_counter() - start:.1f} s, {size / 1e6:.1f} MB")

        tolerance = None
        for mode in quantized:
            q = results[mode].parts["model"]
            tolerance = q.quantization.tolerance
            print(f"{mode}: {q.quantization}")
            notes.append(str(q.quantization))
            summary = q.validation.summary()
            logits = summary["logits"]
            below = [name for name, s in summary.items() if not s["ok"]]
            sizes = len({c.inputs for c in q.validation.checks}) - 1
            line = (f"{mode} validation against eager float (example and {sizes} other sizes, random tokens): "
                    f"logits top-1 agreement {logits['top1']:.4f} (>= {q.validation.top1_min:g}), "
                    f"max abs error {logits['max_abs']:.3g}: {'ok' if q.validation.ok else 'FAIL'}")
            failed = f"; below tolerance: {', '.join(below[:2])}{', ...' if len(below) > 2 else ''} " \
                     f"({len(below)} of {len(summary)} outputs)" if below else ""
            line += failed
            checks = [f"validation {'ok' if q.validation.ok else 'FAIL'} (logits top-1 {logits['top1']:.4f}{failed})"]
            for label, g in results[mode].generation:
                line += (f"\n{mode} export's decoding check, {label} (random prompt tokens): greedy-token agreement "
                         f"{g.agreement:.4f} (>= {g.tolerance:g}): {'ok' if g.ok else 'FAIL'}")
                checks.append(f"decoding {'ok' if g.ok else 'FAIL'} ({g.agreement:.4f})")
            print(line)
            rows[mode]["checks"] = ", ".join(checks)

        random_ids = torch.randint(3, VOCAB, (4, 40), generator=torch.Generator().manual_seed(1)).numpy()
        for mode in modes:
            proto = results[mode].parts["model"].model_proto
            agree = [generation_agreement(model, proto, torch.tensor([p]), max_new_tokens=32) for p in prompts]
            if mode == "float":
                right = [np.mean([t == c for t, c in zip(a.expected[0], cycle(i + 8, 32))])
                         for i, a in zip(range(0, len(PATTERN), 3), agree)]
                learnt = float(np.mean(right))
                print(f"float model's greedy tokens continuing the pattern (8 prompts, 32 tokens): {learnt:.4f}")
            runner = OrtRunner(proto)
            seqs = np.array([p + list(a.expected[0][:-1]) for p, a in zip(prompts, agree)], np.int64)
            _, cycle_err = logits_against_eager(model, runner, seqs, slice(len(prompts[0]) - 1, None))
            top1, random_err = logits_against_eager(model, runner, random_ids)
            rows[mode].update(agreement=statistics.mean(a.agreement for a in agree),
                              least=min(a.agreement for a in agree), top1=top1, cycle_err=cycle_err,
                              random_err=random_err)
            against = "eager float" if mode == "float" else "float"
            print(f"{mode} against {against}: greedy-token agreement on {len(prompts)} prompts cut from the cycle, "
                  f"32 tokens each, each step fed eager float's tokens: {rows[mode]['agreement']:.4f} "
                  f"(least {rows[mode]['least']:.4f}); logits top-1 agreement on {random_ids.shape[0]}x"
                  f"{random_ids.shape[1]} random tokens {top1:.4f}; largest logit error / scale: cycle "
                  f"{cycle_err:.2e}, random tokens {random_err:.2e}")
            if mode != "float":
                print(f"  e.g. prompt {prompts[1]}: float {list(agree[1].expected[0][:16])}, "
                      f"{mode} {list(agree[1].free[0][:16])}")

        models = {mode: og.Model(d) for mode, d in dirs.items()}
        float_tokens = [decode(og, models["float"], p, args.tokens)[0] for p in prompts]
        for mode in quantized:
            same = []
            for p, f_tokens in zip(prompts, float_tokens):
                q_tokens, _ = decode(og, models[mode], p, args.tokens)
                same.append(next((i for i, (a, b) in enumerate(zip(f_tokens, q_tokens)) if a != b), len(f_tokens)))
            rows[mode]["same"] = same
            print(f"onnxruntime-genai free greedy decoding, {mode} against float: tokens before the first difference "
                  f"{same} (of {args.tokens})")
        timings = decode_rounds(og, models, prompts, args.rounds, args.tokens)
    for mode in modes:
        v = timings[mode]
        paired = [t / f for t, f in zip(v, timings["float"])]  # float's time in the same round
        rows[mode].update(ms=spread(v, ".3f"), ratio=spread(paired))
        print(f"decode {mode}: {rows[mode]['ms']} ms/token over {args.rounds} rounds of {args.tokens} tokens "
              f"(rounds: {', '.join(f'{t:.3f}' for t in v)})" +
              ("" if mode == "float" else f"; / float paired by round {rows[mode]['ratio']}"))

    if args.markdown:
        import onnx
        import onnxruntime
        import transformers

        load_end = os.getloadavg()
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
        header = [
            "# int4 and int8 decoders against float: token agreement and decode speed in onnxruntime-genai", "",
            f"One run of `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(began))}, "
            f"{(time.time() - began) / 60:.1f} min, onnxport at {commit}. Machine: {machine()}, load average "
            f"{load_start[0]:.1f} at the start, {load_end[0]:.1f} at the end (shared: absolute times are inflated; "
            "the models alternate within each round and the ratios are paired by round). Versions: onnxruntime "
            f"{onnxruntime.__version__}, onnxruntime-genai {og.__version__}, torch {torch.__version__}, transformers "
            f"{transformers.__version__}, onnx {onnx.__version__}; Python {platform.python_version()}. "
            "Every figure below comes from that run; what is measured and how: the script's docstring.", "",
            f"Model: {trained} (Adam, seeded: the same model on any machine). Its greedy tokens continue the "
            f"pattern at {learnt:.4f} of steps (8 prompts, 32 tokens).", "",
            *[f"- {n}" for n in notes], "",
            "Tolerance: the script itself judges nothing. The export's own checks (last column) judge by the "
            f"quantization's tolerance ({tolerance}; `onnxport.quantize.AccuracyTolerance`) on random tokens "
            "and say ok or FAIL.", "",
            f"Columns: decode ms/token in onnxruntime-genai, one intra-op thread, {args.tokens} greedy tokens after "
            f"an 8-token prompt (its own step left out), median (min-max) over {args.rounds} rounds; its ratio to "
            "float's time in the same round, median (min-max); greedy-token agreement with `generate` on 8 prompts "
            "cut from the cycle, 32 tokens each, each step fed eager float's tokens, mean (least); logits' top-1 "
            "agreement with eager float at every position of 4 sequences of 40 random tokens; largest logit error "
            "over the largest eager float logit, on the cycle (prompts and eager's tokens) and on those random "
            f"tokens; tokens onnxruntime-genai's free greedy decoding shares with float's before the first "
            f"difference, median (min-max) over the 8 prompts (of {args.tokens}). The float row is the float export "
            "against eager PyTorch.", "",
        ]
        lines = ["| precision | MB | decode ms/token | / float (paired) | greedy-token agreement (least) | top-1, "
                 "random tokens | logit error / scale, cycle | logit error / scale, random tokens | shared prefix | "
                 "export's checks |",
                 "|---|---|---|---|---|---|---|---|---|---|"]
        for mode in modes:
            r = rows[mode]
            same = "-" if mode == "float" else f"{spread(r['same'], '.0f')} of {args.tokens}"
            lines.append(f"| {mode} | {r['size']:.1f} | {r['ms']} | {r['ratio']} | {r['agreement']:.4f} "
                         f"({r['least']:.4f}) | {r['top1']:.4f} | {r['cycle_err']:.1e} | {r['random_err']:.1e} | "
                         f"{same} | {r.get('checks', '-')} |")
        write_markdown(args.markdown, header, lines)
        print(f"wrote {args.markdown}")


if __name__ == "__main__":
    main()
