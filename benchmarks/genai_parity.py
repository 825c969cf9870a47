"""onnxport against onnxruntime-genai's own model builder, decoding in onnxruntime-genai on one thread.

Builds Llama-, Qwen2- and Phi-3-style decoders at two sizes (4 layers hidden 256, 8 layers hidden 512;
8 heads, 2 key/value heads where the family has grouped-query attention, Phi-3 keeps one key/value head
per head as Phi-3-mini does; vocab 1024) with seeded random weights, writes each with ``save_pretrained``
and exports it four ways: the builder (``python -m onnxruntime_genai.models.builder -p fp32|int4 -e cpu``,
offline) and ``onnxport export-hf --target genai-cpu`` with and without ``--quantize int4`` (no
validation, no decoding checks: this measures the models, not the checks).

For each pair (builder, onnxport) at one precision, in onnxruntime-genai with ``intra_op_num_threads``
1 (``genai_int4.one_thread``), rounds alternate the two models; per round and model:

- prefill ms: the wall time of ``genai_int4.decode`` asked for one token after a ``--prompt``-token
  prompt (generator set-up, the prompt's forward pass, one greedy pick);
- decode ms/token: ``genai_int4.decode`` of ``--tokens`` tokens after an 8-token prompt, the mean step
  time with the prompt's step left out.

The table gives the median over rounds with the range (min-max) and the ratio onnxport / builder;
tokens: fp32, on 4 prompts of 32 greedy tokens, whether onnxport's tokens equal the builder's; int4, the
fraction of positions where onnxport's int4 tokens equal the builder's int4 tokens (free decoding: after
a first difference the rest mostly differ too). Where onnxport is slower (decode or prefill median more
than 3 % above the builder's), both graphs are profiled on one decode step in plain onnxruntime (one
thread, onnxruntime's profiler, a 64-token past, ``--profile-runs`` steps): time per op type and node
counts per op type, the differing kinds listed.

Run: ``.venv/bin/python benchmarks/genai_parity.py [--rounds 5] [--tokens 64] [--prompt 64]``; writes
``benchmarks/GENAI_PARITY.md``.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from genai_int4 import decode, one_thread  # noqa: E402

HERE = Path(__file__).resolve().parent
VOCAB = 1024
SIZES = {"S": dict(layers=4, hidden=256, inter=688), "M": dict(layers=8, hidden=512, inter=1376)}


def make_model(family: str, size: str, seed: int = 0):
    """A ``family`` (llama, qwen2, phi3) causal LM of ``SIZES[size]`` with seeded random weights."""
    import transformers

    s = SIZES[size]
    common = dict(vocab_size=VOCAB, hidden_size=s["hidden"], intermediate_size=s["inter"],
                  num_hidden_layers=s["layers"], num_attention_heads=8, max_position_embeddings=1024,
                  pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(seed)
    if family == "llama":
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(num_key_value_heads=2, **common))
    if family == "qwen2":
        return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(num_key_value_heads=2,
                                                                      tie_word_embeddings=True, **common))
    if family == "phi3":
        # max_position_embeddings equal to original_max_position_embeddings, as Phi-3-mini-4k: the builder
        # reads other values as LongRoPE's, which needs rope_scaling's factors
        common.update(max_position_embeddings=4096)
        return transformers.Phi3ForCausalLM(transformers.Phi3Config(num_key_value_heads=8,
                                                                    original_max_position_embeddings=4096, **common))
    raise ValueError(family)


def save_tokenizer(directory: str) -> None:
    """A word-level tokenizer of ``VOCAB`` ids (``t0`` ... ``t1023``) saved into ``directory``: the
    builder writes the tokenizer files onnxruntime-genai loads and needs one to copy."""
    import tokenizers
    import transformers

    vocab = {f"t{i}": i for i in range(VOCAB)}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="t0"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="t0", bos_token="t1", eos_token="t2",
                                         unk_token="t0").save_pretrained(directory)


def run(cmd: list[str], out: str) -> float:
    """Run ``cmd`` offline; its seconds. Raises RuntimeError with its last stderr lines if it fails."""
    start = time.perf_counter()
    r = subprocess.run(cmd, env=dict(os.environ, HF_HUB_OFFLINE="1"), capture_output=True, text=True)
    if r.returncode != 0 or not os.path.isfile(os.path.join(out, "genai_config.json")):
        raise RuntimeError(f"{' '.join(cmd[:4])}: failed\n" + "\n".join((r.stderr or r.stdout).splitlines()[-5:]))
    return time.perf_counter() - start


def export_builder(source: str, out: str, precision: str) -> float:
    """onnxruntime-genai's model builder, ``precision`` fp32 or int4, CPU."""
    return run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", source, "-o", out, "-p", precision,
                "-e", "cpu", "-c", os.path.join(out, "cache")], out)


def export_onnxport(source: str, out: str, precision: str) -> float:
    """``onnxport export-hf --target genai-cpu`` (``--quantize int4`` for int4), no checks."""
    cmd = [str(Path(sys.executable).with_name("onnxport")), "export-hf", source, "-o", out, "--target", "genai-cpu",
           "--no-validate", "--generate", "0", "--quiet"]
    return run(cmd + (["--quantize", "int4"] if precision == "int4" else []), out)


def model_file(directory: str) -> str:
    """The decoder's .onnx file named in ``genai_config.json``."""
    with open(os.path.join(directory, "genai_config.json")) as f:
        return os.path.join(directory, json.load(f)["model"]["decoder"]["filename"])


def op_counts(directory: str) -> collections.Counter:
    """Node count per op type (``domain:`` prefix for non-default domains) of the decoder graph."""
    import onnx

    m = onnx.load(model_file(directory), load_external_data=False)
    return collections.Counter((f"{n.domain.replace('com.microsoft', 'ms')}:" if n.domain else "") + n.op_type
                               for n in m.graph.node)


def step_feeds(session, directory: str, past: int) -> dict[str, np.ndarray]:
    """Inputs of one decode step of ``session`` (batch 1, 1 token after ``past`` cached ones, random cache)."""
    with open(os.path.join(directory, "genai_config.json")) as f:
        decoder = json.load(f)["model"]["decoder"]
    heads, dim = decoder["num_key_value_heads"], decoder["head_size"]
    rng = np.random.default_rng(0)
    feeds = {}
    for i in session.get_inputs():
        dtype = {"tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(float)": np.float32}[i.type]
        if "input_ids" in i.name:
            feeds[i.name] = rng.integers(3, VOCAB, (1, 1)).astype(dtype)
        elif "attention_mask" in i.name:
            feeds[i.name] = np.ones((1, past + 1), dtype)
        elif "position_ids" in i.name:
            feeds[i.name] = np.full((1, 1), past, dtype)
        elif "past" in i.name:
            feeds[i.name] = rng.standard_normal((1, heads, past, dim)).astype(dtype)
        else:
            raise RuntimeError(f"profile: unknown input {i.name} of {directory}")
    return feeds


def profile_steps(dirs: dict[str, str], past: int, runs: int) -> dict[str, dict[str, float]]:
    """For each model of ``dirs`` (name -> directory): ms per op type of one decode step (1 token after
    ``past`` cached ones, batch 1) in plain onnxruntime on one thread, from its profiler: each node's
    median kernel time over ``runs`` steps (the models' steps alternated, the first left out; medians, as
    other work shares the cores) summed per op type; and the whole step's median
    (``(whole step, model_run)``), which also holds the executor's time between kernels."""
    import onnxruntime as ort

    sessions, feeds = {}, {}
    for name, d in dirs.items():
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(d, "profile")
        sessions[name] = ort.InferenceSession(model_file(d), so, providers=["CPUExecutionProvider"])
        feeds[name] = step_feeds(sessions[name], d, past)
        sessions[name].run(None, feeds[name])
    for _ in range(runs):
        for name, s in sessions.items():
            s.run(None, feeds[name])
    out = {}
    for name, s in sessions.items():
        with open(s.end_profiling()) as f:
            events = json.load(f)
        per_run = sorted((e for e in events if e.get("name") == "model_run"), key=lambda e: e["ts"])[1:]
        per_node: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
        for e in events:
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") and e["ts"] >= per_run[0]["ts"]:
                per_node[e["args"]["op_name"], e["name"]].append(e["dur"] / 1000)
        out[name] = collections.defaultdict(float)
        for (kind, _), v in per_node.items():
            out[name][kind] += statistics.median(v)
        out[name]["(whole step, model_run)"] = statistics.median(e["dur"] for e in per_run) / 1000
    return out


def fmt(v: list[float]) -> str:
    return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--profile-runs", type=int, default=30)
    parser.add_argument("--families", default="llama,qwen2,phi3")
    parser.add_argument("--sizes", default="S,M")
    parser.add_argument("--out", default=str(HERE / "GENAI_PARITY.md"))
    args = parser.parse_args()

    import onnxruntime_genai as og

    torch.set_num_threads(1)
    started = time.perf_counter()
    g = np.random.default_rng(1)
    long_prompt = [int(t) for t in g.integers(3, VOCAB, args.prompt)]
    prompts = [[int(t) for t in g.integers(3, VOCAB, 8)] for _ in range(4)]
    rows, profiles, notes = [], [], []
    with tempfile.TemporaryDirectory(prefix="onnxport-genai-parity-") as tmp:
        for family in args.families.split(","):
            for size in args.sizes.split(","):
                source = os.path.join(tmp, f"{family}-{size}")
                make_model(family, size).save_pretrained(source)
                save_tokenizer(source)
                for precision in ("fp32", "int4"):
                    dirs, secs = {}, {}
                    label = f"{family} {size} ({SIZES[size]['layers']}L h{SIZES[size]['hidden']})"
                    try:
                        for name, export in (("builder", export_builder), ("onnxport", export_onnxport)):
                            dirs[name] = os.path.join(tmp, f"{family}-{size}-{precision}-{name}")
                            secs[name] = export(source, dirs[name], precision)
                            one_thread(dirs[name])
                    except RuntimeError as e:
                        rows.append(f"| {label} | {precision} | {name} export failed: see below |||||||")
                        notes.append(f"{label} {precision}: {e}")
                        print(rows[-1], e, flush=True)
                        continue
                    models = {name: og.Model(d) for name, d in dirs.items()}
                    toks = {name: [decode(og, m, p, 32)[0] for p in prompts] for name, m in models.items()}
                    pairs = [(a, b) for pa, pb in zip(toks["builder"], toks["onnxport"]) for a, b in zip(pa, pb)]
                    agree = sum(a == b for a, b in pairs) / len(pairs)
                    same = sum(pa == pb for pa, pb in zip(toks["builder"], toks["onnxport"]))
                    tokens = (f"equal {same}/{len(prompts)}" if precision == "fp32"
                              else f"agreement {agree:.3f} ({same}/{len(prompts)} equal)")
                    pre: dict[str, list[float]] = {n: [] for n in models}
                    dec: dict[str, list[float]] = {n: [] for n in models}
                    for m in models.values():
                        decode(og, m, prompts[0], 8)  # warm-up
                    for r in range(args.rounds):
                        for name in (("builder", "onnxport") if r % 2 == 0 else ("onnxport", "builder")):
                            start = time.perf_counter()
                            decode(og, models[name], long_prompt, 1)
                            pre[name].append(1000 * (time.perf_counter() - start))
                            _, times = decode(og, models[name], prompts[r % len(prompts)], args.tokens)
                            dec[name].append(1000 * statistics.mean(times))
                    del models
                    rp = statistics.median(pre["onnxport"]) / statistics.median(pre["builder"])
                    rd = statistics.median(dec["onnxport"]) / statistics.median(dec["builder"])
                    rows.append(f"| {label} | {precision} | {fmt(pre['builder'])} | {fmt(pre['onnxport'])} | {rp:.2f} "
                                f"| {fmt(dec['builder'])} | {fmt(dec['onnxport'])} | {rd:.2f} | {tokens} "
                                f"| {secs['builder']:.0f} / {secs['onnxport']:.0f} |")
                    print(rows[-1], flush=True)
                    if rp > 1.03 or rd > 1.03:
                        prof = profile_steps(dirs, 64, args.profile_runs)
                        whole = {n: prof[n].pop("(whole step, model_run)") for n in prof}
                        counts = {n: op_counts(d) for n, d in dirs.items()}
                        kinds = sorted(set(prof["builder"]) | set(prof["onnxport"]),
                                       key=lambda k: -abs(prof["onnxport"].get(k, 0) - prof["builder"].get(k, 0)))
                        lines = [f"#### {label}, {precision}: one decode step (64 past tokens), plain onnxruntime",
                                 "", f"kernel time summed: builder {sum(prof['builder'].values()):.3f} ms, "
                                 f"onnxport {sum(prof['onnxport'].values()):.3f} ms; whole step (median): builder "
                                 f"{whole['builder']:.3f} ms, onnxport {whole['onnxport']:.3f} ms "
                                 f"(op types: as onnxruntime runs them, after its fusions; nodes: in the files)", "",
                                 "| op type | builder ms | onnxport ms | difference | builder nodes | onnxport nodes |",
                                 "|---|---|---|---|---|---|"]
                        for k in kinds:
                            b, o = prof["builder"].get(k, 0.0), prof["onnxport"].get(k, 0.0)
                            nb = sum(v for c, v in counts["builder"].items() if c.split(":")[-1] == k)
                            no = sum(v for c, v in counts["onnxport"].items() if c.split(":")[-1] == k)
                            if abs(o - b) >= 0.005 or nb != no:
                                lines.append(f"| {k} | {b:.3f} | {o:.3f} | {o - b:+.3f} | {nb} | {no} |")
                        profiles.append("\n".join(lines))
                        print(profiles[-1], flush=True)
    minutes = (time.perf_counter() - started) / 60
    load = os.getloadavg()
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    import onnxruntime

    chosen = "".join(f" --{k} {getattr(args, k)}" for k in ("families", "sizes")
                     if getattr(args, k) != parser.get_default(k))
    head = [
        "# onnxport against onnxruntime-genai's model builder",
        "",
        f"One run of `python benchmarks/genai_parity.py --rounds {args.rounds} --tokens {args.tokens} "
        f"--prompt {args.prompt}{chosen}` on {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
        f"{minutes:.1f} min (method: the script's docstring). Machine: {cpu}, {os.cpu_count()} cores, "
        f"{platform.system()} {platform.release()}, load average {load[0]:.1f} during the run (shared: absolute "
        f"times are inflated, the ratios are paired within rounds); onnxruntime {onnxruntime.__version__}, "
        f"onnxruntime-genai {og.__version__}, torch {torch.__version__}, one intra-op thread.",
        "",
        f"Prefill: a {args.prompt}-token prompt; decode: {args.tokens} tokens after 8, ms/token; median over "
        f"{args.rounds} alternated rounds (min-max); ratio onnxport / builder. Export s: builder / onnxport.",
        "",
        "| model | precision | prefill builder | prefill onnxport | ratio | decode builder | decode onnxport | ratio "
        "| greedy tokens | export s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    text = "\n".join(head + rows) + "\n"
    if profiles:
        text += "\n### Profiles where onnxport is slower (op types differing by 0.005 ms or more, or in count)\n\n"
        text += "\n\n".join(profiles) + "\n"
    text += "".join(f"\n{n}\n" for n in notes)
    print(text)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
