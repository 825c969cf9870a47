"""ONNX forms of mixture-of-experts dispatch, side by side: nodes and onnxruntime latency.

transformers 5 runs its experts as grouped matrix products (``transformers::grouped_mm_fallback``
while torch.export traces): the (token, expert) rows sorted by expert, ``weight[E, K, N]`` and the
cumulative row counts ``offs[E]``. Each decoder below (transformers' own classes, seeded random
weights, 2 layers) is exported with its cache once per form of that product:

- ``per-expert``: onnxport's translation (``translate/ops/moe.py``): one Slice + MatMul per
  expert on its rows, each expert's matrix its own initializer;
- ``gather``: each row gathers its expert's matrix (``Gather(weight, expert_of_row)``, a
  ``[S, K, N]`` copy) and one batched MatMul;
- ``loop``: an ONNX ``Loop`` over the experts, each iteration slicing its rows and gathering its
  matrix (a ``K * N`` copy per expert);
- ``dense``: every expert on every row (``[E, S, N]``), then each row's expert selected: the dense
  form, E times the arithmetic.

Every form is checked against eager PyTorch (logits, max abs difference) on the timed inputs.
Latency: onnxruntime on one thread, a prompt step (batch 1, ``--prompt`` tokens, empty cache) and
a decoding step (batch 1, one token after ``--prompt`` cached ones); the forms' runs alternate,
after 3 warm-up runs each; median with min and max over ``--runs`` runs.

    python benchmarks/moe_forms.py [--runs 30] [--prompt 64] [--markdown benchmarks/MOE_FORMS.md]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import onnx_ir as ir  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402

import onnxport  # noqa: E402
from onnxport.translate import bodies  # noqa: E402
from onnxport.translate.registry import override  # noqa: E402

torch.set_num_threads(1)
_I64 = ir.DataType.INT64
GROUPED = "transformers::grouped_mm_fallback.default"


# ------------------------------------------------------------------------------ the other forms
def _expert_of_rows(ctx, offs, rows):
    """int64[S]: each row's expert, ``#{e : offs[e] <= r}`` (E past ``offs[-1]``)."""
    op = ctx.op
    r = op.Range(ctx.scalar(0, _I64), rows, ctx.scalar(1, _I64))
    ends = op.Unsqueeze(ctx.cast(offs, _I64), ctx.const([0]))
    return op.ReduceSum(op.Cast(op.LessOrEqual(ends, op.Unsqueeze(r, ctx.const([1]))), to=_I64), ctx.const([1]),
                        keepdims=0)


def _keep_inside(ctx, y, expert, experts):
    inside = ctx.op.Unsqueeze(ctx.op.Less(expert, ctx.scalar(experts, _I64)), ctx.const([1]))
    return ctx.op.Where(inside, y, ctx.const(np.array(0, dtype=ctx.out_dtype.numpy())))


def gather_form(ctx, x, weight, offs):
    op, experts = ctx.op, weight.shape[0]
    expert = _expert_of_rows(ctx, offs, ctx.dim(x, 0))
    w = op.Gather(weight, op.Min(expert, ctx.scalar(experts - 1, _I64)), axis=0)  # [S, K, N]
    y = op.Squeeze(op.MatMul(op.Unsqueeze(x, ctx.const([1])), w), ctx.const([1]))
    return _keep_inside(ctx, y, expert, experts)


def dense_form(ctx, x, weight, offs):
    op, experts = ctx.op, weight.shape[0]
    every = op.MatMul(op.Unsqueeze(x, ctx.const([0])), weight)  # [E, S, N]
    expert = _expert_of_rows(ctx, offs, ctx.dim(x, 0))
    index = op.Unsqueeze(op.Min(expert, ctx.scalar(experts - 1, _I64)), ctx.const([0, 2]))
    index = op.Expand(index, op.Concat(ctx.const([1]), op.Shape(every, start=1), axis=0))
    y = op.Squeeze(op.GatherElements(every, index, axis=0), ctx.const([0]))
    return _keep_inside(ctx, y, expert, experts)


def loop_form(ctx, x, weight, offs):
    op, experts, n, dtype = ctx.op, weight.shape[0], weight.shape[2], ctx.out_dtype
    ends = ctx.cast(offs, _I64)
    starts = op.Concat(ctx.const([0]), op.Slice(ends, ctx.const([0]), ctx.const([-1])), axis=0)

    def body(sub, ins):
        i, acc = ins[0], ins[2]
        s = sub.op.Unsqueeze(sub.op.Gather(starts, i), sub.const([0]))
        e = sub.op.Unsqueeze(sub.op.Gather(ends, i), sub.const([0]))
        y = sub.op.MatMul(sub.op.Slice(x, s, e, sub.const([0])), sub.op.Gather(weight, i, axis=0))
        out = sub.op.Concat(acc, y, axis=0)
        out.type, out.shape = ir.TensorType(dtype), ir.Shape([None, n])
        return [sub.op.Identity(ins[1]), out]

    graph = bodies.subgraph(ctx, "experts", [(_I64, []), (ir.DataType.BOOL, []), (dtype, [None, n])], body)
    empty = op.ConstantOfShape(ctx.const([0, n]), value=ir.tensor(np.zeros(1, dtype.numpy())))
    y = op.Loop(ctx.const(np.array(experts, np.int64)), None, empty, body=graph)
    missing = op.Sub(op.Shape(x, start=0, end=1), op.Slice(ends, ctx.const([-1]), ctx.const([experts])))
    return op.Pad(y, op.Concat(ctx.const([0, 0]), missing, ctx.const([0]), axis=0))


FORMS = {"per-expert": None, "gather": gather_form, "loop": loop_form, "dense": dense_form}


# ------------------------------------------------------------------------------ the decoders
def _decoders() -> dict:
    import transformers

    ids = dict(vocab_size=1000, num_hidden_layers=2, max_position_embeddings=512, pad_token_id=0, bos_token_id=1,
               eos_token_id=2)
    return {
        "Mixtral 8 experts top-2": lambda: transformers.MixtralForCausalLM(transformers.MixtralConfig(
            hidden_size=256, intermediate_size=512, num_attention_heads=8, num_key_value_heads=4,
            num_local_experts=8, num_experts_per_tok=2, **ids)),
        "Qwen3-MoE 64 experts top-8": lambda: transformers.Qwen3MoeForCausalLM(transformers.Qwen3MoeConfig(
            hidden_size=256, intermediate_size=512, moe_intermediate_size=128, num_attention_heads=8,
            num_key_value_heads=4, head_dim=32, num_experts=64, num_experts_per_tok=8, **ids)),
    }


DIMS = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
        "position_ids": {0: "batch", 1: "seq"}, "past_key_values": {0: "batch", 2: "past"}}


def _step(model, batch: int, past: int, seq: int, seed: int) -> dict:
    """A call of ``model``: ``seq`` new tokens after ``past`` cached ones (the cache from a prompt)."""
    from transformers import DynamicCache

    gen = torch.Generator().manual_seed(seed)
    cache = DynamicCache(config=model.config)
    if past:
        with torch.no_grad():
            model(input_ids=torch.randint(3, 1000, (batch, past), generator=gen), past_key_values=cache, use_cache=True)
    return dict(input_ids=torch.randint(3, 1000, (batch, seq), generator=gen),
                attention_mask=torch.ones(batch, past + seq, dtype=torch.int64),
                position_ids=torch.arange(past, past + seq).expand(batch, seq), past_key_values=cache, use_cache=True)


def _feeds(session: ort.InferenceSession, call: dict) -> dict:
    cache = call["past_key_values"]
    layers = [(layer.keys, layer.values) for layer in cache.layers]
    batch = call["input_ids"].shape[0]
    feeds = {}
    for inp in session.get_inputs():
        if inp.name.startswith("past_key_values."):
            _, i, kv = inp.name.split(".")
            held = layers[int(i)][0 if kv == "key" else 1] if int(i) < len(layers) else None
            feeds[inp.name] = held.numpy() if held is not None else \
                np.zeros((batch, inp.shape[1], 0, inp.shape[3]), np.float32)  # an empty cache
        else:
            feeds[inp.name] = call[inp.name].numpy()
    return feeds


def _count(model: ir.Model) -> int:
    return sum(1 for _ in ir.traversal.RecursiveGraphIterator(model.graph))


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings(), redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def bench(name: str, make, runs: int, prompt: int) -> list[dict]:
    """Export ``make()`` once per form and time the prompt and the decoding step; one row per form."""
    torch.manual_seed(0)
    model = make().eval()
    example = _step(model, 2, 5, 3, seed=0)
    rows, sessions = [], {}
    for form, fn in FORMS.items():
        start = time.perf_counter()
        with override({GROUPED: fn} if fn else {}):
            result = _quiet(onnxport.to_onnx, model, kwargs=example, dynamic_shapes=DIMS,
                            relations={"total": "past + seq"})
        seconds = time.perf_counter() - start
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        sessions[form] = ort.InferenceSession(result.model_proto.SerializeToString(), options,
                                              providers=["CPUExecutionProvider"])
        rows.append({"model": name, "form": form, "nodes": _count(result.model), "export_s": seconds})
    for step, (past, seq) in {"prompt": (0, prompt), "decode": (prompt, 1)}.items():
        call = _step(model, 1, past, seq, seed=1)
        feeds = {form: _feeds(s, call) for form, s in sessions.items()}
        with torch.no_grad():
            expected = _quiet(model, **_step(model, 1, past, seq, seed=1)).logits.numpy()
        for row in rows:
            got = sessions[row["form"]].run(["logits"], feeds[row["form"]])[0]
            row[f"{step}_err"] = float(np.abs(got - expected).max())
        times: dict[str, list[float]] = {form: [] for form in sessions}
        for form, s in sessions.items():
            for _ in range(3):
                s.run(None, feeds[form])
        for _ in range(runs):
            for form, s in sessions.items():
                t0 = time.perf_counter()
                s.run(None, feeds[form])
                times[form].append(1000 * (time.perf_counter() - t0))
        for row in rows:
            t = times[row["form"]]
            row[step] = (statistics.median(t), min(t), max(t))
    return rows


def render(rows: list[dict], markdown: bool) -> str:
    head = ["model", "form", "nodes", "nodes / per-expert", "prompt ms (min-max)", "/ per-expert",
            "decode ms (min-max)", "/ per-expert", "max abs logits vs eager"]
    base = {r["model"]: r for r in rows if r["form"] == "per-expert"}
    lines = []
    for r in rows:
        b = base[r["model"]]
        lines.append([r["model"], r["form"], str(r["nodes"]), f"{r['nodes'] / b['nodes']:.2f}",
                      f"{r['prompt'][0]:.2f} ({r['prompt'][1]:.2f}-{r['prompt'][2]:.2f})",
                      f"{r['prompt'][0] / b['prompt'][0]:.2f}",
                      f"{r['decode'][0]:.3f} ({r['decode'][1]:.3f}-{r['decode'][2]:.3f})",
                      f"{r['decode'][0] / b['decode'][0]:.2f}", f"{max(r['prompt_err'], r['decode_err']):.1e}"])
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(out + ["| " + " | ".join(line) + " |" for line in lines]) + "\n"
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    rule = fmt.format(*("-" * w for w in widths))
    return "\n".join([fmt.format(*head), rule] + [fmt.format(*line) for line in lines])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--prompt", type=int, default=64, help="prompt tokens (and cached tokens when decoding)")
    parser.add_argument("--markdown", default=None, help="also write the table as markdown to this path")
    parser.add_argument("--note", default="", help="text added after the measurement paragraph of the markdown")
    ns = parser.parse_args(argv)
    rows = []
    for name, make in _decoders().items():
        print(f"[moe_forms] {name}...", file=sys.stderr, flush=True)
        rows += bench(name, make, ns.runs, ns.prompt)
    print(render(rows, markdown=False))
    if ns.markdown:
        load = os.getloadavg()[0]
        Path(ns.markdown).write_text(
            "# Mixture-of-experts dispatch: ONNX forms\n\n"
            f"From one run of `python benchmarks/moe_forms.py --runs {ns.runs} --prompt {ns.prompt}` (torch "
            f"{torch.__version__}, transformers {__import__('transformers').__version__}, "
            f"onnxruntime {ort.__version__}, one thread; load average {load:.1f} on {os.cpu_count()} cores "
            f"when it ended). {ns.note}\n\n"
            "Prompt: batch 1, " f"{ns.prompt} tokens, empty cache; "
            f"decode: batch 1, one token after {ns.prompt} cached. "
            "Latency: median (min-max) milliseconds, the forms' runs alternating. Nodes: main graph and "
            "subgraphs. Ratios against onnxport's per-expert form; lower is better.\n\n" + render(rows, markdown=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
