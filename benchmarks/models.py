"""Models compared by ``benchmarks/compare.py``: name -> factory returning (model, args, dynamic_shapes).

``dynamic_shapes`` names dimensions with plain strings (onnxport's form) or ``torch.export.Dim``
objects where a range is needed; compare.py turns the strings into ``Dim`` objects for
torch.onnx.export. Weights are seeded random, nothing is downloaded.
"""

from __future__ import annotations

from typing import Any, Callable

import torch


class MLP(torch.nn.Module):
    """Three Linear layers with GELU and ReLU over (batch, time, 64)."""

    def __init__(self, d: int = 64, hidden: int = 256):
        super().__init__()
        self.fc1 = torch.nn.Linear(d, hidden)
        self.fc2 = torch.nn.Linear(hidden, hidden)
        self.fc3 = torch.nn.Linear(hidden, d)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.nn.functional.gelu(self.fc1(x)))))


class SmallCNN(torch.nn.Module):
    """Conv-BN-ReLU-pool twice, global average pool, linear head, over (batch, 3, H, W)."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        )
        self.head = torch.nn.Linear(32, classes)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


def mlp() -> tuple[torch.nn.Module, tuple, Any]:
    """MLP over (batch, time, 64)."""
    torch.manual_seed(0)
    return MLP().eval(), (torch.randn(2, 7, 64),), {"x": {0: "batch", 1: "time"}}


def transformer_encoder() -> tuple[torch.nn.Module, tuple, Any]:
    """Two nn.TransformerEncoderLayer (width 64, 4 heads) over (batch, seq, 64)."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    return model, (torch.randn(2, 9, 64),), {"src": {0: "batch", 1: "seq"}}


def small_cnn() -> tuple[torch.nn.Module, tuple, Any]:
    """SmallCNN over (batch, 3, height, width), height and width at least 4."""
    torch.manual_seed(0)
    size = {"min": 4, "max": 1024}  # two 2x poolings need at least 4 pixels
    dims = {0: "batch", 2: torch.export.Dim("height", **size), 3: torch.export.Dim("width", **size)}
    return SmallCNN().eval(), (torch.randn(2, 3, 32, 32),), {"x": dims}


# ------------------------------------------------------------------ model zoo: tiny transformers configs
VOCAB, WIDTH, LAYERS, HEADS, FF = 1000, 64, 2, 4, 128


class TextModel(torch.nn.Module):
    """A Hugging Face model called with (input_ids, attention_mask), returning one output field."""

    def __init__(self, model: torch.nn.Module, output: str):
        super().__init__()
        self.model, self.output = model, output

    def forward(self, input_ids, attention_mask):
        return getattr(self.model(input_ids=input_ids, attention_mask=attention_mask), self.output)


def _text(model: torch.nn.Module, output: str) -> tuple[torch.nn.Module, tuple, Any]:
    ids = torch.randint(0, VOCAB, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.int64)
    seq = torch.export.Dim("seq", max=128)  # position embeddings cover 128 positions
    dims = {"input_ids": {0: "batch", 1: seq}, "attention_mask": {0: "batch", 1: seq}}
    return TextModel(model, output).eval(), (ids, mask), dims


def bert() -> tuple[torch.nn.Module, tuple, Any]:
    """Tiny BertModel (2 layers, width 64) on input_ids / attention_mask."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=WIDTH, num_hidden_layers=LAYERS,
                                  num_attention_heads=HEADS, intermediate_size=FF, max_position_embeddings=128)
    return _text(transformers.BertModel(cfg, add_pooling_layer=False), "last_hidden_state")


def gpt2() -> tuple[torch.nn.Module, tuple, Any]:
    """Tiny GPT2LMHeadModel (2 layers, width 64), logits."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_embd=WIDTH, n_layer=LAYERS, n_head=HEADS, n_positions=128,
                                  use_cache=False, bos_token_id=0, eos_token_id=0)
    return _text(transformers.GPT2LMHeadModel(cfg), "logits")


def llama() -> tuple[torch.nn.Module, tuple, Any]:
    """Tiny LlamaForCausalLM (2 layers, grouped-query heads), logits."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=WIDTH, num_hidden_layers=LAYERS,
                                   num_attention_heads=HEADS, num_key_value_heads=2, intermediate_size=FF,
                                   max_position_embeddings=128, use_cache=False)
    return _text(transformers.LlamaForCausalLM(cfg), "logits")


MODELS: dict[str, Callable[[], tuple[torch.nn.Module, tuple, Any]]] = {
    "mlp": mlp,
    "transformer_encoder": transformer_encoder,
    "small_cnn": small_cnn,
    "bert": bert,
    "gpt2": gpt2,
    "llama": llama,
}
