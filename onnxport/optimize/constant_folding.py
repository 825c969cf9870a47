"""Constant folding: onnxscript's folder, after folding transposed weights under their own name.

- ``Transpose`` of an initializer used by nothing else is folded into that initializer whatever its
  size (same number of elements): the ``linear`` weight ``W`` feeding ``MatMul(x, W^T)``. The
  initializer keeps its parameter name with ``.T`` appended (``.permuted`` for other
  permutations) and records the permutation in its metadata (``transposed_perm``), so that nobody
  copies weights by name into the wrong layout. onnxscript's folder folds such a Transpose too but
  names the result after the Transpose output, losing the parameter's name: this step is ours.
- ``Gather`` of one constant index from an initializer read only by such Gathers, each index once
  (``weight[e]`` of every expert of a mixture-of-experts layer), is folded whatever its size into
  one initializer per index, named ``<name>.<index>``: the same elements, none copied at run time.
- Then ``onnxscript.optimizer.fold_constants``: a node whose inputs are all constants is evaluated
  (onnx reference implementation) when no input exceeds ``input_limit`` elements and the result
  adds no more than ``size_limit`` elements; ``Shape``/``Size`` of static dims fold, and
  ``Identity``/no-op ``Cast``/``Reshape``/``Expand`` become ``Identity``. Random operators,
  control flow and graph inputs (an initializer that is also an input may be overridden) are left
  alone. ``ConstantOfShape``, which onnxscript keeps by default, folds under the same size limit.
  Folded values become initializers of their graph (``Constant`` nodes inside local functions).
- Nodes left unused are removed.

An initializer read lazily (``onnx_ir.LazyTensor``: a weight left in its checkpoint,
``onnxport.weights``) is transposed or split lazily too: the new initializer reads the weight and
transposes it (or takes its part) when the model is saved, so folding materializes no weight; a
transposed matrix is written in blocks of rows (``TransposedLazyTensor``), never whole.

Semantics: each folded operator per its ONNX spec (https://onnx.ai/onnx/operators/); onnxscript
optimizer documentation (https://microsoft.github.io/onnxscript/api/optimizer.html).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import onnx_ir.passes.common as common
import onnxscript.optimizer

from onnxport.optimize._scopes import const_array


def _transposed(arr: np.ndarray, perm: list[int]) -> np.ndarray:
    """``arr`` permuted by ``perm``, contiguous: torch's copy (several times faster than numpy's on
    large matrices) on the bits viewed as integers of the same width, any dtype; numpy's otherwise."""
    if arr.dtype.itemsize in (1, 2, 4, 8) and arr.ndim >= 2:
        import torch

        bits = np.ascontiguousarray(arr).view(f"i{arr.dtype.itemsize}")
        return torch.from_numpy(bits).permute(perm).contiguous().numpy().view(arr.dtype)
    return np.ascontiguousarray(np.transpose(arr, perm))


class TransposedLazyTensor(ir.LazyTensor):
    """A lazily read matrix, transposed: ``numpy()`` / ``tobytes()`` give the whole transposed
    copy; ``tofile()`` (what a save calls) writes it in blocks of rows made one after the other in
    one reused buffer of about ``BLOCK`` bytes, so that no whole transposed copy is held."""

    BLOCK = 16 * 2**20  # bytes of transposed rows made and written at a time

    def __init__(self, source: ir.LazyTensor, name: str | None):
        rows, cols = source.shape
        super().__init__(lambda: ir.tensor(_transposed(source.numpy(), [1, 0])), dtype=source.dtype,
                         shape=ir.Shape([cols, rows]), name=name)
        self.source = source

    def tofile(self, file) -> None:
        import torch

        arr = self.source.numpy()
        if arr.dtype.itemsize not in (1, 2, 4, 8) or arr.ndim != 2:
            super().tofile(file)
            return
        matrix = torch.from_numpy(np.ascontiguousarray(arr).view(f"i{arr.dtype.itemsize}"))
        rows, cols = matrix.shape
        step = min(cols, max(1, self.BLOCK // max(1, rows * arr.dtype.itemsize)))
        gathered = torch.empty((rows, step), dtype=matrix.dtype)  # reused: no fresh pages per block
        block = torch.empty((step, rows), dtype=matrix.dtype)
        for start in range(0, cols, step):
            n = min(step, cols - start)
            if n < step:
                gathered = torch.empty((rows, n), dtype=matrix.dtype)
                block = torch.empty((n, rows), dtype=matrix.dtype)
            gathered.copy_(matrix[:, start:start + n])  # contiguous runs of n elements per row
            block.copy_(gathered.t())  # a whole matrix transposed: torch's blocked transpose
            file.write(memoryview(block.numpy()).cast("B"))


def _fold_weight_transpose(node: ir.Node) -> bool:
    """Fold ``Transpose(w)`` into ``w`` when ``w`` is an initializer read only there."""
    w = node.inputs[0]
    if w is None or not w.is_initializer() or w.is_graph_input() or w.is_graph_output():
        return False
    if len(w.uses()) != 1 or node.outputs[0].is_graph_output():
        return False
    source = w.const_value
    if isinstance(source, ir.LazyTensor):  # read at save time: transposed then, one tensor at a time
        rank = len(source.shape)
        perm = list(node.attributes.get_ints("perm", reversed(range(rank))))
        shape = ir.Shape([source.shape[p] for p in perm])
        if perm == [1, 0]:
            tensor = TransposedLazyTensor(source, w.name)
        else:
            tensor = ir.LazyTensor(lambda: ir.tensor(_transposed(source.numpy(), perm)), dtype=source.dtype,
                                   shape=shape, name=w.name)
    else:
        arr = const_array(w)
        if arr is None:
            return False
        rank = arr.ndim
        perm = list(node.attributes.get_ints("perm", reversed(range(rank))))
        tensor = ir.tensor(_transposed(arr, perm), name=w.name)
    # the new tensor first: renaming the value renames its tensor, which may be the caller's
    suffix = ".T" if perm == list(reversed(range(rank))) else ".permuted"
    w.const_value = tensor
    if not w.name.endswith(suffix):
        w.name = w.name + suffix
    w.shape = ir.Shape(tensor.shape)
    w.metadata_props["transposed_perm"] = ",".join(str(p) for p in perm)
    node.outputs[0].replace_all_uses_with(w)
    node.graph.remove(node, safe=True)
    return True


def _gathered_index(node: ir.Node, rank: int) -> tuple[int, int] | None:
    """``(axis, index)`` of a ``Gather`` taking one constant 0-d index of its data, else None."""
    if node.op_type != "Gather" or node.domain != "" or len(node.inputs) != 2 or node.outputs[0].is_graph_output():
        return None
    idx = const_array(node.inputs[1])
    if idx is None or idx.ndim != 0 or idx.dtype.kind not in "iu":
        return None
    axis = node.attributes.get_int("axis", 0)
    axis = axis + rank if axis < 0 else axis
    return axis, int(idx)


def _fold_weight_parts(w: ir.Value) -> bool:
    """Split an initializer read only by ``Gather``s of distinct constant indices on one axis into one
    initializer per index (``<name>.<index>``); the Gathers removed."""
    graph = w.graph
    if graph is None or not w.is_initializer() or w.is_graph_input() or w.is_graph_output() or w.shape is None:
        return False
    uses = list(w.uses())
    if not uses or any(i != 0 for _, i in uses):
        return False
    rank = len(w.shape)
    picks = [_gathered_index(node, rank) for node, _ in uses]
    if any(p is None for p in picks) or len({p[0] for p in picks}) != 1:
        return False
    size = w.shape[picks[0][0]]
    if not isinstance(size, int):
        return False
    indices = [p[1] + size if p[1] < 0 else p[1] for p in picks]
    names = [f"{w.name}.{i}" for i in indices]
    if len(set(indices)) != len(indices) or any(not 0 <= i < size for i in indices) \
            or any(n in graph.initializers for n in names):
        return False
    source = w.const_value
    arr = None if isinstance(source, ir.LazyTensor) else const_array(w)
    if arr is None and not isinstance(source, ir.LazyTensor):
        return False
    for (node, _), (axis, _), index, name in zip(uses, picks, indices, names):
        if arr is None:  # read at save time: the part taken then (the whole tensor read once per part)
            shape = ir.Shape([d for i, d in enumerate(source.shape) if i != axis])
            tensor = ir.LazyTensor(lambda a=axis, i=index, n=name: ir.tensor(
                np.ascontiguousarray(np.take(source.numpy(), i, axis=a)), name=n), dtype=source.dtype, shape=shape,
                name=name)
        else:
            tensor = ir.tensor(np.ascontiguousarray(np.take(arr, index, axis=axis)), name=name)
        part = ir.Value(name=name, type=w.type, shape=ir.Shape(tensor.shape), const_value=tensor)
        part.metadata_props.update(w.metadata_props)
        graph.register_initializer(part)
        node.outputs[0].replace_all_uses_with(part)
        graph.remove(node, safe=True)
    graph.initializers.pop(w.name)
    return True


class ConstantFoldingPass(ir.passes.InPlacePass):
    """Fold transposed weights (named), then constant subcomputations (onnxscript), then remove the
    nodes left unused; see the module docstring.

    Args:
        size_limit: largest number of elements a fold may add to the model.
        input_limit: largest input (elements) a fold may read (Transpose of a weight excepted).
    """

    def __init__(self, size_limit: int = 4096, input_limit: int = 1 << 20):
        super().__init__()
        self.size_limit = size_limit
        self.input_limit = input_limit

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        """Fold ``model`` in place; ``modified`` when anything was folded."""
        transposes = [n for g in (model.graph, *model.functions.values()) for n in g.all_nodes()
                      if n.op_type == "Transpose" and n.domain == ""]
        modified = any([_fold_weight_transpose(n) for n in transposes])
        modified |= any([_fold_weight_parts(w) for w in list(model.graph.initializers.values())])
        folded = onnxscript.optimizer.fold_constants(
            model, input_size_limit=self.input_limit, output_size_limit=self.size_limit,
            should_fold=lambda node: True if node.op_type == "ConstantOfShape" and node.domain == "" else None)
        modified |= folded.modified
        if modified:
            common.RemoveUnusedNodesPass()(model)
        return ir.passes.PassResult(model, modified)
