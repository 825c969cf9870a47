"""Decomposition of the ops that have no translation, to ops that have one.

Each node whose op has no translation is decomposed alone: its decomposition (torch's table,
``torch.export.default_decompositions()`` without the ops that translate) is traced on the node's
own fake inputs, sizes symbolic as in the program, and the traced nodes replace it in place, in
the main graph and in control-flow bodies. The whole program is decomposed again by torch
(``ExportedProgram.run_decompositions``, which traces the model anew) only when a node cannot be
decomposed alone: a mutation of an input or buffer, which only torch's functionalization expresses,
or an op without a decomposition of its own.

Semantics: PyTorch's decompositions (``torch._decomp``), which define the op in core ATen.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import operator
from typing import Any, Callable

import torch
from torch.utils import _pytree as pytree

from onnxport.capture.meta_weights import META_WEIGHTS_ON_CPU
from onnxport.capture.assert_division import ASSERTED_DIVISION
from onnxport.capture.patches import installed, user_hooks
from onnxport.capture.state import OpSupport
from onnxport.errors import UnsupportedOpError


@dataclasses.dataclass(frozen=True)
class Decomposition:
    """What ``decompose`` did: the program, the ops it decomposed node by node, and the ops that made
    it decompose the whole program (empty when it did not)."""

    program: torch.export.ExportedProgram
    local: tuple[str, ...] = ()
    whole_program: tuple[str, ...] = ()


def decompose(program: torch.export.ExportedProgram, ops: OpSupport,
              hooks: Callable[[], Any] | None = None) -> Decomposition:
    """Decompose the ops without a translation (in the main graph and in control-flow bodies); a
    program whose every op translates is returned unchanged.

    Args:
        program: the captured program (its graph is changed in place by local decompositions).
        ops: the export's translations (``OpSupport``: ``lookup(overload)``, ``translatable(node)``,
            an in-place op the translation handles counting as translated; ``capture_patches``).
        hooks: the user's ``capture_hooks``. A whole-program decomposition traces the program
            again: the translations' capture patches and these hooks are installed for it as for
            the capture (the ops kept whole there stay whole).
    """
    has_translation = ops.lookup
    nodes = list(_nodes(program.graph_module))
    pending = [(gm, n) for gm, n in nodes if isinstance(n.target, torch._ops.OpOverload) and not ops.translatable(n)]
    batching = sorted({n.target.__name__ for _, n in nodes if _vmap_level(n)})
    if not pending and not batching:
        return Decomposition(program)
    table = {op: fn for op, fn in _default_table().items() if has_translation(op) is None}
    blocking = sorted({str(n.target) for _, n in pending if not _local_ok(n, table)}) + batching
    traced = []
    for gm, node in pending if not blocking else ():
        try:
            traced.append((gm, node, _trace(node, table)))
        except Exception:  # noqa: BLE001 - a decomposition that does not trace alone: torch's whole path
            blocking.append(str(node.target))
    if blocking:
        whole = torch.export.default_decompositions()
        for op in list(whole.keys()):
            if has_translation(op) is not None:
                whole.pop(op)
        blocked = tuple(sorted(set(blocking)))
        patches = (ASSERTED_DIVISION, *ops.capture_patches, *((user_hooks(hooks),) if hooks is not None else ()),
                   *((META_WEIGHTS_ON_CPU,) if any(t.is_meta for t in program.state_dict.values()) else ()))
        try:
            with installed(*patches):
                return Decomposition(program.run_decompositions(whole), whole_program=blocked)
        except Exception as e:  # noqa: BLE001 - torch failing to decompose: the ops are unsupported
            first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
            raise UnsupportedOpError(
                f"no ONNX translation for {', '.join(blocked)}, and torch's decomposition of the program fails: "
                f"{type(e).__name__}: {first}",
                hint="register a translation with @onnxport.translates(<the op>), or compute it another way") from e
    touched = set()
    for gm, node, graph_of_node in traced:
        _splice(gm.graph, node, graph_of_node)
        touched.add(gm)
    for gm in touched:
        gm.graph.lint()
        gm.recompile()
    return Decomposition(program, local=tuple(sorted({str(n.target) for _, n in pending})))


@functools.lru_cache(maxsize=1)
def _default_table() -> dict:
    """torch.export's default decomposition table (built once: it takes about a second)."""
    return dict(torch.export.default_decompositions())


def _nodes(gm: torch.fx.GraphModule):
    for node in list(gm.graph.nodes):
        if node.op == "call_function":
            yield gm, node
        elif node.op == "get_attr":
            sub = getattr(gm, node.target, None)
            if isinstance(sub, torch.fx.GraphModule):
                yield from _nodes(sub)


def _vmap_level(node: torch.fx.Node) -> bool:
    """A call of ``torch.vmap``'s batching levels as torch.export keeps them before decomposition
    (``torch._functorch.predispatch``: ``_add_batch_dim``, ``_vmap_increment_nesting``,
    ``lazy_load_decompositions``; transformers' masks built with ``use_vmap=True``): only torch's
    decomposition of the whole program applies the batching rules and leaves ATen ops."""
    return getattr(node.target, "__module__", None) == "torch._functorch.predispatch"


def _local_ok(node: torch.fx.Node, table: dict) -> bool:
    """The node can be decomposed alone: torch has a decomposition for it, it writes to no tensor
    (functionalization's business), and its inputs carry fake values to trace with."""
    schema = node.target._schema
    if any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
        return False
    if node.target not in table and not node.target.has_kernel_for_dispatch_key(
            torch._C.DispatchKey.CompositeImplicitAutograd):
        return False
    leaves = pytree.tree_leaves((node.args, node.kwargs))
    return all("val" in a.meta for a in leaves if isinstance(a, torch.fx.Node)) and "val" in node.meta


def _node_inputs(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The nodes among ``node``'s arguments, in order (the placeholders of its decomposition)."""
    return [a for a in pytree.tree_leaves((node.args, node.kwargs)) if isinstance(a, torch.fx.Node)]


def _trace(node: torch.fx.Node, table: dict) -> torch.fx.GraphModule:
    """The node's decomposition traced on its fake inputs (a placeholder per ``_node_inputs``)."""
    from torch._dispatch.python import enable_python_dispatcher
    from torch.fx.experimental.proxy_tensor import make_fx

    leaves, spec = pytree.tree_flatten((node.args, node.kwargs))
    vals = [a.meta["val"] for a in _node_inputs(node)]
    fn = table.get(node.target, node.target.decompose)

    def run(*traced):
        it = iter(traced)
        args, kwargs = pytree.tree_unflatten([next(it) if isinstance(a, torch.fx.Node) else a for a in leaves], spec)
        return fn(*args, **kwargs)

    fake = next((v.fake_mode for v in vals if isinstance(v, torch.Tensor) and hasattr(v, "fake_mode")), None)
    # the Python dispatcher on, as torch.export traces: ops whose C++ kernel reads sizes as ints
    # (constant_pad_nd, which im2col's decomposition calls) then run their Python meta, which keeps
    # the sizes symbolic; without it they fix every symbol of their input to the example's size
    with fake if fake is not None else contextlib.nullcontext(), enable_python_dispatcher():
        return make_fx(run, decomposition_table=table, tracing_mode="real")(*vals)


def _splice(graph: torch.fx.Graph, node: torch.fx.Node, gm: torch.fx.GraphModule) -> None:
    """Replace ``node`` in ``graph`` by the nodes of its traced decomposition ``gm``, fed by the
    node's inputs as they are now (an input decomposed before it is its decomposition's result)."""
    env: dict[torch.fx.Node, Any] = {}
    placeholders = [p for p in gm.graph.nodes if p.op == "placeholder"]
    env.update(zip(placeholders, _node_inputs(node)))
    result: Any = None
    with graph.inserting_before(node):
        for sub in gm.graph.nodes:
            if sub.op == "placeholder":
                continue
            if sub.op == "output":
                result = pytree.tree_map_only(torch.fx.Node, lambda a: env[a], sub.args[0])
                break
            if sub.op == "call_function" and isinstance(sub.target, type) and issubclass(sub.target, tuple):
                # a named tuple the decomposition returns (torch.return_types.aminmax): its fields
                env[sub] = tuple(pytree.tree_map_only(torch.fx.Node, lambda a: env[a], sub.args))
                continue
            if sub.op == "get_attr":  # a constant the decomposition made: kept on the owning module
                name = f"_onnxport_decomposed_{len(graph.nodes)}_{sub.target}"
                setattr(graph.owning_module, name, getattr(gm, sub.target))
                copied = graph.get_attr(name)
            else:
                copied = graph.node_copy(sub, lambda a: env[a])
            copied.meta = dict(sub.meta)
            for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
                if key in node.meta:
                    copied.meta[key] = node.meta[key]
            env[sub] = copied
    if isinstance(result, (list, tuple)):
        for user in list(node.users):
            if user.target is operator.getitem:
                user.replace_all_uses_with(result[user.args[1]])
                graph.erase_node(user)
        if node.users:
            raise RuntimeError(f"{node.target} is read other than by index after its decomposition")
    else:
        node.replace_all_uses_with(result)
    graph.erase_node(node)
