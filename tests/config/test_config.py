"""Export configs: parsing and its errors, example inputs with lengths, output contracts,
checkpoints, target resolution, and ``onnxport.export_target`` with a config end to end."""

from __future__ import annotations

import copy
from pathlib import Path

import onnx
import onnx_ir as ir
import pytest
import torch

import onnxport
from onnxport.config import contract
from onnxport.config.export import load_weights
from onnxport.errors import CheckpointError
from onnxport.config.target import build_model, parse_model_args
from onnxport.errors import TargetError
from onnxport.config import (config_from_declarations, load_config, make_inputs, parse_config,
                             parse_declaration, sizes_text)
from onnxport.errors import ConfigError, ContractError
from onnxport.verify import OrtRunner
from onnxport.weights import open_checkpoint

HERE = Path(__file__).parents[1]
TOY = str(HERE / "cli" / "toy_models.py")
SPEECH_TOML = HERE.parent / "examples" / "speech_encoder.toml"

FRAMER = {
    "target": f"{TOY}:build_framer",
    "model": {"vocab": 5},
    "inputs": {
        "features": {"dtype": "float32", "dims": ["batch", "time", 16]},
        "lengths": {"dtype": "int64", "dims": ["batch"], "lengths_of": "features.time"},
    },
    "outputs": {
        "logits": {"dtype": "float32", "dims": ["batch", "out_time", 5]},
        "out_lengths": {"dtype": "int64", "dims": ["batch"], "lengths_of": "logits.out_time"},
    },
    "dims": {"batch": {"min": 1, "max": 16, "example": 2}, "time": {"min": 2, "max": 64, "example": 5}},
}


def framer(**changes) -> dict:
    data = copy.deepcopy(FRAMER)
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = data
        for p in parents:
            node = node.setdefault(p, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return data


# ------------------------------------------------------------------------------------ parsing
def test_speech_example_config_parses():
    cfg = load_config(SPEECH_TOML)
    assert list(cfg.inputs) == ["features", "lengths"] and list(cfg.outputs) == ["logits", "out_lengths"]
    assert cfg.inputs["features"].dims == ["batch", "time", 80]
    assert cfg.inputs["lengths"].lengths_of == ("features", "time")
    assert cfg.input_dims == ["batch", "time"]
    assert cfg.example_sizes() == {"batch": 2, "time": 23}
    assert len(cfg.sizes) == 3 and cfg.example_sizes() not in cfg.sizes
    assert cfg.model_args["vocab"] == 32 and cfg.opset == 20 and cfg.atol is None and cfg.rtol is None


def test_validate_tolerances_parse():
    cfg = parse_config(framer(validate={"atol": 1e-4, "rtol": 1e-3}))
    assert (cfg.atol, cfg.rtol) == (1e-4, 1e-3)


def test_default_sizes_avoid_the_example_in_every_dim():
    cfg = parse_config(framer(validate=None))
    example = cfg.example_sizes()
    assert len(cfg.sizes) >= 3
    for s in cfg.sizes:
        assert all(s[k] != v and cfg.dims[k].min <= s[k] <= cfg.dims[k].max for k, v in example.items()), s


@pytest.mark.parametrize("changes, message", [
    ({"extra": {}}, "unknown section"),
    ({"inputs__features__dtype": "float33"}, "dtype 'float33' is not known"),
    ({"inputs__features__dims": ["batch", "t-1", 16]}, "not an identifier"),
    ({"inputs__features__dims": None}, "needs both dtype and dims"),
    ({"inputs__lengths__lengths_of": "feats.time"}, "there is no input 'feats'"),
    ({"inputs__lengths__lengths_of": "features.frames"}, "has no dim 'frames'"),
    ({"inputs__lengths__dtype": "float32"}, "1-D and integer"),
    ({"inputs__lengths__dims": ["time"]}, "must be another dim"),
    ({"inputs__lengths2": {"dtype": "int64", "dims": ["batch"], "lengths_of": "features.time"}},
     "already has the length input 'lengths'"),
    ({"inputs__batch": {"dtype": "int64", "dims": []}}, "the size of dim 'batch'"),
    ({"inputs__batch_size": {"dtype": "int32", "dims": []}}, "'batch_size' is the size of dim 'batch'"),
    ({"dims__time": {"min": 9, "max": 3}}, "do not form a range"),
    ({"dims__time": {"min": 2, "max": 9, "example": 12}}, "outside 2..9"),
    ({"dims__frames": {"min": 1, "max": 3}}, "which no input declares"),
    ({"export__opset": 17}, "below 18"),
    ({"export__fast": True}, "unknown key 'fast'"),
    ({"validate__sizes": [{"batch": 3}, {"batch": 4}]}, "at least three"),
    ({"validate__sizes": [{"batch": 3}, {"batch": 4}, {"batch": 2, "time": 5}]}, "equals the export's example"),
    ({"validate__sizes": [{"batch": 3}, {"batch": 4}, {"time": 65}]}, "time = 65 is outside 2..64"),
    ({"validate__sizes": [{"batch": 3}, {"batch": 4}, {"channels": 5}]}, "are not input dims"),
])
def test_config_errors_name_the_key(changes, message):
    with pytest.raises(ConfigError, match="config") as info:
        parse_config(framer(**changes))
    assert message in str(info.value)


def test_an_example_too_large_to_build_is_a_config_error():
    big = framer(dims__time={"min": 2, "max": 10**12, "example": 10**11})
    with pytest.raises(ConfigError) as info:
        parse_config(big)
    first = str(info.value).splitlines()[0]
    assert "the example sizes make inputs of" in first and "features" in first and len(first) <= 200
    listed = framer(validate__sizes=[{"batch": 3}, {"batch": 4}, {"time": 10**10}],
                    dims__time={"min": 2, "max": 10**12, "example": 5})
    with pytest.raises(ConfigError, match=r"\[validate\] sizes batch=2, time=10000000000 make inputs"):
        parse_config(listed)


def test_bad_toml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[inputs.x]\ndtype = float32\n')
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "none.toml")


def test_declarations():
    d = parse_declaration("x: float32[batch, 3, 224, 224]")
    assert (d.name, d.dtype, d.dims) == ("x", torch.float32, ["batch", 3, 224, 224])
    assert parse_declaration("ids:int64[batch,seq]").dims == ["batch", "seq"]
    for text in ("x float32[3]", "x: complex[3]", "x: float32[3.5]"):
        with pytest.raises(ConfigError):
            parse_declaration(text)


# ------------------------------------------------------------------------------------ inputs
@pytest.mark.parametrize("sizes", [{"batch": 1, "time": 2}, {"batch": 7, "time": 13}, {"batch": 16, "time": 64}])
def test_lengths_tied_to_their_dim(sizes):
    cfg = parse_config(framer())
    x = make_inputs(cfg, sizes, seed=3)
    feats, lengths = x["features"], x["lengths"]
    assert feats.shape == (sizes["batch"], sizes["time"], 16) and feats.dtype == torch.float32
    assert lengths.shape == (sizes["batch"],) and lengths.dtype == torch.int64
    assert int(lengths.min()) >= 1 and int(lengths.max()) == sizes["time"]
    for b in range(sizes["batch"]):
        n = int(lengths[b])
        assert torch.all(feats[b, n:] == 0) and torch.any(feats[b, :n] != 0)
    again = make_inputs(cfg, sizes, seed=3)
    assert torch.equal(again["features"], feats) and torch.equal(again["lengths"], lengths)


# ------------------------------------------------------------------------------------ contract
def _pairs(cfg, returned):
    return contract.match_outputs(cfg, returned)


def test_contract_names_missing_and_extra_outputs():
    cfg = parse_config(framer())
    logits, lens = torch.zeros(2, 10, 5), torch.ones(2, dtype=torch.int64)
    assert [n for n, _ in _pairs(cfg, {"out_lengths": lens, "logits": logits})] == ["out_lengths", "logits"]
    with pytest.raises(ContractError, match=r"missing \['logits'\].*extra \(not declared\) \['scores'\]"):
        _pairs(cfg, {"scores": logits, "out_lengths": lens})
    with pytest.raises(ContractError, match=r"returns 3 output\(s\).*extra \(not declared\) \['output 2'\]"):
        _pairs(cfg, (logits, lens, lens))
    with pytest.raises(ContractError, match=r"missing \['out_lengths'\]"):
        _pairs(cfg, logits)


@pytest.mark.parametrize("logits, lens, message", [
    (torch.zeros(2, 10, 5, dtype=torch.float64), None, "dtype float64"),
    (torch.zeros(2, 10), None, "rank 3"),
    (torch.zeros(2, 10, 6), None, "axis 2 is declared 5"),
    (torch.zeros(3, 10, 5), None, "axis 0 is declared 'batch', the inputs' dim of size 2, but the model gives 3"),
    (torch.zeros(2, 4, 5), torch.full((2,), 9), "holds values 9..9"),
])
def test_contract_checks_tensors(logits, lens, message):
    cfg = parse_config(framer())
    lens = torch.ones(2, dtype=torch.int64) if lens is None else lens
    with pytest.raises(ContractError, match="output") as info:
        contract.check_tensors(cfg, _pairs(cfg, {"logits": logits, "out_lengths": lens}), {"batch": 2, "time": 5})
    assert message in str(info.value)


def test_contract_output_named_like_input_dim_but_sized_differently():
    cfg = parse_config(framer(outputs__logits__dims=["batch", "time", 5], outputs__out_lengths__lengths_of=None))
    pairs = _pairs(cfg, {"logits": torch.zeros(2, 10, 5), "out_lengths": torch.ones(2, dtype=torch.int64)})
    with pytest.raises(ContractError, match="declared 'time', the inputs' dim of size 5, but the model gives 10"):
        contract.check_tensors(cfg, pairs, {"batch": 2, "time": 5})


@pytest.mark.parametrize("expr, sizes, value", [
    ("((time - 1)//2)//2 + 1", {"time": 23}, 6),
    ("floor(floor((time - 1)/2)/2) + 1", {"time": 4}, 1),
    ("2*time", {"time": 7, "batch": 3}, 14),
    ("batch*time - 1", {"time": 7, "batch": 3}, 20),
    ("time + ?", {"time": 7}, None),
])
def test_evaluate_dim(expr, sizes, value):
    assert contract.evaluate_dim(expr, sizes) == value


# ------------------------------------------------------------------------------------ checkpoints
def test_checkpoint_dict_of_several_things(tmp_path):
    model = build_model(f"{TOY}:build_framer", {"seed": 1})
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "epoch": 3, "optimizer": {"lr": 0.1}}, path)
    other = build_model(f"{TOY}:build_framer", {"seed": 2})
    load_weights(other, path)
    assert torch.equal(other.lin.weight, model.lin.weight)
    assert open_checkpoint(path).extras == {"epoch": 3}
    torch.save({f"module.{k}": v for k, v in model.state_dict().items()}, path)
    assert set(open_checkpoint(path).entries) == {"module.lin.weight", "module.lin.bias"}
    with pytest.warns(UserWarning, match="bound across it"):
        load_weights(build_model(f"{TOY}:build_framer"), path)


def test_checkpoint_errors_list_the_keys(tmp_path):
    model = build_model(f"{TOY}:build_framer")
    path = tmp_path / "wrong.pt"
    torch.save({"state_dict": {"lin.weight": model.lin.weight.data, "head.bias": torch.zeros(3)}}, path)
    with pytest.raises(CheckpointError, match=r"missing from the checkpoint: lin.bias; unexpected in the checkpoint: "
                                              r"head.bias"):
        load_weights(model, path)
    torch.save({"lin.weight": torch.zeros(4, 8), "lin.bias": torch.zeros(5)}, path)
    with pytest.raises(CheckpointError, match=r"other shape .*lin.weight \(4, 8\) vs \(5, 8\)"):
        load_weights(model, path)
    torch.save({"epoch": 3}, path)
    with pytest.raises(CheckpointError, match="no state dict"):
        open_checkpoint(path)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="cannot be read"):
        open_checkpoint(tmp_path / "junk.pt")


# ------------------------------------------------------------------------------------ targets
def test_targets_and_model_args():
    assert parse_model_args(["depth=4", "name=tiny", "sizes=[1, 2]", "flag=True"]) == \
        {"depth": 4, "name": "tiny", "sizes": [1, 2], "flag": True}
    assert isinstance(build_model("torch.nn:Linear", {"in_features": 3, "out_features": 2}), torch.nn.Linear)
    assert build_model(f"{TOY}:Net", {"hidden": 3}).l1.out_features == 3
    with pytest.raises(TargetError, match="no attribute 'Nope'"):
        build_model(f"{TOY}:Nope")
    with pytest.raises(TargetError, match="cannot import module"):
        build_model("no_such_package.models:build")
    with pytest.raises(TargetError, match="not MODULE:CALLABLE"):
        build_model("model.py")
    with pytest.raises(TargetError, match="--model-arg"):
        build_model(f"{TOY}:Net", {"width": 3})
    with pytest.raises(TargetError, match="not a torch.nn.Module"):
        build_model("collections:OrderedDict")
    with pytest.raises(TargetError, match="KEY=VALUE"):
        parse_model_args(["depth"])


# ------------------------------------------------------------------------------------ end to end
def test_export_target_names_and_dims_exactly_as_declared():
    result = onnxport.export_target(config=framer())
    g = result.model_proto.graph
    onnx.checker.check_model(result.model_proto, full_check=True)

    def dims(v):
        return [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]

    assert [(v.name, dims(v)) for v in g.input] == [("features", ["batch", "time", 16]), ("lengths", ["batch"])]
    assert [(v.name, dims(v)) for v in g.output] == [("logits", ["batch", "out_time", 5]), ("out_lengths", ["batch"])]
    report = result.validation
    assert report.ok, report
    assert {"example", "sizes 1", "sizes 2", "sizes 3"} <= {c.inputs for c in report.checks}
    assert all(c.sizes.startswith("batch=") for c in report.checks)


def test_export_target_with_module_and_checkpoint(tmp_path):
    trained = build_model(f"{TOY}:build_framer", {"seed": 5})
    torch.save({"model": trained.state_dict(), "step": 10}, tmp_path / "c.pt")
    result = onnxport.export_target(build_model(f"{TOY}:build_framer"), config=framer(target=None),
                                    checkpoint=tmp_path / "c.pt", validate=False)
    x = make_inputs(result.config, {"batch": 3, "time": 7}, seed=4)
    got = OrtRunner(result.model_proto).run([x["features"], x["lengths"]])
    torch.testing.assert_close(torch.from_numpy(got[0]), trained(**x)["logits"], atol=1e-5, rtol=1e-4)
    assert result.validation is None


def test_export_target_declared_dynamic_comes_out_static():
    data = {"target": f"{TOY}:build_net", "inputs": {"x": {"dtype": "float32", "dims": ["batch", 16]}},
            "outputs": {"scores": {"dtype": "float32", "dims": ["batch", "width"]}}}
    with pytest.raises(ContractError,
                       match="declares the dynamic dim 'width', the exported model gives the constant 4"):
        onnxport.export_target(config=data)


def test_export_target_inputs_must_match_forward():
    with pytest.raises(ContractError, match=r"declares input\(s\) \['feats'\] but Framer.forward takes"):
        onnxport.export_target(config=framer(inputs__feats=FRAMER["inputs"]["features"], inputs__features=None,
                                             inputs__lengths__lengths_of="feats.time"))
    with pytest.raises(ConfigError, match="names no model"):
        onnxport.export_target(config=framer(target=None))


def test_export_from_config_still_works_and_names_the_new_door():
    with pytest.warns(DeprecationWarning, match=r"use onnxport.export_target\(model, config=config"):
        result = onnxport.export_from_config(framer(target=None), model=f"{TOY}:build_framer", validate=False)
    assert [v.name for v in result.model.graph.inputs] == ["features", "lengths"]
    with pytest.raises(TypeError, match="unexpected keyword argument 'speed'"), pytest.warns(DeprecationWarning):
        onnxport.export_from_config(framer(), speed=2)


def _graph(out_shapes: dict) -> ir.Model:
    f = ir.Value(name="features", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(["batch", "time", 16]))
    n = ir.Value(name="lengths", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape(["batch"]))
    outs = []
    for (name, shape), src in zip(out_shapes.items(), (f, n)):
        node = ir.Node("", "Identity", [src])
        v = node.outputs[0]
        v.name, v.type = name, src.type
        v.shape = ir.Shape(shape) if shape is not None else None
        outs.append((node, v))
    graph = ir.Graph([f, n], [v for _, v in outs], nodes=[node for node, _ in outs], opset_imports={"": 20})
    return ir.Model(graph, ir_version=10)


@pytest.mark.parametrize("logits, message", [
    (["batch", "2*time", "vocab"], "axis 2: the config declares 5, the exported model gives 'vocab'"),
    (["batch", 7, 5], "declares the dynamic dim 'out_time', the exported model gives the constant 7"),
    (["time", "2*time", 5], "declares the input dim 'batch', the exported model gives 'time'"),
])
def test_onnx_dims_against_the_declaration(logits, message):
    cfg = parse_config(framer())
    with pytest.raises(ContractError, match="output 'logits'") as info:
        contract.check_onnx_dims(cfg, _graph({"logits": logits, "out_lengths": ["batch"]}))
    assert message in str(info.value)


def test_onnx_dims_renamed_and_unknown_ones_declared():
    cfg = parse_config(framer())
    model = _graph({"logits": ["batch", "2*time", 5], "out_lengths": None})
    renames = contract.check_onnx_dims(cfg, model)
    assert renames == {("logits", 1): "2*time", ("out_lengths", 0): ""}
    runs = [("a", {"batch": 2, "time": 3}, {"out_time": 6}), ("b", {"batch": 1, "time": 9}, {"out_time": 18})]
    assert contract.check_derived_dims(cfg, renames, runs) == {"2*time": "out_time"}
    with pytest.raises(ContractError, match=r"exported size 2\*time is 18 on b, the model gives 17"):
        contract.check_derived_dims(cfg, renames, runs[:1] + [("b", {"batch": 1, "time": 9}, {"out_time": 17})])
    contract.rename_output_dims(model, cfg, renames)
    got = [[d if isinstance(d, int) else str(d) for d in v.shape] for v in model.graph.outputs]
    assert got == [["batch", "out_time", 5], ["batch"]]
    inputs_changed = _graph({"logits": ["batch", "2*time", 5], "out_lengths": ["batch"]})
    inputs_changed.graph.inputs[0].shape = ir.Shape(["batch", 12, 16])
    with pytest.raises(ContractError, match=r"ONNX input 'features' has dims \['batch', 12, 16\], the config declares"):
        contract.check_onnx_dims(cfg, inputs_changed)


def test_integer_sequences_padded_past_their_lengths():
    cfg = parse_config({"inputs": {
        "ids": {"dtype": "int64", "dims": ["batch", "seq"], "low": 1, "high": 50},
        "mask_len": {"dtype": "int32", "dims": ["batch"], "lengths_of": "ids.seq"},
        "flags": {"dtype": "bool", "dims": ["seq", "batch"]}}})
    x = make_inputs(cfg, {"batch": 6, "seq": 9}, seed=2)
    assert x["mask_len"].dtype == torch.int32 and int(x["mask_len"].max()) == 9
    for b in range(6):
        n = int(x["mask_len"][b])
        assert torch.all(x["ids"][b, n:] == 0) and torch.all((x["ids"][b, :n] >= 1) & (x["ids"][b, :n] < 50))
        assert not torch.any(x["flags"][n:, b])


def test_declarations_write_dtypes_and_sizes_in_the_config_spelling():
    data = config_from_declarations(["x: long[batch, 3]"], ["y: double[batch]"])
    assert data["inputs"]["x"] == {"dtype": "int64", "dims": ["batch", 3]}
    assert data["outputs"]["y"] == {"dtype": "float64", "dims": ["batch"]}
    assert str(parse_declaration("m: half[2, n]")) == "m: float16[2, n]"
    assert sizes_text({"batch": 3, "time": 37}) == "batch=3, time=37"
