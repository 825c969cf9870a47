"""The files ``onnxport export-hf`` writes (the model, ``genai_config.json``, the config and
tokenizer files copied) have the mode a plain ``open()`` gives a new file under the process's
umask: readable by group and others under umask 022, by the owner only under 077, whatever the
mode of the source's files."""

from __future__ import annotations

import os

import pytest
import torch

from onnxport.cli import main

transformers = pytest.importorskip("transformers")

TOKENIZER_FILES = {"tokenizer_config.json": b'{"model_max_length": 128}', "vocab.json": b'{"a": 3, "b": 4}'}


pytestmark = pytest.mark.usefixtures("offline")  # the hub offline, no connection (conftest.py)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """A tiny Llama written by ``save_pretrained`` (seeded), with tokenizer files readable by their
    owner only."""
    path = tmp_path_factory.mktemp("hf") / "llama"
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    transformers.LlamaForCausalLM(config).save_pretrained(path)
    for name, data in TOKENIZER_FILES.items():
        (path / name).write_bytes(data)
        os.chmod(path / name, 0o600)
    return path


@pytest.fixture
def umask():
    """``os.umask``, to set the process's umask in the test; the umask before it restored after it."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_files_export_hf_writes_follow_the_umask(llama, tmp_path, umask, mask):
    umask(mask)
    out = tmp_path / "out"
    assert main(["export-hf", str(llama), "-o", str(out), "--quiet", "--no-validate", "--generate", "0"]) == 0
    files = {p.name: os.stat(p).st_mode & 0o777 for p in out.iterdir()}
    assert set(files) == {"model.onnx", "genai_config.json", "config.json", "generation_config.json",
                          *TOKENIZER_FILES}
    assert files == dict.fromkeys(files, 0o666 & ~mask)
    if mask == 0o022:
        assert all(mode & 0o044 == 0o044 for mode in files.values())  # a service of another user reads them
    else:
        assert all(mode & 0o077 == 0 for mode in files.values())
    assert (out / "vocab.json").read_bytes() == TOKENIZER_FILES["vocab.json"]
