"""Target ``genai-cpu`` against the standard export, decoding in onnxruntime-genai on one thread: the
Qwen2-style decoder of ``benchmarks/genai_int4.py`` (8 layers, grouped-query attention, hidden 256,
tied embeddings) trained for ``--train-steps`` seeded Adam steps on its repeated pattern, written by
``save_pretrained``, exported by ``export_pretrained`` as it is (``standard``: MatMul/Softmax attention, the cache
concatenated each step) and with ``target="genai-cpu"`` (GroupQueryAttention, one cache buffer of
``max_length`` shared by past and present), and, when it runs offline, by onnxruntime-genai's own
model builder (``python -m onnxruntime_genai.models.builder -p fp32 -e cpu``: ``builder``).

Prints, for each model: the fusions applied (``onnxport.targets.genai_cpu.genai_fusions``), the
export's own checks (validation against eager, greedy decoding against ``generate``), whether
onnxruntime-genai's greedy tokens equal the standard export's on every prompt, and decode ms/token as
``genai_int4.py`` measures it (``intra_op_num_threads`` 1; each round decodes ``--tokens`` tokens
after a prompt, the prompt's step left out; rounds alternate the models; the median over rounds).

Run: ``.venv/bin/python benchmarks/genai_cpu.py [--train-steps 68] [--rounds 7] [--tokens 128]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from genai_int4 import decode, one_thread, time_decoding, trained_model  # noqa: E402


def builder_model(source: str, out: str) -> str | None:
    """onnxruntime-genai's model builder run offline on ``source`` (fp32, CPU) into ``out``; None
    (with its last error line printed) when it does not run."""
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    run = subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", source, "-o", out,
                          "-p", "fp32", "-e", "cpu", "-c", os.path.join(out, "cache")],
                         env=env, capture_output=True, text=True)
    if run.returncode != 0 or not os.path.isfile(os.path.join(out, "genai_config.json")):
        print(f"builder: did not run ({(run.stderr.strip().splitlines() or ['?'])[-1][:200]})")
        return None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train-steps", type=int, default=68,  # the steps GENAI_CPU.md's run trained
                        help="Adam steps of the model's training (seeded)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()

    import onnxruntime_genai as og

    from onnxport.pretrained import export_pretrained
    from onnxport.targets.genai_cpu import genai_fusions

    torch.set_num_threads(1)
    model, prompts = trained_model(args.train_steps)
    with tempfile.TemporaryDirectory(prefix="onnxport-genai-cpu-") as tmp:
        source = os.path.join(tmp, "qwen2")
        model.save_pretrained(source)
        dirs = {}
        for name, target in (("standard", "onnxruntime"), ("genai-cpu", "genai-cpu")):
            start = time.perf_counter()
            result = export_pretrained(source, target=target, generate=16)
            dirs[name] = os.path.join(tmp, name)
            result.save(dirs[name])
            part = result.parts["model"]
            ops = [n.op_type for n in part.model.graph]
            print(f"{name}: exported in {time.perf_counter() - start:.1f} s, {len(ops)} nodes, "
                  f"{ops.count('GroupQueryAttention')} GroupQueryAttention, {ops.count('Softmax')} Softmax; "
                  f"fusions {genai_fusions(part.model) or '-'}; validation {'ok' if part.validation.ok else 'FAILED'} "
                  f"({len({c.inputs for c in part.validation.checks})} input sets); decoding checks "
                  f"{', '.join(f'{label}: ' + ('ok' if g.ok else 'FAILED') for label, g in result.generation)}")
        built = builder_model(source, os.path.join(tmp, "builder"))
        if built is not None:
            dirs["builder"] = built
        for d in dirs.values():
            one_thread(d)
            with open(os.path.join(d, "genai_config.json")) as f:
                config = json.load(f)
            print(f"{os.path.basename(d)}: past_present_share_buffer "
                  f"{config['search']['past_present_share_buffer']}")
        models = {name: og.Model(d) for name, d in dirs.items()}
        for name in models:
            if name == "standard":
                continue
            same = [decode(og, models[name], p, 32)[0] == decode(og, models["standard"], p, 32)[0] for p in prompts]
            print(f"onnxruntime-genai greedy tokens, {name} equal to standard: {sum(same)} of {len(prompts)} prompts "
                  f"(32 tokens each)")
        time_decoding(og, models, prompts, args.rounds, args.tokens)


if __name__ == "__main__":
    main()
