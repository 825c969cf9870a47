"""rewrite_control_flow follows forward() into the module-level functions it calls that hold a
loop (a selective scan written as a Python loop in a helper, as Hugging Face's Mamba does)."""

import functools

import pytest
import torch

from exportcheck import check_export, count_ops


def _dispatching(fn):
    """A decorator like a kernel dispatcher's: the function it wraps is what gets rewritten."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


@_dispatching
def selective_scan(decay, inputs, readout):
    batch, width, steps = inputs.shape
    state = torch.zeros(batch, width)
    outputs = []
    for t in range(steps):
        state = decay[:, :, t] * state + inputs[:, :, t]
        out = state * readout[:, t, None]  # first bound inside the loop, bound anew after it
        outputs.append(out)
    out = torch.stack(outputs, dim=-1)
    return out + inputs


def unused_helper(x):
    for _ in range(3):
        x = x + 1
    return x


class Mixer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):  # x: [batch, steps, 8]
        h = self.proj(x).transpose(1, 2)
        return selective_scan(torch.sigmoid(h), torch.tanh(h), x.mean(-1)).transpose(1, 2)


@pytest.mark.slow
def test_a_loop_in_a_called_function_becomes_a_scan_and_holds_at_other_lengths():
    r = check_export(Mixer(), (torch.randn(2, 5, 8),), {"x": {0: "batch", 1: "steps"}}, rewrite_control_flow=True,
                     sizes=[{"batch": 1, "steps": 1}, {"batch": 3, "steps": 17}],
                     expect_outputs={"output": ["batch", "steps", 8]})
    assert count_ops(r, "Scan") == 1
    rewritten = [n for n in r.rewrite_notes if n.rewritten and n.construct == "for"]
    assert len(rewritten) == 1 and "in selective_scan" in rewritten[0].where
    assert not any("unused_helper" in n.where for n in r.rewrite_notes)  # only functions forward calls


def decay_attention_steps(decay, key, value):
    """RWKV's CPU kernel: a preallocated output written one column per step, cast with ``.to(output.dtype)``."""
    output = torch.zeros_like(key)
    state = torch.zeros_like(key[:, 0])
    for t in range(key.size(1)):
        state = torch.exp(-decay) * state + key[:, t] * value[:, t]
        output[:, t] = torch.tanh(state).to(output.dtype)
    return output


def decay_attention(decay, key, value):
    """The dispatcher between kernels (no loop of its own) that ``forward`` calls."""
    if key.device.type == "cuda":
        raise NotImplementedError("a CUDA kernel")
    return decay_attention_steps(decay, key, value)


class DecayMixer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.decay = torch.nn.Parameter(torch.rand(6))
        self.key = torch.nn.Linear(6, 6)
        self.value = torch.nn.Linear(6, 6)

    def forward(self, x):  # x: [batch, steps, 6]
        return decay_attention(self.decay, self.key(x), self.value(x))


@pytest.mark.slow
def test_a_loop_two_calls_deep_with_column_writes_reading_the_dtype_becomes_a_scan():
    r = check_export(DecayMixer(), (torch.randn(2, 5, 6),), {"x": {0: "batch", 1: "steps"}},
                     sizes=[{"batch": 1, "steps": 1}, {"batch": 3, "steps": 12}],
                     expect_outputs={"output": ["batch", "steps", 6]})
    assert count_ops(r, "Scan") == 1
    assert any(n.rewritten and n.construct == "for" and "in decay_attention_steps" in n.where
               for n in r.rewrite_notes)
