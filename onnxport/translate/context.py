"""TranslationContext: the state shared by translations while one FX graph becomes one ONNX graph.

It maps FX nodes to ``onnx_ir.Value``s, emits nodes (``ctx.op.Add(a, b)``), makes constants once
per graph, computes each symbolic dimension once (see ``symbolic.py``), and records on every node
the user source line that produced it (``metadata_props["source"]``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx_ir as ir
import torch
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

from onnxport.metadata import SOURCE_KEY
from onnxport.translate import dtypes, symbolic



class _OpBuilder:
    """``ctx.op.OpType(*inputs, **attributes)``; ``_outputs=n`` for several outputs, ``_domain=``."""

    def __init__(self, ctx: "TranslationContext"):
        self._ctx = ctx

    def __getattr__(self, op_type: str):
        def make(*inputs, _outputs: int = 1, _domain: str = "", **attrs):
            return self._ctx.emit(op_type, inputs, attrs, num_outputs=_outputs, domain=_domain)

        make.__name__ = op_type
        return make


class TranslationContext:
    """Per-graph translation state.

    Args:
        opset: the ONNX default-domain opset version targeted (18 or newer).
        parent: the context of the enclosing graph for control-flow bodies, or None.
        functions: shared dict (domain, name) -> ``onnx_ir.Function`` of local functions emitted so far.
        options: export options shared by nested contexts: ``inline`` (bodies inlined), ``rewritten_loops``
            (the model went through ``rewrite_control_flow``: its scans may come from Python loops).
        dim_namer: renders a sympy dimension expression as an int or a dim_param string
            (``program.DimNamer``); defaults to the parent's.
        registry: the export's ``translate.registry.Translations``; defaults to the parent's.
        size_floors: torch's size symbol -> the least size the export promises for it
            (``may_be_empty``); defaults to the parent's.
    """

    def __init__(self, opset: int, *, parent: "TranslationContext | None" = None,
                 functions: dict | None = None, options: dict | None = None, name: str = "main",
                 dim_namer: Any = None, registry: Any = None, size_floors: dict | None = None):
        self.opset = opset
        self.parent = parent
        self.name = name
        self.nodes: list[ir.Node] = []
        self.values: dict[Any, Any] = {}  # fx.Node -> ir.Value | tuple | SymInt value
        self.functions = functions if functions is not None else {}
        self.options = options or {}
        self.dim_namer = dim_namer if dim_namer is not None or parent is None else parent.dim_namer
        self.registry = registry if registry is not None or parent is None else parent.registry
        self.size_floors = size_floors if size_floors is not None or parent is None else parent.size_floors
        # size expressions never 0 where eager runs (a convolution's spatial sizes: ``note_nonempty``); a body
        # reads its graph's, and what it notes holds only where it runs
        self.nonempty: set = set() if parent is None else set(parent.nonempty)
        self.op = _OpBuilder(self)
        self.current_node: torch.fx.Node | None = None
        self._source: str | None = None
        self._consts: dict[tuple, ir.Value] = {}
        self._counter = 0
        # symbolic shapes: sympy expr -> 0-d int64 value; and 0-d value -> its 1-D [1] form
        self.sym_values: dict[Any, ir.Value] = {}
        self.sym_sources: dict[Any, tuple[ir.Value, int]] = {}  # sympy.Symbol -> (tensor value, axis)
        self.as_1d: dict[ir.Value, ir.Value] = {}
        self.shapes_of: dict[ir.Value, ir.Value] = {}
        self.clamped: dict[Any, dict] = {}  # fx.Node -> the sizes a slice clamps in its result (translate.clamped)

    # ------------------------------------------------------------------ emission
    def fresh_name(self, hint: str) -> str:
        self._counter += 1
        return f"{hint}_{self._counter}"

    def emit(self, op_type: str, inputs: Sequence[Any], attrs: dict | None = None, *,
             num_outputs: int = 1, domain: str = "") -> Any:
        """Append one ONNX node; return its output value (or a tuple when ``num_outputs > 1``).

        ``inputs`` items may be ``ir.Value``, None (an omitted optional input), a numpy array or a
        Python int / list of ints (made int64 constants).
        """
        ins = [self._as_value(i) for i in inputs]
        attributes = {k: v for k, v in (attrs or {}).items() if v is not None}
        node = ir.Node(domain, op_type, ins, ir.convenience.convert_attributes(attributes),
                       num_outputs=num_outputs, name=self.fresh_name(f"n{len(self.nodes)}_{op_type}"))
        for i, out in enumerate(node.outputs):
            out.name = self.fresh_name(f"{op_type.lower()}")
        if self._source:
            node.metadata_props[SOURCE_KEY] = self._source
        self.nodes.append(node)
        return node.outputs[0] if num_outputs == 1 else tuple(node.outputs)

    def _as_value(self, item: Any) -> ir.Value | None:
        if item is None or isinstance(item, ir.Value):
            return item
        if isinstance(item, np.ndarray):
            return self.const(item)
        if isinstance(item, bool):
            return self.const(np.array(item, dtype=np.bool_))
        if isinstance(item, int):
            return self.const(np.array(item, dtype=np.int64))
        if isinstance(item, (list, tuple)) and all(isinstance(i, int) for i in item):
            return self.const(np.array(item, dtype=np.int64))
        raise TypeError(f"cannot use {type(item).__name__} {item!r} as an ONNX node input")

    def const(self, array: Any, dtype: ir.DataType | np.dtype | None = None) -> ir.Value:
        """A ``Constant`` node holding ``array`` (numpy array or scalar), made once per graph."""
        if isinstance(dtype, ir.DataType):
            dtype = dtype.numpy()
        arr = np.asarray(array, dtype=dtype)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        hit = self._consts.get(key)
        if hit is not None:
            return hit
        saved, self._source = self._source, None
        value = self.emit("Constant", [], {"value": ir.tensor(arr)})
        self._source = saved
        value.type = ir.TensorType(ir.DataType.from_numpy(arr.dtype))
        value.shape = ir.Shape(arr.shape)
        value.const_value = ir.tensor(arr)
        self._consts[key] = value
        return value

    def scalar(self, value: Any, dtype: ir.DataType) -> ir.Value:
        """A 0-d constant of ONNX type ``dtype`` (a Python number, or an ir.Value cast to dtype)."""
        if isinstance(value, ir.Value):
            return self.cast(value, dtype)
        return self.const(np.array(value, dtype=dtype.numpy()))

    def cast(self, value: ir.Value, dtype: ir.DataType) -> ir.Value:
        """``Cast(value, to=dtype)``, or ``value`` itself when its type is already ``dtype``."""
        if value.dtype == dtype:
            return value
        if value.const_value is not None and value.producer() is not None and value.producer().op_type == "Constant":
            return self.const(value.const_value.numpy().astype(dtype.numpy()))
        out = self.op.Cast(value, to=dtype)
        out.type = ir.TensorType(dtype)
        out.shape = value.shape
        return out

    def may_be_empty(self, size: Any) -> bool:
        """Whether a traced size (an int or a ``torch.SymInt`` of ``node.meta["val"]``) may be 0
        within the sizes the export holds for: a static size is read as is; a size expression is
        bounded (torch's ``bound_sympy``) with each dimension from the least size the export
        promises for it (``Captured.variables``), so ``height // 2`` with ``height >= 4`` is never
        0. A symbol the export promises nothing for may be 0. Translations guard a reduction or a
        scan for the empty case only where it can happen."""
        if isinstance(size, int):
            return size == 0
        expr = getattr(getattr(size, "node", None), "expr", None)
        floors = self.size_floors or {}
        if expr is not None and expr in self.nonempty:
            return False
        if expr is None or not expr.free_symbols or not expr.free_symbols <= floors.keys():
            return True
        try:
            low = bound_sympy(expr, {s: ValueRanges(floors[s], int_oo) for s in expr.free_symbols}).lower
        except Exception:  # noqa: BLE001 - an expression torch cannot bound may be 0
            return True
        return not (low.is_number and low >= 1)

    def note_nonempty(self, sizes: Any) -> None:
        """Record traced sizes (ints or ``torch.SymInt``) that are at least 1 wherever eager PyTorch
        runs the model, though the export's floors allow 0: ``may_be_empty`` is then False for each
        (a convolution's spatial output sizes: eager raises where the padded input is smaller than
        the dilated kernel, so each is at least 1)."""
        for size in sizes:
            expr = getattr(getattr(size, "node", None), "expr", None)
            if expr is not None and expr.free_symbols:
                self.nonempty.add(expr)

    # ------------------------------------------------------------------ metadata of the FX node
    def set_current(self, node: torch.fx.Node | None, source: str | None) -> None:
        self.current_node = node
        self._source = source

    @property
    def meta_val(self) -> Any:
        """``node.meta["val"]`` of the FX node being translated (FakeTensor, SymInt, or a tuple)."""
        return self.current_node.meta.get("val") if self.current_node is not None else None

    @property
    def out_dtype(self) -> ir.DataType:
        """ONNX element type of the (first) output of the node being translated."""
        val = self.meta_val
        if isinstance(val, (tuple, list)):
            val = val[0]
        if isinstance(val, torch.Tensor):
            return dtypes.onnx_dtype(val.dtype)
        if isinstance(val, torch.SymBool) or isinstance(val, bool):
            return ir.DataType.BOOL
        if isinstance(val, (torch.SymFloat, float)):
            return ir.DataType.DOUBLE
        return ir.DataType.INT64

    @property
    def out_rank(self) -> int:
        val = self.meta_val
        if isinstance(val, (tuple, list)):
            val = val[0]
        return val.dim() if isinstance(val, torch.Tensor) else 0

    # ------------------------------------------------------------------ shapes
    def shape(self, x: ir.Value) -> ir.Value:
        """``Shape(x)``, one per value."""
        hit = self.shapes_of.get(x)
        if hit is None:
            hit = self.shapes_of[x] = self.op.Shape(x)
        return hit

    def dim(self, x: ir.Value, axis: int) -> ir.Value:
        """Size of ``x`` along ``axis`` as a 0-d int64 value (its 1-D form remembered)."""
        return symbolic.dim_of(self, x, axis)

    def shape_list(self, items: Sequence[Any]) -> ir.Value:
        """A 1-D int64 value from a list of Python ints and 0-d int64 values (SymInts)."""
        return symbolic.shape_list(self, items)

    def rank(self, x: ir.Value) -> int:
        """Static rank of ``x`` (every FX node's value carries its shape)."""
        if x.shape is None:
            raise ValueError(f"rank of {x.name} is unknown")
        return len(x.shape)

    # ------------------------------------------------------------------ helpers for translations
    def values_of(self, args: Any) -> Any:
        """Map FX nodes inside (nested) arguments to their translated values."""
        if isinstance(args, torch.fx.Node):
            return self.lookup(args)
        if isinstance(args, (list, tuple)):
            return type(args)(self.values_of(a) for a in args)
        if isinstance(args, dict):
            return {k: self.values_of(v) for k, v in args.items()}
        return args

    def lookup(self, node: torch.fx.Node) -> Any:
        ctx = self
        while ctx is not None:
            if node in ctx.values:
                return ctx.values[node]
            ctx = ctx.parent
        raise KeyError(f"FX node {node.name} has no translated value")
