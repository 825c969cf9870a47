"""Outputs that are indices chosen among values: ``topk``, ``sort``, ``argmax``, max pooling.

Among equal values (exact zeros everywhere) or beside NaN, which index such an op returns is the
implementation's choice: eager PyTorch and onnxruntime may each pick another one and both be right.
Validation does not compare these outputs on the value sets that make such ties (``TIED_KINDS``).
"""

from __future__ import annotations

import operator

import torch
from torch.utils import _pytree as pytree

from onnxport.capture.tables import PASS

aten = torch.ops.aten

TIED_KINDS = ("zeros", "special")

# op -> the position of its indices among its results (None: the op returns only indices)
_INDEX_OPS = {
    aten.topk.default: 1, aten.sort.default: 1, aten.sort.stable: 1, aten.kthvalue.default: 1,
    aten.max.dim: 1, aten.min.dim: 1, aten.median.dim: 1, aten.nanmedian.dim: 1, aten.mode.default: 1,
    aten.cummax.default: 1, aten.cummin.default: 1,
    aten.max_pool1d_with_indices.default: 1, aten.max_pool2d_with_indices.default: 1,
    aten.max_pool3d_with_indices.default: 1, aten.adaptive_max_pool1d.default: 1,
    aten.adaptive_max_pool2d.default: 1, aten.adaptive_max_pool3d.default: 1,
    aten.argmax.default: None, aten.argmin.default: None, aten.argsort.default: None, aten.argsort.stable: None,
}


def index_outputs(program) -> set[int]:
    """Positions among the user outputs (as the ONNX model and ``eager.output_leaves`` list them:
    ``None`` left out) of the outputs that are such indices, directly or through views and casts."""
    if program is None:
        return set()
    return {position for position, value in _user_outputs(program)
            if isinstance(value, torch.fx.Node) and _is_index(value)}


def _user_outputs(program) -> list[tuple[int, object]]:
    """``(position, value)`` of the program's user outputs, positions as the ONNX model and
    ``eager.output_leaves`` count them (``None`` left out); a value is an FX node or a constant."""
    out_node = next(n for n in program.graph.nodes if n.op == "output")
    found = []
    for spec, value in zip(program.graph_signature.output_specs, out_node.args[0]):
        if spec.kind.name == "USER_OUTPUT" and value is not None:
            found.append((len(found), value))
    return found


def _is_index(node: torch.fx.Node) -> bool:
    while node.op == "call_function" and node.target in PASS and node.args and isinstance(node.args[0], torch.fx.Node):
        node = node.args[0]
    if node.op != "call_function":
        return False
    if node.target in _INDEX_OPS and _INDEX_OPS[node.target] is None:
        return True
    if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
        source, index = node.args
        return source.op == "call_function" and _INDEX_OPS.get(source.target, -1) == index
    return False


# ------------------------------------------------------------------------------ ties inside the model
# op -> how to find a tie among the values it chooses from ("extreme": several equal to the chosen
# max or min along the dim; "equal": any two equal along the dim, which a sort orders either way)
_TIE_FORMS = {
    aten.argmax.default: "max", aten.argmin.default: "min", aten.max.dim: "max", aten.min.dim: "min",
    aten.topk.default: "equal", aten.sort.default: "equal", aten.argsort.default: "equal",
    aten.kthvalue.default: "equal", aten.median.dim: "equal", aten.nanmedian.dim: "equal", aten.mode.default: "equal",
}


NEAR_ULPS = 8  # floats this many epsilons (of the largest magnitude along the dim) apart are tied
_DIM_AT = {aten.topk.default: 2, aten.kthvalue.default: 2}  # the dim's position among the args (else 1)
_WHOLE = (aten.argmax.default, aten.argmin.default)  # no dim: over the flattened tensor


class TieWatch:
    """The index-choosing ops inside a program (``argmin``, ``argmax``, ``max.dim``, ``topk``,
    ``sort``...) whose indices reach user outputs, directly or through what they drive (a gather of
    the chosen code, its sum, the residual left): ``tied(args, kwargs)`` runs the program on one
    input set and says which outputs a tie among the values such an op chose from reached there.

    Eager PyTorch and onnxruntime may each pick another of equally near codes and both be right,
    and then everything computed from the pick differs: such outputs, where they differ, are not
    compared on that set (a residual vector quantizer's exact-zeros set, where every codebook
    distance ties). A tie is found from the values, on any set; an export wrong elsewhere still
    fails on the sets without one.
    """

    def __init__(self, program):
        self.program = program
        positions: dict[torch.fx.Node, set[int]] = {}  # a node returned more than once: each position
        for position, value in _user_outputs(program):
            if isinstance(value, torch.fx.Node):
                positions.setdefault(value, set()).add(position)
        self.reach: dict[str, set[int]] = {}  # the op's node name -> the user outputs its indices reach
        for node in program.graph.nodes:
            if node.op == "call_function" and node.target in _TIE_FORMS:
                sources = [node] if _INDEX_OPS.get(node.target, -1) is None else \
                    [u for u in node.users if u.target is operator.getitem and u.args[1] == _INDEX_OPS[node.target]]
                reached = _downstream(sources, positions)
                if reached:
                    self.reach[node.name] = reached
        self._module = None

    def __bool__(self) -> bool:
        return bool(self.reach)

    @property
    def outputs(self) -> set[int]:
        """The user output positions some watched op's indices reach."""
        return set().union(*self.reach.values())

    def tied(self, args: tuple, kwargs: dict) -> dict[int, str]:
        """User output position -> the op whose tie reached it, for this input set (empty when the
        program cannot run here: nothing is left uncompared then)."""
        if not self.reach:
            return {}
        from onnxport.errors import user_source_line

        if self._module is None:
            self._module = self.program.module()
        watch, found = self.reach, {}

        class Run(torch.fx.Interpreter):
            def run_node(self, n):
                out = super().run_node(n)
                if n.name in watch and n.name not in found:
                    a, kw = self.fetch_args_kwargs_from_env(n)
                    if _has_tie(n.target, a, kw):
                        line = user_source_line(n)
                        found[n.name] = n.target.__name__.split(".")[0] + (f" at {line}" if line else "")
                return out

        try:
            with torch.no_grad():
                Run(self._module).run(*pytree.tree_leaves((args, kwargs)))
        except Exception:  # noqa: BLE001 - the program refusing these inputs: no tie known
            return {}
        return {p: found[name] for name in found for p in watch[name]}


def _downstream(sources: list, positions: dict) -> set[int]:
    seen, todo, out = set(), list(sources), set()
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        out |= positions.get(node, set())
        todo.extend(u for u in node.users if u.op != "output")
    return out


def _has_tie(target, args: tuple, kwargs: dict) -> bool:
    """Whether the values ``target`` chose from hold a tie: several equal to the chosen extreme
    along the dim (``"max"``/``"min"``), or any two equal along it (``"equal"``; for ``topk``, among the
    k chosen and the first left out, the values that decide its result), or a NaN. Floats
    count as equal within ``NEAR_ULPS`` of their dtype's epsilon times the largest magnitude along
    the dim: what eager computes as a tie, onnxruntime may compute an ulp apart, and the reverse."""
    x = args[0] if args else kwargs.get("self")
    if not isinstance(x, torch.Tensor) or x.numel() == 0:
        return False
    form = _TIE_FORMS[target]
    at = _DIM_AT.get(target, 1)
    dim = kwargs.get("dim", args[at] if len(args) > at else (None if target in _WHOLE else -1))
    if x.is_floating_point() and bool(torch.isnan(x).any()):
        return True
    if dim is None:
        x, dim = x.reshape(-1), 0
    if x.dim() == 0:
        return False
    if x.is_floating_point():  # equal up to rounding: another runtime computes the values with other ulps
        eps = torch.finfo(x.dtype).eps
        x = x.double()
        near = NEAR_ULPS * eps * x.abs().amax(dim, keepdim=True)
    else:
        near = torch.zeros((), dtype=torch.float64)
    if form in ("max", "min"):
        extreme = x.amax(dim, keepdim=True) if form == "max" else x.amin(dim, keepdim=True)
        return bool((((x - extreme).abs() <= near).sum(dim) > 1).any())
    if target is aten.topk.default:  # only the k chosen and the first left out decide what topk returns
        k = args[1] if len(args) > 1 else kwargs["k"]
        largest = args[3] if len(args) > 3 else kwargs.get("largest", True)
        x = x.topk(min(int(k) + 1, x.shape[dim]), dim, largest=bool(largest)).values
    if x.shape[dim] < 2:
        return False
    ordered = x.sort(dim).values
    gaps = ordered.narrow(dim, 1, ordered.shape[dim] - 1) - ordered.narrow(dim, 0, ordered.shape[dim] - 1)
    return bool((gaps <= near).any())
