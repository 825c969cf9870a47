"""rewrite_control_flow follows forward() into the module-level functions it calls that hold a
loop (a selective scan written as a Python loop in a helper, as Hugging Face's Mamba does)."""

import functools

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


def test_a_loop_in_a_called_function_becomes_a_scan_and_holds_at_other_lengths():
    r = check_export(Mixer(), (torch.randn(2, 5, 8),), {"x": {0: "batch", 1: "steps"}}, rewrite_control_flow=True,
                     sizes=[{"batch": 1, "steps": 1}, {"batch": 3, "steps": 17}],
                     expect_outputs={"output": ["batch", "steps", 8]})
    assert count_ops(r, "Scan") == 1
    rewritten = [n for n in r.rewrite_notes if n.rewritten and n.construct == "for"]
    assert len(rewritten) == 1 and "in selective_scan" in rewritten[0].where
    assert not any("unused_helper" in n.where for n in r.rewrite_notes)  # only functions forward calls
