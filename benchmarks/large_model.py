"""A Llama-style decoder larger than memory, exported from its sharded checkpoint without loading it.

1. Writes a random Llama-style checkpoint (Llama-2-7B's widths: hidden 4096, MLP 11008, 32 heads,
   vocabulary 32000; as many layers as the size asks for) as sharded safetensors with its
   ``model.safetensors.index.json``, shard by shard (one shard in memory at a time).
2. Times copying the checkpoint's bytes (``shutil.copyfile`` of every shard, the copy removed).
   Before the copy and before the export the shards are dropped from the page cache
   (``posix_fadvise(DONTNEED)``, these files only): both read them from the disk.
3. In a fresh process: builds the model under ``onnxport.weights.empty_weights()`` (parameters on
   the meta device), exports it with its cache (``DynamicCache`` inputs, ``present.*`` outputs)
   with ``to_onnx(weights=<index>)`` and saves it (external data streamed from the shards), and
   reports export and save seconds and the process's peak resident memory (``VmHWM``).
   With ``--limit-gb``, that process's address space is capped (``RLIMIT_AS``) below the
   checkpoint's size: the export cannot hold the weights in memory, even for a moment.
4. The same for a smaller model (hidden 2048, MLP 5632, 16 heads; ``--eager-gb``), then
   ``validate(load_eager=True)``: the checkpoint loaded into a real model, onnxruntime against
   eager PyTorch.

Prints one table: checkpoint size, export + save seconds against the copy's, peak RSS against
the checkpoint's size, with the targets (peak RSS <= 25% of the checkpoint, time <= 1.5x the
copy). The checkpoints and ONNX files are removed afterwards unless ``--keep``. Needs free disk
for about three times ``--size-gb`` at the moment of the copy (checkpoint, copy) and twice during
the export (checkpoint, ONNX data).

    python benchmarks/large_model.py                    # 1.5x the machine's memory, then 2.5 GB
    python benchmarks/large_model.py --size-gb 12 --eager-gb 2.5 --dir /tmp/large
    python benchmarks/large_model.py --markdown benchmarks/LARGE.md
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GB = 1e9
BIG = dict(hidden_size=4096, intermediate_size=11008, num_attention_heads=32, num_key_value_heads=32,
           vocab_size=32000)
SMALL = dict(hidden_size=2048, intermediate_size=5632, num_attention_heads=16, num_key_value_heads=16,
             vocab_size=32000)
DIMS = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
        "position_ids": {0: "batch", 1: "seq"}, "past_key_values": {0: "batch", 2: "past"}}


def memory_bytes() -> int:
    with open("/proc/meminfo") as f:
        return int(next(line for line in f if line.startswith("MemTotal")).split()[1]) * 1024


def config(widths: dict, size_bytes: float, dtype: torch.dtype):
    """A LlamaConfig with ``widths`` and the number of layers (at least 1) that brings the
    checkpoint closest to ``size_bytes``."""
    import transformers

    h, f, v = widths["hidden_size"], widths["intermediate_size"], widths["vocab_size"]
    kv = h * widths["num_key_value_heads"] // widths["num_attention_heads"]
    per_layer = (2 * h * h + 2 * h * kv + 3 * h * f + 2 * h) * dtype.itemsize
    fixed = (2 * v * h + h) * dtype.itemsize
    layers = max(1, round((size_bytes - fixed) / per_layer))
    return transformers.LlamaConfig(num_hidden_layers=layers, max_position_embeddings=4096, dtype=dtype,
                                    tie_word_embeddings=False, **widths)


def meta_model(cfg):
    import transformers

    from onnxport.weights import empty_weights

    with empty_weights():  # transformers builds in float32 whatever cfg.dtype says: cast on meta (free)
        return transformers.LlamaForCausalLM(cfg).to(cfg.dtype).eval()


def write_checkpoint(cfg, folder: Path, shard_bytes: float) -> tuple[int, float]:
    """Random weights for ``cfg`` as sharded safetensors in ``folder`` (index included), one shard
    in memory at a time. Returns (bytes, seconds)."""
    from safetensors.torch import save_file

    t0 = time.perf_counter()
    shapes = {k: (tuple(t.shape), t.dtype) for k, t in meta_model(cfg).state_dict().items()}
    needed = sum(t.numel() * t.element_size() for t in meta_model(cfg).state_dict().values())
    free = shutil.disk_usage(folder.parent if folder.parent.exists() else "/").free
    if free < 2.2 * needed:  # the checkpoint and its copy (or its ONNX data), with a margin
        raise SystemExit(f"{needed / GB:.1f} GB of weights need {2.2 * needed / GB:.0f} GB free on {folder.parent}, "
                         f"{free / GB:.0f} GB are: give a smaller --size-gb")
    shards, current, size = [], [], 0
    for name, (shape, dtype) in shapes.items():
        n = dtype.itemsize
        for d in shape:
            n *= d
        if current and size + n > shard_bytes:
            shards.append(current)
            current, size = [], 0
        current.append(name)
        size += n
    shards.append(current)
    folder.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(0)
    weight_map, total = {}, 0
    for i, names in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        tensors = {}
        for name in names:
            shape, dtype = shapes[name]
            if name.endswith("norm.weight"):
                t = torch.ones(shape, dtype=dtype)
            else:
                t = torch.empty(shape, dtype=torch.float32).normal_(0, 0.02, generator=gen).to(dtype)
            tensors[name] = t
            weight_map[name] = file
            total += t.numel() * t.element_size()
        save_file(tensors, str(folder / file), metadata={"format": "pt"})
        del tensors
    with open(folder / "model.safetensors.index.json", "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
    os.sync()
    return total, time.perf_counter() - t0


def evict(folder: Path) -> None:
    """Drop the shards of ``folder`` from the page cache (``posix_fadvise(DONTNEED)`` on each, after
    ``os.sync()``; other files are untouched), so that the copy and the export both read them from
    the disk: whichever ran second would otherwise find more of them cached."""
    os.sync()
    for shard in sorted(folder.glob("*.safetensors")):
        fd = os.open(shard, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def copy_seconds(folder: Path) -> float:
    """Seconds to copy every shard of ``folder`` (the copy removed afterwards), read from the disk."""
    target = folder.parent / (folder.name + "-copy")
    target.mkdir(exist_ok=True)
    evict(folder)
    t0 = time.perf_counter()
    for shard in sorted(folder.glob("*.safetensors")):
        shutil.copyfile(shard, target / shard.name)
    os.sync()
    seconds = time.perf_counter() - t0
    shutil.rmtree(target)
    return seconds


def example(cfg, past: int = 5, seq: int = 3) -> dict:
    """One decoding step's keyword inputs: a cache of ``past`` random steps and ``seq`` new tokens."""
    from transformers import DynamicCache

    gen = torch.Generator().manual_seed(1)
    heads = cfg.num_key_value_heads
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    cache = DynamicCache(config=cfg)
    for layer in range(cfg.num_hidden_layers):
        cache.update(torch.randn(2, heads, past, head_dim, generator=gen).to(cfg.dtype),
                     torch.randn(2, heads, past, head_dim, generator=gen).to(cfg.dtype), layer)
    return dict(input_ids=torch.randint(3, cfg.vocab_size, (2, seq), generator=gen),
                attention_mask=torch.ones(2, past + seq, dtype=torch.int64),
                position_ids=torch.arange(past, past + seq).expand(2, seq), past_key_values=cache, use_cache=True)


def peak_rss(key: str = "VmHWM") -> int:
    """Bytes of this process's peak resident memory (``VmHWM``; ``VmPeak``: peak virtual memory)."""
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith(key)).split()[1]) * 1024


def export_phase(args) -> None:
    """In a fresh process: export the checkpoint at ``args.ckpt`` and print one JSON line."""
    import warnings

    import transformers

    import onnxport

    warnings.filterwarnings("ignore")
    if args.limit_gb:  # the address space capped: holding the weights in memory would fail
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (int(args.limit_gb * GB), int(args.limit_gb * GB)))
    cfg = transformers.LlamaConfig.from_json_file(str(Path(args.ckpt) / "config.json"))
    cfg.dtype = getattr(torch, args.dtype)
    base = peak_rss()
    t0 = time.perf_counter()
    model = meta_model(cfg)
    result = onnxport.to_onnx(model, kwargs=example(cfg), dynamic_shapes=DIMS, relations={"total": "past + seq"},
                              weights=str(Path(args.ckpt) / "model.safetensors.index.json"))
    t1 = time.perf_counter()
    reads_before_save = result.weights.checkpoint.reads
    result.save(str(Path(args.out) / "model.onnx"))
    os.sync()
    t2 = time.perf_counter()
    after_save = peak_rss()
    out = {"export_s": t1 - t0, "save_s": t2 - t1, "peak_rss": after_save, "rss_at_start": base,
           "vm_peak": peak_rss("VmPeak"), "limit_gb": args.limit_gb,
           "reads_before_save": reads_before_save, "tensors": len(result.weights.checkpoint),
           "onnx_bytes": sum(p.stat().st_size for p in Path(args.out).iterdir()), "timings": result.timings}
    if args.validate:
        t3 = time.perf_counter()
        report = result.validate(load_eager=True)
        out.update(validate_s=time.perf_counter() - t3, validate_ok=report.ok, peak_rss_validate=peak_rss(),
                   checks=len(report.checks), max_abs=report.max_abs)
        if not report.ok:
            print(report, file=sys.stderr)
    print("RESULT " + json.dumps(out), flush=True)


def run(label: str, widths: dict, size_gb: float, args, validate: bool) -> dict:
    dtype = getattr(torch, args.dtype)
    cfg = config(widths, size_gb * GB, dtype)
    folder = Path(args.dir) / f"{label}-ckpt"
    out = Path(args.dir) / f"{label}-onnx"
    for p in (folder, out):
        shutil.rmtree(p, ignore_errors=True)
    print(f"[{label}] writing {cfg.num_hidden_layers} layers, about {size_gb:.1f} GB, to {folder}", flush=True)
    total, write_s = write_checkpoint(cfg, folder, args.shard_gb * GB)
    cfg.to_json_file(str(folder / "config.json"))
    print(f"[{label}] wrote {total / GB:.2f} GB in {write_s:.0f} s; copying", flush=True)
    copy_s = copy_seconds(folder)
    print(f"[{label}] copy {copy_s:.1f} s; exporting in a fresh process", flush=True)
    out.mkdir(parents=True)
    cmd = [sys.executable, __file__, "--phase", "export", "--ckpt", str(folder), "--out", str(out),
           "--dtype", args.dtype] + (["--validate"] if validate else []) + \
        (["--limit-gb", str(args.limit_gb)] if args.limit_gb and not validate else [])
    load_before = os.getloadavg()[0]
    evict(folder)
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        print(proc.stdout[-3000:], proc.stderr[-5000:], sep="\n")
        raise SystemExit(f"[{label}] the export failed (exit {proc.returncode})")
    res = json.loads(line[len("RESULT "):])
    res.update(label=label, layers=cfg.num_hidden_layers, ckpt_bytes=total, write_s=write_s, copy_s=copy_s,
               load=(load_before, os.getloadavg()[0]), dtype=args.dtype)
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
    print(f"[{label}] {json.dumps(res)}", flush=True)
    return res


def table(rows: list[dict]) -> str:
    head = ("model", "layers", "checkpoint", "copy s", "export s", "save s", "export+save / copy",
            "peak RSS", "peak RSS / checkpoint", "eager validation", "load")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        total = r["export_s"] + r["save_s"]
        val = "-"
        if "validate_ok" in r:
            val = (f"{'ok' if r['validate_ok'] else 'FAILED'} ({r['checks']} checks) in {r['validate_s']:.0f} s, "
                   f"peak RSS {r['peak_rss_validate'] / GB:.1f} GB")
        cells = (f"{r['label']} ({r['dtype']})", r["layers"], f"{r['ckpt_bytes'] / GB:.2f} GB", f"{r['copy_s']:.1f}",
                 f"{r['export_s']:.1f}", f"{r['save_s']:.1f}", f"{total / r['copy_s']:.2f}x",
                 f"{r['peak_rss'] / GB:.2f} GB", f"{r['peak_rss'] / r['ckpt_bytes']:.1%}", val,
                 f"{r['load'][0]:.1f} / {r['load'][1]:.1f}")
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=None,
                        help="checkpoint size of the large model in GB (default: 1.5x the machine's memory)")
    parser.add_argument("--eager-gb", type=float, default=2.5, help="size of the model validated in eager (0: skip)")
    parser.add_argument("--shard-gb", type=float, default=2.0, help="bytes per safetensors shard, in GB")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--dir", default="/tmp/onnxport-large", help="where checkpoints and ONNX files go")
    parser.add_argument("--keep", action="store_true", help="keep the checkpoints and ONNX files")
    parser.add_argument("--markdown", help="append the table to this file")
    parser.add_argument("--limit-gb", type=float, default=0,
                        help="cap the large model's export process's address space (RLIMIT_AS) at this many GB")
    parser.add_argument("--phase", default="all", choices=["all", "export"], help=argparse.SUPPRESS)
    parser.add_argument("--ckpt", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--validate", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase == "export":
        export_phase(args)
        return
    size = args.size_gb if args.size_gb is not None else 1.5 * memory_bytes() / GB
    free = shutil.disk_usage(Path(args.dir).parent if not Path(args.dir).exists() else args.dir).free / GB
    print(f"memory {memory_bytes() / GB:.1f} GB, large checkpoint {size:.1f} GB, free disk {free:.1f} GB, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    if free < 2.2 * size:
        raise SystemExit(f"{free:.0f} GB free on {args.dir}: the checkpoint, its copy and the ONNX data need about "
                         f"{2.2 * size:.0f} GB; give a smaller --size-gb or another --dir")
    rows = [run("large", BIG, size, args, validate=False)]
    if args.eager_gb > 0:
        rows.append(run("eager", SMALL, args.eager_gb, args, validate=True))
    text = table(rows)
    print(text)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
