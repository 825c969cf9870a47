"""Reading checkpoints lazily: a safetensors file, a sharded checkpoint by its index or its folder,
a torch.save state dict memory-mapped, several files; names, shapes and dtypes from the headers,
one tensor read at a time, and clear errors for missing shards, names in two files and damaged
files."""

import json

import pytest
import torch
from safetensors.torch import save_file

from onnxport.errors import CheckpointError
from onnxport.weights import open_checkpoint

STATE = {"a.weight": torch.randn(4, 3), "a.bias": torch.randn(4), "b.weight": torch.randn(2, 4).to(torch.bfloat16),
         "steps": torch.arange(5)}


def _sharded(tmp_path, state=STATE):
    first, second = dict(list(state.items())[:2]), dict(list(state.items())[2:])
    save_file(first, str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file(second, str(tmp_path / "model-00002-of-00002.safetensors"))
    index = {"metadata": {}, "weight_map": {**{k: "model-00001-of-00002.safetensors" for k in first},
                                            **{k: "model-00002-of-00002.safetensors" for k in second}}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    return tmp_path / "model.safetensors.index.json"


def _check(ckpt):
    assert set(ckpt.entries) == set(STATE)
    assert ckpt.reads == 0
    for name, value in STATE.items():
        entry = ckpt.entries[name]
        assert entry.shape == tuple(value.shape) and entry.dtype == value.dtype
        assert torch.equal(ckpt.read(name), value)
    assert ckpt.reads == len(STATE)
    assert ckpt.nbytes == sum(v.numel() * v.element_size() for v in STATE.values())


def test_safetensors_file(tmp_path):
    save_file(STATE, str(tmp_path / "m.safetensors"))
    _check(open_checkpoint(tmp_path / "m.safetensors"))


def test_sharded_by_index_and_by_folder(tmp_path):
    index = _sharded(tmp_path)
    _check(open_checkpoint(index))
    ckpt = open_checkpoint(tmp_path)
    _check(ckpt)
    assert ckpt.entries["b.weight"].file.endswith("model-00002-of-00002.safetensors")


def test_torch_state_dict_read_memory_mapped(tmp_path):
    torch.save({"model": STATE, "epoch": 3}, tmp_path / "m.pt")
    ckpt = open_checkpoint(tmp_path / "m.pt")
    _check(ckpt)
    read = ckpt.read("a.weight")
    read.add_(1)  # a copy out of the mapping: the file's tensor is unchanged
    assert torch.equal(ckpt.read("a.weight"), STATE["a.weight"])


def test_several_files_joined_and_a_name_in_two_refused(tmp_path):
    save_file(dict(list(STATE.items())[:2]), str(tmp_path / "one.safetensors"))
    torch.save(dict(list(STATE.items())[2:]), tmp_path / "two.pt")
    _check(open_checkpoint([tmp_path / "one.safetensors", tmp_path / "two.pt"]))
    save_file({"a.bias": torch.zeros(4)}, str(tmp_path / "three.safetensors"))
    with pytest.raises(CheckpointError, match=r"(?s)'a.bias' is in two files .*one.safetensors and .*three"):
        open_checkpoint([tmp_path / "one.safetensors", tmp_path / "three.safetensors"])


def test_missing_shard_missing_file_and_damaged_file(tmp_path):
    index = _sharded(tmp_path)
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(CheckpointError, match="(?s)names shard.* that do not exist.*model-00002-of-00002"):
        open_checkpoint(index)
    with pytest.raises(CheckpointError, match="does not exist"):
        open_checkpoint(tmp_path / "nowhere.safetensors")
    (tmp_path / "bad.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    with pytest.raises(CheckpointError, match="cannot be read as a safetensors file"):
        open_checkpoint(tmp_path / "bad.safetensors")
