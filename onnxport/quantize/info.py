"""What a quantized result carries about its quantization, and the tolerance it is judged by."""

from __future__ import annotations

import dataclasses

from onnxport.quantize.choose import WeightNode

MODES = ("int8", "int8-static", "int4")


@dataclasses.dataclass(frozen=True)
class AccuracyTolerance:
    """What a quantized model must keep of the float model's results, in the user's terms.

    Attributes:
        top1: the least fraction of rows (every position of every input set) of a classifier-like
            output whose argmax equals eager PyTorch's (default 0.99).
        cosine: the least mean cosine similarity, over rows of the last axis, between a
            hidden-state output and eager PyTorch's, on every input set (default 0.99).
        tokens: the least fraction of greedy decoding steps whose token equals the model's own
            ``generate``'s, each step fed eager's tokens so far (``check_generation``; default 0.99).
    """

    top1: float = 0.99
    cosine: float = 0.99
    tokens: float = 0.99

    def __str__(self) -> str:
        return f"top-1 >= {self.top1:g}, cosine >= {self.cosine:g}, greedy tokens >= {self.tokens:g}"


@dataclasses.dataclass(frozen=True)
class Quantization:
    """How a result was quantized.

    Attributes:
        mode: ``"int8"`` (dynamic, per-channel weights), ``"int8-static"`` (QDQ, calibrated) or
            ``"int4"`` (weight-only ``MatMulNBits``).
        nodes: every weight node of the float model, with why it stayed in float (``WeightNode.kept``).
        tolerance: the ``AccuracyTolerance`` ``validate()`` and ``check_generation`` judge by.
        block_size: int4's block size along the input dimension (0 for the int8 modes).
        calibration: how int8-static's activation ranges were found (``"given inputs (8 sets)"``).
        kinds: output name -> ``"classes"``, ``"hidden"`` or ``"exact"``: how the accuracy check
            judges each output (read on the float graph, or given by the user).
        shared_embeddings: the embedding tables whose ``Gather`` reads the int4 blocks of the
            projection tied to them (``GatherBlockQuantized``; ``quantize(shared_embedding=True)``).
    """

    mode: str
    nodes: tuple[WeightNode, ...]
    tolerance: AccuracyTolerance = AccuracyTolerance()
    block_size: int = 0
    calibration: str = ""
    kinds: tuple[tuple[str, str], ...] = ()
    shared_embeddings: tuple[str, ...] = ()

    @property
    def quantized(self) -> list[WeightNode]:
        return [n for n in self.nodes if not n.kept]

    @property
    def kept_float(self) -> list[WeightNode]:
        return [n for n in self.nodes if n.kept]

    def __str__(self) -> str:
        kept = ", ".join(f"{n.weight} ({n.kept})" for n in self.kept_float) or "none"
        extra = f", block size {self.block_size}" if self.block_size else ""
        extra += f", calibrated on {self.calibration}" if self.calibration else ""
        extra += "".join(f", embedding {t} gathered from the tied projection's int4 blocks"
                         for t in self.shared_embeddings)
        return (f"{self.mode}{extra}: {len(self.quantized)} of {len(self.nodes)} weight nodes quantized; "
                f"kept in float: {kept}")
