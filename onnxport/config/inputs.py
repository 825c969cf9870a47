"""A config's inputs: their ``InputSpec``s, random tensors at given sizes, the ``dynamic_shapes``
of the export, and the validation sizes generated within the ``[dims]`` ranges."""

from __future__ import annotations

from typing import Any

import torch

from onnxport.capture.inputs import InputSpec, elements
from onnxport.capture.inputs import make_inputs as make_spec_inputs
from onnxport.capture.relations import parse_relations
from onnxport.config.schema import ExportConfig
from onnxport.verify.sizes import validation_sizes


def input_specs(cfg: ExportConfig) -> list[InputSpec]:
    """An ``onnxport.verify.InputSpec`` per declared input: its dtype and dims; floats standard
    normal, integers uniform in ``low..high-1``; a lengths input tied to ``TENSOR.DIM`` holds values
    between 1 and that dim's size, the longest equal to it, and the steps past each length of every
    input along that dim and the lengths' own dim are zero, as in a batch of padded sequences."""
    pads = {}
    for name, decl in cfg.inputs.items():
        if decl.lengths_of is None:
            continue
        for other, odecl in cfg.inputs.items():  # every input along that dim and the lengths' dim
            if other != name and decl.lengths_of[1] in odecl.dims and decl.dims[0] in odecl.dims:
                pads[other] = (name, odecl.dims.index(decl.dims[0]), odecl.dims.index(decl.lengths_of[1]))
    return [InputSpec(name, decl.dtype, tuple(decl.dims), low=decl.low, high=decl.high - 1,
                      lengths_of=decl.lengths_of[1] if decl.lengths_of else None, pad=pads.get(name), declared=True)
            for name, decl in cfg.inputs.items()]


def make_inputs(cfg: ExportConfig, sizes: dict[str, int], seed: int = 0) -> dict[str, torch.Tensor]:
    """Random inputs of the declared dtypes and dims at ``sizes`` (dim name -> size), seeded
    (``input_specs``, made by ``onnxport.verify.make_inputs``)."""
    return make_spec_inputs(input_specs(cfg), sizes, seed)


def dynamic_shapes(cfg: ExportConfig) -> dict[str, dict[int, Any]]:
    """``dynamic_shapes`` for ``to_onnx``: a ``torch.export.Dim`` with its range per dim the config
    gives a range, the plain name for the others (the conditions the model needs are then adopted)."""
    made: dict[str, Any] = {}
    out: dict[str, dict[int, Any]] = {}
    for name, decl in cfg.inputs.items():
        axes = {}
        for axis, d in enumerate(decl.dims):
            if isinstance(d, str):
                if d not in made:
                    r = cfg.dims[d]
                    made[d] = torch.export.Dim(d, min=r.min, max=r.max) if r.ranged else d
                axes[axis] = made[d]
        out[name] = axes
    return out


def default_sizes(cfg: ExportConfig, guards: list = ()) -> list[dict[str, int]]:
    """The validation size sets of ``onnxport.verify.sizes.validation_sizes`` within the [dims]
    ranges: without ``guards``, those that move every dim away from the example (the sets known
    before the export); with the export's ``guards``, also both sides of each guard's boundary."""
    example = cfg.example_sizes()
    ranges = {n: (r.min, r.max) for n, r in cfg.dims.items()}
    specs = input_specs(cfg)
    sequence = {d for s in specs for axis, d in enumerate(s.dims) if isinstance(d, str) and axis > 0}
    sets = validation_sizes(example, ranges, list(guards), relations=parse_relations(cfg.relations),
                            sequence=sequence, cost=lambda sizes: elements(specs, sizes))
    moved = [s for why, s in sets if all(s[n] != e for n, e in example.items() if n not in cfg.relations)]
    return moved + [s for why, s in sets if guards and s not in moved]
