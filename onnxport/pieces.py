"""A model whose code branches on a size, both sides of which eager PyTorch runs, exported in pieces.

DeepSeek-V4's compressor reads ``if chunk_kv.shape[1] > 0:`` (whole windows of 4 tokens exist) and
then ``if n_windows > 1:``; torch.export follows the side the example takes, so one program holds
for ``4 <= seq <= 7`` only, and the rewrite into ``torch.cond`` cannot take a side that writes into
the module or a list. Yet each side is a program: the declared range of the branching dim is cut
where the branch's condition changes value (``split``: at most ``MAX_PIECES`` intervals, found by
evaluating the condition, as ``capture.guards`` decided it, at every size from the declared minimum
on), each interval is exported on its own (torch.export given that range, the dim's conditions decided
as for the declared dim: ``capture.capture(within=...)``; an interval of one size with the dim
static; at an example inside it, made like the
user's: ``capture.inputs.inputs_like_example``), a piece that branches again being cut again, and
the ONNX models are joined under ``If`` nodes on the dim's size (``join_pieces.join``): each size
runs the program its side traced. (DeepSeek-V4 itself branches again at every further window count
past 8, more pieces than ``MAX_PIECES``: it stays refused.)

Where the condition is not one a size alone decides (two dims), or changes value more often than
``MAX_PIECES`` allows (a remainder), or a piece fails to export, the branch is refused as before,
the refusal saying what the pieces met.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch

from onnxport.capture.guards.far_bounds import SCANNED  # sizes above the minimum where a condition is evaluated
from onnxport.errors import CaptureTimeoutError, ExportError, SpecializationError

MAX_PIECES = 4


@dataclasses.dataclass(frozen=True)
class Interval:
    """Sizes ``lower..upper`` of one dim (``upper`` None: unbounded), where the branch's condition
    is ``holds``, and the size exported there (``example``; ``own``: the user's example's)."""

    dim: str
    lower: int
    upper: int | None
    holds: bool
    example: int
    own: bool = False

    def __contains__(self, size: int) -> bool:
        return size >= self.lower and (self.upper is None or size <= self.upper)

    def sizes_of(self, sizes: list[dict]) -> list[dict]:
        """The size sets (``{dim: size}``) of ``sizes`` this piece is validated at (``verify.pieces``):
        those whose size of the dim it holds, and, where it holds the example, those that leave the
        dim out; the dim left out of each where the piece has one size (the dim static in its export)."""
        mine = [s for s in sizes if (s[self.dim] in self if self.dim in s else self.own)]
        return [{k: v for k, v in s.items() if k != self.dim} for s in mine] if self.lower == self.upper else mine

    def __str__(self) -> str:
        if self.upper is None:
            return f"{self.dim} >= {self.lower}"
        if self.lower == self.upper:
            return f"{self.dim} == {self.lower}"
        return f"{self.lower} <= {self.dim} <= {self.upper}"


def splittable(error: BaseException) -> bool:
    """Whether ``error`` refuses a branch on one size whose condition capture could evaluate."""
    condition = getattr(error, "condition", None)
    return isinstance(error, SpecializationError) and condition is not None and len(condition[1]) == 1 \
        and getattr(error, "captured", None) is not None


def split(error: SpecializationError, within: dict | None = None) -> list[Interval] | None:
    """The intervals of the branching dim's range (declared, or the piece's: ``within``) where the
    branch's condition keeps one value, in order; None when it changes value more than
    ``MAX_PIECES - 1`` times over the sizes scanned, keeps one value over them all, or the example
    lies outside them (``unsplit``: which)."""
    return _split(error, within)[0]


def unsplit(error: SpecializationError, within: dict | None = None) -> str:
    """Why ``split`` finds no intervals for ``error``'s condition, in words that fit it ("" when it does)."""
    return _split(error, within)[1]


def _split(error: SpecializationError, within: dict | None) -> tuple[list[Interval] | None, str]:
    from onnxport.capture.guards.conditions import _call, _compile

    python, (name,) = error.condition
    declared = next((d for d in error.captured.declared if d.name == name), None)
    example = _declared_sizes(error.captured).get(name)
    if declared is None or example is None:
        return None, f"{name} is not a dimension of the example's inputs"
    lo, hi = (within or {}).get(name, (declared.min, declared.max))
    lo = lo if declared.ranged and lo == 0 else max(1, lo)  # size 0 where the user's range holds it
    top = min(hi, max(lo, 1) + SCANNED) if hi is not None else max(lo, 1) + SCANNED
    fn = _compile(python, (name,))
    runs: list[list] = []
    for size in range(lo, top + 1):  # size 0 too where the range holds it: the first If takes it
        value = bool(_call(fn, [size]))
        if runs and runs[-1][2] == value:
            runs[-1][1] = size
        else:
            runs.append([size, size, value])
        if len(runs) > MAX_PIECES:
            return None, (f"its condition, {python}, changes value more than {MAX_PIECES - 1} times between "
                          f"{name} = {lo} and {size}: more than {MAX_PIECES} pieces")
    if len(runs) == 1:
        return None, (f"its condition, {python}, keeps one value over the {top - lo + 1} sizes scanned "
                      f"({name} = {lo}..{top}){_beyond(error, fn, name, top)}")
    if hi is None or hi > top:
        runs[-1][1] = hi  # the last value holds on
    out = []
    for a, b, value in runs:
        own = a <= example and (b is None or example <= b)
        out.append(Interval(name, a, b, value, example if own else _inside(a, b), own))
    if not any(iv.own for iv in out):
        return None, f"the example's {name} = {example} lies outside the sizes scanned ({name} = {lo}..{top})"
    return out, ""


def _beyond(error: SpecializationError, fn: Callable, name: str, top: int) -> str:
    """Where the condition ``fn``, one value up to ``top``, takes its other side above it, in words: the
    exact size where it changes once (``conditions.last_holding``), else the first excluded size the
    refusal lists; "" when it lists none above ``top``."""
    from onnxport.capture.guards.conditions import last_holding

    other = next((e[name] for e in getattr(error, "excluded", ()) if name in e and e[name] > top), None)
    if other is None:
        return ""
    edge = last_holding(fn, top, other)
    if edge is not None:
        return f"; its other side starts at {name} = {edge + 1}"
    return f"; it changes value beyond them, first at {name} = {other} among the sizes checked"


def _declared_sizes(captured: Any) -> dict[str, int]:
    """dim name -> its size in the example, for every axis declared dynamic."""
    shapes = {inp.name: getattr(inp.example, "shape", None) for inp in captured.inputs}
    return {d.name: int(shapes[d.input_name][d.axis]) for d in captured.declared
            if shapes.get(d.input_name) is not None and d.axis < len(shapes[d.input_name])}


def _symbol_names(captured: Any) -> dict:
    """torch's symbol -> the declared dim name, for every declared axis the program gave a symbol."""
    from onnxport.capture.captured import expr_of

    values = {inp.name: inp.value for inp in captured.inputs}
    out = {}
    for d in captured.declared:
        shape = getattr(values.get(d.input_name), "shape", None)
        if shape is not None and d.axis < len(shape):
            out.setdefault(expr_of(shape[d.axis]), d.name)
    return out


def _inside(lower: int, upper: int | None) -> int:
    """The size to export an interval at: its top where bounded (2 and up where it can: torch.export
    fixes sizes 0 and 1), else one above its bottom."""
    if upper is not None:
        return upper
    return max(lower, 2) + 1


def inputs_at(error: SpecializationError, interval: Interval) -> tuple[tuple, dict]:
    """Inputs like the example's, the interval's dim at its example size (the other dims as in the
    example, a dim related to it by ``relations`` following it)."""
    from onnxport.capture.inputs import inputs_like_example
    from onnxport.capture.relations import evaluate

    captured = error.captured
    sizes = {**_declared_sizes(captured), interval.dim: interval.example}
    if captured.relations:  # a related dim (``total = past + seq``) follows its terms
        sizes = evaluate(captured.relations, {k: v for k, v in sizes.items() if k not in captured.relations})
    return inputs_like_example(captured, _symbol_names(captured), sizes, seed=0)


def export_in_pieces(error: SpecializationError, args: tuple, kwargs: dict, within: dict,
                     export: Callable[[tuple, dict, dict], Any], budget: list[int]) -> list[tuple[Interval, Any]]:
    """Each interval of ``split(error)`` exported by ``export(args, kwargs, within)`` (``within``: dim ->
    ``(min, max)``, the ranges of the piece, the enclosing pieces' included; the example's interval
    with the user's inputs); ``budget`` (a one-element list) counts the pieces left, shared with the
    pieces' own splits.

    Raises ``error``, its hint saying what the pieces met, when the condition does not split or a
    piece fails to export."""
    intervals, why = _split(error, within)
    if intervals is None:
        raise not_split(error, why)
    if budget[0] < len(intervals):
        raise not_split(error, f"it would take more than {MAX_PIECES} pieces")
    budget[0] -= len(intervals) - 1
    out = []
    for interval in intervals:
        try:
            given = (args, kwargs) if interval.own else inputs_at(error, interval)
            ranges = {**within, interval.dim: (interval.lower, interval.upper)}
            out.append((interval, export(given[0], given[1], ranges)))
        except CaptureTimeoutError as slow:  # said as it is: where the time went
            raise slow.with_hint(f"the trace held on one side of a branch ({error.summary}) and the piece {interval} "
                                 f"was exported on its own: {slow.hint}") from None
        except ExportError as failed:
            inner = getattr(failed, "split_why", None)  # the piece's own cut, where that failed
            raise not_split(error, f"the piece {interval} failed: {failed.summary}" +
                            (f"; cutting it: {inner}" if inner else "")) from None
    return out


def not_split(error: SpecializationError, why: str) -> SpecializationError:
    """``error`` with its hint saying why exporting each side on its own did not help (``why`` kept
    as ``split_why``, for the refusal of an enclosing piece)."""
    tried = f"exporting each side of the branch on its own did not help ({why})"
    again = error.with_hint(f"{error.hint}; {tried}" if error.hint else tried)
    again.split_why = why
    return again


def joined(pieces: list[tuple[Interval, Any]]) -> Any:
    """One ``ExportResult`` from the pieces' (``export_in_pieces``): their models joined
    (``join_pieces.join``), the example's piece as its ``captured`` with every piece's guards,
    each qualified by its interval (``qualified``), and the split dim's range the pieces' union."""
    from onnxport.join_pieces import join, joined_model

    intervals = [iv for iv, _ in pieces]
    base = next(r for iv, r in pieces if iv.own)
    proto = join([r.model_proto for _, r in pieces], intervals[0].dim, [iv.upper for iv in intervals[:-1]])
    guards = [qualified(g, iv) for iv, r in pieces for g in r.guards]
    variables = {s: dataclasses.replace(v, lo=intervals[0].lower, hi=intervals[-1].upper)
                 if v.name == intervals[0].dim else v for s, v in base.captured.variables.items()}
    captured = dataclasses.replace(base.captured, guards=guards, variables=variables)
    model = joined_model(proto, base.dim_names)
    # each piece's result keeps the joined model (its own graph lives on inside it, not twice in memory)
    kept = tuple((iv, r.replace(model=model)) for iv, r in pieces)
    return base.replace(model=model, captured=captured, pieces=kept,
                        rewrite_notes=[n for _, r in pieces for n in r.rewrite_notes])


def qualified(guard: Any, interval: Interval) -> Any:
    """``guard`` as a condition of the joined model: it holds wherever the sizes leave ``interval``."""
    inside = f"{interval.dim} >= {interval.lower}" + \
        (f" and {interval.dim} <= {interval.upper}" if interval.upper is not None else "")
    return dataclasses.replace(guard, text=f"{guard.text} (where {interval})",
                               python=f"not ({inside}) or ({guard.python})",
                               names=tuple(dict.fromkeys((*guard.names, interval.dim))))


def notice(error: SpecializationError, pieces: list[tuple[Interval, Any]]) -> str:
    """The warning saying where the trace held on one side only, and that each side was exported."""
    shown = ", ".join(str(iv) for iv, _ in pieces)
    return (f"the trace of the model holds only where {error.condition[0]} (at {error.where}), and eager PyTorch "
            f"runs the other side: onnxport exported each side on its own and joined them with ONNX If on the "
            f"size ({shown}); ExportResult.pieces lists them, validate() compares every piece")


def floor_branch(result: Any, guard: Any) -> SpecializationError:
    """The branch ``export_in_pieces`` cuts at size 1: ``guard`` is a kept ``n >= 2`` that only
    torch.export's default minimum made (``verify.default_floor``), where the export differs from
    eager PyTorch at ``n = 1`` (``if x.shape[1] == 1:`` decided from that minimum). Size 1 is then
    exported on its own, the dim static there."""
    from onnxport.capture.guards.conditions import branch_error

    (name,) = dict.fromkeys(n for e in guard.excluded for n in e)
    error = branch_error(f"{name} >= 2", guard.excluded, guard.where or "", f"{name} >= 2", (name,))
    error.captured = result.captured
    return error


def adopted_split(result: Any, within: dict) -> SpecializationError | None:
    """Within a piece: a condition on the piece's dim the export adopted (a range torch narrowed
    where the model's code branched, read without its ``if``: DeepSeek-V4's ``n_windows > 1`` in
    the piece ``seq >= 4``) whose other side eager PyTorch runs, as the refusal of a branch that
    ``export_in_pieces`` cuts the piece at; None when no adopted condition is of that kind."""
    from onnxport.capture.guards.conditions import branch_error
    from onnxport.capture.guards.probe import eager_refusal_on

    for guard in result.constraints:
        if len(guard.names) != 1 or guard.names[0] not in within:
            continue
        error = branch_error(guard.text, guard.excluded, guard.where or "", guard.python, guard.names)
        error.captured = result.captured
        intervals = split(error, within)
        other = next((iv for iv in intervals or () if not iv.own), None)
        if other is None or not isinstance(result.module, torch.nn.Module):
            continue
        args, kwargs = inputs_at(error, other)
        if eager_refusal_on(result.module, result.captured, args, kwargs) is None:
            return error
    return None
