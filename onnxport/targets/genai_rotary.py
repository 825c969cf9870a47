"""Target ``genai-cpu``'s rotary fusion: the rotary embedding of a ``GroupQueryAttention``'s query and
key, as the standard export writes it on ``[B, N, S, d]`` heads,

    x * Unsqueeze(Cos(Concat(f, f)), 1) + Concat(-x[..., d/2:], x[..., :d/2]) * Unsqueeze(Sin(Concat(f, f)), 1)
    f = Mul(Cast(Unsqueeze(position_ids, -1)), inv_freq),  x = Transpose(Reshape(projection), (0, 2, 1, 3))

as ``com.microsoft.RotaryEmbedding(projection [B, S, N*d], position_ids, cos_cache, sin_cache)`` on
the projection itself (no transposes). The caches ``[P, d/2]`` are initializers for positions
``0..P-1``, ``P`` the decoder's ``max_position_embeddings``, as onnxruntime-genai's builder stores
them, where the export recorded it (``record_max_positions``: transformers' rotary modules whose
cos/sin are a function of the position alone, ``onnxport.library.transformers.rotary_positions``):
each row ``cos(float32(p * inv_freq))`` computed in float64 and rounded to ``inv_freq``'s dtype, so
within one ulp of eager's float32 ``cos``/``sin`` (equal for most). A position ``>= P`` has no row:
onnxruntime's operator refuses the run (``position_ids`` out of range) where eager PyTorch would go
on computing angles; the decoder is meant for ``P`` positions and onnxruntime-genai's ``max_length``
stays within them. Where ``P`` is not known (no eager module, ``dynamic``/``longrope`` scaling whose
angles depend on the sequence length), the caches are computed each step from ``inv_freq`` for
positions ``0..L-1``, ``L`` the largest position + 1 or ``attention_mask``'s length, and the reason
is recorded (``fuse_rotary``).
Not ``GroupQueryAttention``'s own ``do_rotary``: that rotates every row of a first prompt at the first
row's ``position_ids``, which a left-padded row contradicts (``onnxport.targets.genai_cpu``'s docstring).

Semantics: onnxruntime's ``docs/ContribOperators.md`` (``com.microsoft.RotaryEmbedding``,
``interleaved=0``: the halves rotated, as ``rotate_half`` does).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.targets.builder import Constants
from onnxport.targets.genai_attention import MS_DOMAIN, _ints, _producer
from onnxport.targets.names import FreshNames


MAX_POSITIONS_KEY = "onnxport.max_positions"  # metadata during the rewrite: P, or why it is not known


def record_max_positions(model: ir.Model, module: object) -> None:
    """``model``'s metadata ``onnxport.max_positions``: the number of positions of ``module``'s
    rotary embedding (module docstring), or why it is not known; read by ``fuse_rotary``
    (``recorded_positions``), removed by ``onnxport.targets.genai_cpu.rewrite_for_genai_cpu``."""
    from onnxport.library.transformers.rotary_positions import max_positions

    found, why = max_positions(module) if module is not None else (None, "the export has no eager module")
    model.metadata_props[MAX_POSITIONS_KEY] = str(found) if found is not None else why


def recorded_positions(model: ir.Model) -> tuple[int | None, str]:
    """``(P, "")``: the number of positions ``record_max_positions`` recorded in ``model``'s metadata,
    or ``(None, why not)`` where none was recorded, the record is a reason, or it is 0 (tables of no
    row: every position out of range). The record stays (``rewrite_for_genai_cpu`` removes it)."""
    recorded = model.metadata_props.get(MAX_POSITIONS_KEY, "the maximum position is not known (not recorded)")
    if not recorded.isdigit():
        return None, recorded
    if int(recorded) == 0:
        return None, "the recorded maximum position is 0 (cos/sin tables of no row)"
    return int(recorded), ""


def position_caches(inv_freq: np.ndarray, positions: int) -> tuple[np.ndarray, np.ndarray]:
    """``(cos, sin)`` ``[positions, len(inv_freq)]`` in ``inv_freq``'s dtype: the angle ``p * inv_freq``
    rounded to that dtype as eager PyTorch's float32 product is, its cos and sin computed in float64
    then rounded (within one ulp of eager's float32 ``torch.cos``/``torch.sin``)."""
    angles = np.arange(positions, dtype=inv_freq.dtype)[:, None] * inv_freq.reshape(1, -1)
    return (np.cos(angles.astype(np.float64)).astype(inv_freq.dtype),
            np.sin(angles.astype(np.float64)).astype(inv_freq.dtype))


def _other(node: ir.Node, value: ir.Value) -> ir.Value | None:
    a, b = node.inputs
    return b if a is value else a if b is value else None


def _angles(cos_or_sin: ir.Value, op_type: str) -> tuple[ir.Value, ir.Value] | None:
    """``(inv_freq, position_ids)`` of ``Unsqueeze(<op_type>(Concat(f, f)), 1)``, or None."""
    unsqueeze = _producer(cos_or_sin, "Unsqueeze")
    trig = _producer(unsqueeze.inputs[0], op_type) if unsqueeze is not None else None
    concat = _producer(trig.inputs[0], "Concat") if trig is not None else None
    if concat is None or len(concat.inputs) != 2 or concat.inputs[0] is not concat.inputs[1]:
        return None
    mul = _producer(concat.inputs[0], "Mul")
    freq = next((v for v in mul.inputs if v.const_value is not None and len(v.shape or ()) == 1), None) \
        if mul is not None else None
    cast = _producer(_other(mul, freq), "Cast") if freq is not None else None
    pos = _producer(cast.inputs[0], "Unsqueeze") if cast is not None else None
    if pos is None or not pos.inputs[0].is_graph_input() or pos.inputs[0].name != "position_ids":
        return None
    return freq, pos.inputs[0]


def match_rotary(value: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value, int] | str:
    """``(projection [B, S, N*d], inv_freq, position_ids, N)`` of the rotated heads a
    ``GroupQueryAttention`` input ``value`` (``Reshape(Transpose(rotated, (0, 2, 1, 3)), [0, 0, -1])``)
    reads, or why not (module docstring)."""
    reshape = _producer(value, "Reshape")
    back = _producer(reshape.inputs[0], "Transpose") if reshape is not None else None
    add = _producer(back.inputs[0], "Add") if back is not None and _ints(back, "perm") == (0, 2, 1, 3) else None
    if add is None:
        return "the query or key is not rotated heads (x * cos + rotate_half(x) * sin)"
    shape = back.inputs[0].shape
    if shape is None or len(shape) != 4 or not isinstance(shape[1], int) or not isinstance(shape[3], int):
        return "the rotated heads' count and size are not known numbers"
    heads, half = shape[1], shape[3] // 2
    for plain, turned in (add.inputs, add.inputs[::-1]):
        m1, m2 = _producer(plain, "Mul"), _producer(turned, "Mul")
        if m1 is None or m2 is None:
            continue
        for rot in m2.inputs:
            concat = _producer(rot, "Concat")
            if concat is None or len(concat.inputs) != 2:
                continue
            neg, low = _producer(concat.inputs[0], "Neg"), _producer(concat.inputs[1], "Slice")
            high = _producer(neg.inputs[0], "Slice") if neg is not None else None
            if high is None or low is None or high.inputs[0] is not low.inputs[0] or high.inputs[0] not in m1.inputs:
                continue
            x = high.inputs[0]
            bounds = [tuple(int(i.const_value.numpy().reshape(-1)[0]) if i is not None and i.const_value is not None
                            else None for i in n.inputs[1:4]) for n in (low, high)]
            if bounds[0][:2] != (0, half) or bounds[1][0] != half or {bounds[0][2], bounds[1][2]} - {3, -1}:
                return "the rotary embedding does not rotate the whole head by halves (partial or interleaved)"
            transpose = _producer(x, "Transpose")
            split = _producer(transpose.inputs[0], "Reshape") if transpose is not None else None
            if split is None or _ints(transpose, "perm") != (0, 2, 1, 3):
                return "the rotated heads are not a projection split into heads"
            cos, sin = _angles(_other(m1, x), "Cos"), _angles(_other(m2, rot), "Sin")
            if cos is None or sin is None or cos[0] is not sin[0] or cos[0].shape[0] != half:
                return "the rotary angles are not position_ids times constant inverse frequencies (or are scaled)"
            return split.inputs[0], cos[0], cos[1], heads
    return "the query or key is not rotated heads (x * cos + rotate_half(x) * sin)"


def fuse_rotary(model: ir.Model) -> tuple[list[str], str]:
    """The rotary embedding of each ``GroupQueryAttention``'s query and key as
    ``com.microsoft.RotaryEmbedding`` (module docstring), in place; the old nodes left unread.
    Returns why a query or key was not fused (empty: all fused), and why the cos/sin are computed
    each step instead of being initializers of ``max_position_embeddings`` rows (empty: initializers)."""
    graph = model.graph
    max_positions, per_step = recorded_positions(model)
    fresh = FreshNames(model)
    const = Constants(graph, fresh, "rotary")
    caches: dict[int, tuple[ir.Value, ir.Value]] = {}
    made: list[ir.Node] = []

    def op(op_type: str, inputs: list, **attributes) -> ir.Value:
        node = ir.Node("", op_type, inputs, attributes=[ir.convenience.convert_attribute(k, v)
                                                        for k, v in attributes.items()])
        node.outputs[0].name = fresh(f"rotary_{op_type.lower()}")
        made.append(node)
        return node.outputs[0]

    def initializer(name: str, array: np.ndarray) -> ir.Value:
        value = ir.Value(name=fresh(name), const_value=ir.tensor(array), shape=ir.Shape(array.shape),
                         type=ir.TensorType(ir.DataType.from_numpy(array.dtype)))
        graph.register_initializer(value)
        return value

    def cache(inv_freq: ir.Value, position_ids: ir.Value) -> tuple[ir.Value, ir.Value]:
        if id(inv_freq) not in caches and max_positions is not None:
            tables = position_caches(inv_freq.const_value.numpy(), max_positions)
            caches[id(inv_freq)] = tuple(initializer(name, table) for name, table in zip(("cos_cache", "sin_cache"),
                                                                                            tables))
        if id(inv_freq) not in caches:
            mask = next(v for v in graph.inputs if v.name == "attention_mask")
            largest = op("Add", [op("ReduceMax", [position_ids], keepdims=0), const(np.array(1, np.int64))])
            length = op("Max", [op("Squeeze", [op("Shape", [mask], start=1, end=2), const(np.array([0], np.int64))]),
                                largest])
            dtype = inv_freq.dtype.numpy()
            positions = op("Range", [const(np.array(0, dtype)), op("Cast", [length], to=inv_freq.dtype),
                                     const(np.array(1, dtype))])
            angles = op("Mul", [op("Unsqueeze", [positions, const(np.array([1], np.int64))]), inv_freq])
            caches[id(inv_freq)] = op("Cos", [angles]), op("Sin", [angles])
        return caches[id(inv_freq)]

    reasons = []
    if "attention_mask" not in {v.name for v in graph.inputs}:
        return ["the model has no attention_mask input"], per_step
    for node in [n for n in graph if n.op_type == "GroupQueryAttention" and n.domain == MS_DOMAIN]:
        for index in (0, 1):
            found = match_rotary(node.inputs[index])
            if isinstance(found, str):
                reasons.append(found)
                continue
            projection, inv_freq, position_ids, heads = found
            cos, sin = cache(inv_freq, position_ids)
            rotary = ir.Node(MS_DOMAIN, "RotaryEmbedding", [projection, position_ids, cos, sin],
                             attributes=[ir.AttrInt64("num_heads", heads), ir.AttrInt64("interleaved", 0)])
            rotary.outputs[0].name = fresh("rotary_embedding")
            rotary.outputs[0].type, rotary.outputs[0].shape = node.inputs[index].type, node.inputs[index].shape
            graph.append(rotary)
            node.replace_input_with(index, rotary.outputs[0])
    graph.extend(made)
    return reasons, per_step


def rotate_inside(model: ir.Model) -> tuple[int, list[str]]:
    """Each ``GroupQueryAttention`` of ``model`` whose query and key are ``RotaryEmbedding`` (``fuse_rotary``)
    of the first two ``Split`` outputs of one packed projection and whose value is the third
    (``onnxport.targets.genai_packed``) rewritten as the model builder writes it: the packed projection as
    its query (no key, no value: the operator splits it), ``do_rotary=1`` with the rotary's ``cos_cache``,
    ``sin_cache`` and ``position_ids``; in place, the old nodes left unread. Right for every input
    onnxruntime-genai feeds, not for a first prompt whose rows start at different positions (a
    left-padded batch: ``onnxport.targets.genai_cpu``'s docstring). The ``Split`` and the two
    ``RotaryEmbedding`` are removed. Returns how many were rewritten and why the others were not."""
    count, reasons = 0, []
    for node in [n for n in model.graph if n.op_type == "GroupQueryAttention" and n.domain == MS_DOMAIN]:
        q, k = (node.inputs[i].producer() if node.inputs[i] is not None else None for i in (0, 1))
        if q is None or k is None or q.op_type != "RotaryEmbedding" or k.op_type != "RotaryEmbedding":
            reasons.append("the query and key are not rotated by RotaryEmbedding")
            continue
        split = q.inputs[0].producer()
        if split is None or split.op_type != "Split" or len(split.outputs) != 3 or \
                [q.inputs[0], k.inputs[0], node.inputs[2]] != list(split.outputs) or \
                any(len(list(v.uses())) != 1 for v in split.outputs):
            reasons.append("the query, key and value are not one packed projection's Split")
            continue
        if q.inputs[1:] != k.inputs[1:]:
            reasons.append("the query and key are rotated at other positions or by other caches")
            continue
        head = q.inputs[0].shape[-1] // q.attributes["num_heads"].value if q.inputs[0].shape is not None else None
        if not isinstance(head, int) or head % 16:
            reasons.append(f"the head size {head} is not a multiple of 16 (the operator's rotary needs one)")
            continue
        position_ids, cos, sin = q.inputs[1:4]
        for index, value in ((0, split.inputs[0]), (1, None), (2, None), (7, cos), (8, sin), (9, position_ids)):
            node.replace_input_with(index, value)
        node.attributes["do_rotary"] = ir.AttrInt64("do_rotary", 1)
        model.graph.remove([q, k, split], safe=True)  # (after the nodes reading them: not found unread in one pass)
        count += 1
    return count, reasons
