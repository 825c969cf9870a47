"""Models compared by ``benchmarks/compare.py``: name -> factory returning a :class:`Case`.

Every model family the tests export is here: the core models (``onnxport.demo_models``), the
control-flow models (scan, cond, while_loop, a Python loop rewritten into a scan) and the model zoo
of ``tests/models`` (Conformer, LSTM/GRU taggers, U-Net, Hugging Face BERT, GPT-2, Llama, ViT,
WhisperEncoder). Model classes defined at module level in ``tests/`` or ``examples/`` are imported
from their file by path (:func:`load_source`), so this module works without pytest running.

``dynamic_shapes`` names dimensions with plain strings (onnxport's form) or ``torch.export.Dim``
objects where a range is needed; compare.py turns the strings into ``Dim`` objects for
torch.onnx.export. Weights are seeded random, nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Callable

import torch
from torch.export import Dim

from case import Case  # noqa: F401 - the benchmark case, read from here by compare.py

from onnxport import demo_models

ROOT = Path(__file__).resolve().parents[1]


def load_source(relative: str) -> ModuleType:
    """Import the Python file ``relative`` (to the checkout root, e.g. ``tests/models/test_unet.py``)
    under a private module name, with ``tests/`` on ``sys.path`` for its ``exportcheck`` import.

    Raises:
        FileNotFoundError: the file is not in the checkout.
    """
    path = ROOT / relative
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: benchmarks/models.py imports its model classes from it")
    name = "_onnxport_bench_" + relative.replace("/", "_").removesuffix(".py")
    if name in sys.modules:
        return sys.modules[name]
    tests_dir = str(ROOT / "tests")
    if tests_dir not in sys.path:
        sys.path.append(tests_dir)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


# ------------------------------------------------------------------------------------ core models
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


def mlp() -> Case:
    """MLP over (batch, time, 64)."""
    torch.manual_seed(0)
    return Case(MLP().eval(), (torch.randn(2, 7, 64),), {"x": {0: "batch", 1: "time"}})


def small_cnn() -> Case:
    """SmallCNN over (batch, 3, height, width), height and width at least 4."""
    torch.manual_seed(0)
    size = {"min": 4, "max": 1024}  # two 2x poolings need at least 4 pixels
    dims = {0: "batch", 2: Dim("height", **size), 3: Dim("width", **size)}
    return Case(SmallCNN().eval(), (torch.randn(2, 3, 32, 32),), {"x": dims})


def resnet_same_cnn() -> Case:
    """demo_models.resnet_same_cnn: 1-D ResNet-style CNN with padding="same" convs over (batch, 8, time)."""
    args, dims = demo_models.cnn_example()
    return Case(demo_models.resnet_same_cnn(), args, dims)


def transformer_encoder() -> Case:
    """demo_models.transformer_encoder: 2-layer nn.TransformerEncoder (width 64) over (batch, time, 64)."""
    args, dims = demo_models.transformer_example()
    return Case(demo_models.transformer_encoder(), args, dims)


# ------------------------------------------------------------------------------------ control flow
# both exporters at their defaults: torch.onnx.export inlines control-flow bodies, onnxport keeps
# each as a local function (its nodes counted with the model's)

def _cdist(model: torch.nn.Module, other: tuple[int, int, int], onnxport_kwargs: dict) -> Case:
    """Pairwise distances of x [x_rows, dim] and y [y_rows, dim]; ``other``: (x_rows, y_rows, dim)
    of the other input set."""
    x_rows, y_rows, dim = Dim("x_rows"), Dim("y_rows"), Dim("dim")
    gen = torch.Generator().manual_seed(0)
    args = (torch.randn(3, 4, generator=gen), torch.randn(5, 4, generator=gen))
    n, m, d = other
    others = [(torch.randn(n, d, generator=gen), torch.randn(m, d, generator=gen))]
    return Case(model.eval(), args, {"x": {0: x_rows, 1: dim}, "y": {0: y_rows, 1: dim}}, others, onnxport_kwargs)


def scan_cdist() -> Case:
    """examples/scan_cdist.py: pairwise distances with one scan over the rows of x."""
    return _cdist(load_source("examples/scan_cdist.py").PairwiseDistance(), (20, 9, 7), {})


def loop_cdist() -> Case:
    """examples/loop_cdist.py: pairwise distances written as a Python loop over x.shape[0]; onnxport
    exports it with ``rewrite_control_flow=True`` (one Scan), torch.export alone unrolls it."""
    return _cdist(load_source("examples/loop_cdist.py").Loop(), (11, 4, 6), {"rewrite_control_flow": True})


def scan_decoder() -> Case:
    """tests/models/test_scan_decoder.py: RNN-style decoder as a scan over time (hidden state and
    previous output carried, parameters used in the body)."""
    module = load_source("tests/models/test_scan_decoder.py")
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    args = (torch.randn(2, 7, 6, generator=gen), torch.randn(2, 16, generator=gen))
    others = [(torch.randn(4, 50, 6, generator=gen), torch.randn(4, 16, generator=gen))]
    return Case(module.ScanDecoder().eval(), args, {"x": {0: "batch", 1: "time"}, "h0": {0: "batch"}}, others)


def cond() -> Case:
    """tests/translate/ops/test_cond.py TensorPredicate: torch.cond on ``x.sum() > 0``, two operands,
    two outputs; the other inputs take each branch."""
    module = load_source("tests/translate/ops/test_cond.py")
    gen = torch.Generator().manual_seed(0)
    pos = (torch.rand(3, 4, generator=gen) + 0.1, torch.rand(3, 4, generator=gen) + 0.1)
    others = [(-torch.rand(6, 4, generator=gen) - 0.1, torch.rand(6, 4, generator=gen)),
              (torch.rand(5, 4, generator=gen) + 0.1, torch.rand(5, 4, generator=gen))]
    batch = Dim("B")
    return Case(module.TensorPredicate().eval(), pos, {"x": {0: batch}, "y": {0: batch}}, others)


def cond_in_scan() -> Case:
    """tests/translate/ops/test_cond.py CondInScan: per time step, a cond on the data and one on a size."""
    module = load_source("tests/translate/ops/test_cond.py")
    gen = torch.Generator().manual_seed(0)
    args = (torch.randn(6, 3, generator=gen), torch.randn(3, generator=gen))
    others = [(torch.randn(9, 4, generator=gen), torch.randn(4, generator=gen)),
              (torch.randn(4, 1, generator=gen), torch.randn(1, generator=gen))]
    batch = Dim("B")
    return Case(module.CondInScan().eval(), args, {"x": {0: Dim("T"), 1: batch}, "h": {0: batch}}, others)


def while_loop() -> Case:
    """tests/translate/ops/test_while_loop.py Accumulate: a while_loop with a data-dependent trip
    count, additional inputs and a parameter in the body."""
    module = load_source("tests/translate/ops/test_while_loop.py")
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 2, generator=gen)
    others = [(torch.randn(7, 2, generator=gen), torch.tensor(100.0)), (x[:1], torch.tensor(0.5))]
    return Case(module.Accumulate().eval(), (x, torch.tensor(20.0)), {"x": {0: Dim("B")}, "limit": None}, others)


# ------------------------------------------------------------------------------------ model zoo
def conformer() -> Case:
    """tests/models/test_conformer.py: Conformer encoder, features [batch, time, 80] and lengths
    [batch] -> logits and out_lengths; other sizes with unsorted lengths, one equal to time."""
    module = load_source("tests/models/test_conformer.py")
    gen = torch.Generator().manual_seed(1)
    args = (torch.randn(3, 37, module.FEATS, generator=gen), torch.tensor([22, 37, 9]))
    others = [(torch.randn(2, 50, module.FEATS, generator=gen), torch.tensor([50, 31])),
              (torch.randn(4, 23, module.FEATS, generator=gen), torch.tensor([5, 23, 1, 17]))]
    time = Dim("time", min=5)  # the subsampling needs 5 frames
    return Case(module._conformer(), args, {"features": {0: "batch", 1: time}, "lengths": {0: "batch"}}, others)


def _tagger(cell: str, state: bool) -> Case:
    module = load_source("tests/models/test_rnn_taggers.py")
    torch.manual_seed(0)
    model = module.Tagger(cell).eval()
    gen = torch.Generator().manual_seed(0)

    def inputs(batch, time):
        out = [torch.randint(0, module.VOCAB, (batch, time), generator=gen)]
        if state:
            out += [torch.randn(2 * module.LAYERS, batch, module.HIDDEN, generator=gen)
                    for _ in (("h0", "c0") if cell == "lstm" else ("h0",))]
        return tuple(out)

    dims = {"tokens": {0: "batch", 1: "time"}}
    if state:
        dims.update({name: {1: "batch"} for name in (("h0", "c0") if cell == "lstm" else ("h0",))})
    return Case(model, inputs(3, 9), dims, [inputs(5, 17), inputs(1, 4)])


def lstm_tagger() -> Case:
    """tests/models/test_rnn_taggers.py Tagger("lstm"): 2-layer bidirectional LSTM, zero initial state."""
    return _tagger("lstm", state=False)


def gru_tagger() -> Case:
    """tests/models/test_rnn_taggers.py Tagger("gru"): 2-layer bidirectional GRU, zero initial state."""
    return _tagger("gru", state=False)


def lstm_tagger_state() -> Case:
    """Tagger("lstm") with initial states h0, c0 [4, batch, 24] as inputs."""
    return _tagger("lstm", state=True)


def gru_tagger_state() -> Case:
    """Tagger("gru") with the initial state h0 [4, batch, 24] as an input."""
    return _tagger("gru", state=True)


def _packed(cell: str) -> Case:
    module = load_source("tests/models/test_rnn_taggers.py")
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, module.VOCAB, (4, 11), generator=gen)
    others = [(torch.randint(0, module.VOCAB, (3, 8), generator=gen), torch.tensor([1, 8, 4])),
              (torch.randint(0, module.VOCAB, (6, 23), generator=gen), torch.tensor([23, 5, 17, 2, 23, 9]))]
    dims = {"tokens": {0: "batch", 1: "time"}, "lengths": {0: "batch"}}
    return Case(module.PackedTagger(cell).eval(), (tokens, torch.tensor([7, 11, 2, 9])), dims, others)


def lstm_packed_tagger() -> Case:
    """tests/models/test_rnn_taggers.py PackedTagger("lstm"): pack_padded_sequence from lengths."""
    return _packed("lstm")


def gru_packed_tagger() -> Case:
    """tests/models/test_rnn_taggers.py PackedTagger("gru"): pack_padded_sequence from lengths."""
    return _packed("gru")


def unet() -> Case:
    """tests/models/test_unet.py: U-Net-style CNN, dynamic batch and height/width multiples of 4."""
    module = load_source("tests/models/test_unet.py")
    torch.manual_seed(0)
    model = module.UNet().eval()
    gen = torch.Generator().manual_seed(0)
    others = [(torch.randn(3, 3, 12, 20, generator=gen),), (torch.randn(4, 3, 8, 36, generator=gen),)]
    return Case(model, (torch.randn(2, 3, 16, 12, generator=gen),), module._dynamic(), others)


# --------------------------------------------------------- model zoo: tiny Hugging Face transformers configs
# the text models are tests/models/test_hf.py's; the vision and audio encoders below use the same sizes
_HF = "tests/models/test_hf.py"
VOCAB, WIDTH, LAYERS, HEADS, FF = 1000, 64, 2, 4, 128


def _text(build: str) -> Case:
    """``tests/models/test_hf.py``'s ``build()`` model (seeded) on input_ids / attention_mask."""
    module = load_source(_HF)
    torch.manual_seed(0)
    model, _ = getattr(module, build)()
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (2, 9), generator=gen)
    mask = torch.ones(2, 9, dtype=torch.int64)
    mask[1, 6:] = 0  # right padding on the second sequence
    seq = Dim("seq", max=128)  # position embeddings cover 128 positions
    dims = {"input_ids": {0: "batch", 1: seq}, "attention_mask": {0: "batch", 1: seq}}
    other_mask = torch.ones(3, 17, dtype=torch.int64)
    other_mask[0, 11:] = 0
    others = [(torch.randint(0, VOCAB, (3, 17), generator=gen), other_mask)]
    return Case(model.eval(), (ids, mask), dims, others)


def bert() -> Case:
    """Tiny BertModel (2 layers, width 64) on input_ids / attention_mask, last_hidden_state."""
    return _text("_bert")


def gpt2() -> Case:
    """Tiny GPT2LMHeadModel (2 layers, width 64), logits."""
    return _text("_gpt2")


def llama() -> Case:
    """Tiny LlamaForCausalLM (2 layers, grouped-query heads), logits."""
    return _text("_llama")


class LastHidden(torch.nn.Module):
    """A Hugging Face vision/audio encoder called with one keyword input, returning last_hidden_state."""

    def __init__(self, model: torch.nn.Module, input_name: str):
        super().__init__()
        self.model, self.input_name = model, input_name

    def forward(self, x):
        return self.model(**{self.input_name: x}).last_hidden_state


def vit() -> Case:
    """Tiny ViTModel (32x32 images, 8x8 patches, width 64), dynamic batch (as tests/models/test_hf.py)."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=WIDTH,
                                 num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=FF)
    model = LastHidden(transformers.ViTModel(cfg, add_pooling_layer=False), "pixel_values").eval()
    return Case(model, (torch.randn(2, 3, 32, 32),), {"x": {0: "batch"}})


def whisper_encoder() -> Case:
    """Tiny WhisperEncoder (80 mel bins, 64 frames, width 64); only the batch is dynamic, Whisper
    requires exactly 2 * max_source_positions frames (as tests/models/test_hf.py)."""
    import transformers
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    torch.manual_seed(0)
    cfg = transformers.WhisperConfig(vocab_size=VOCAB, num_mel_bins=80, encoder_layers=LAYERS,
                                     encoder_attention_heads=HEADS, decoder_layers=LAYERS,
                                     decoder_attention_heads=HEADS, d_model=WIDTH,
                                     encoder_ffn_dim=FF, decoder_ffn_dim=FF, max_source_positions=32,
                                     max_target_positions=64, pad_token_id=0, bos_token_id=0, eos_token_id=0,
                                     decoder_start_token_id=0)
    model = LastHidden(WhisperEncoder(cfg), "input_features").eval()
    return Case(model, (torch.randn(2, 80, 64),), {"x": {0: "batch"}})


# ------------------------------------------------------------------------------------ third-party packages
def i6_conformer() -> Case:
    """i6-models ConformerEncoderV1 with its VGG4LayerActFrontendV1 (tests/models/test_i6.py's
    build_conformer: 2 layers, width 64), features [batch, time, 80] and a sequence mask; time is
    not a multiple of 4."""
    module = load_source("tests/models/test_i6.py")
    gen = torch.Generator().manual_seed(1)

    def inputs(lengths, time):
        return (torch.randn(len(lengths), time, 80, generator=gen),
                torch.arange(time)[None] < torch.tensor(lengths)[:, None])

    return Case(module.build_conformer(), inputs([37, 20], 37),
                {"data_tensor": {0: "batch", 1: "time"}, "sequence_mask": {0: "batch", 1: "time"}},
                [inputs([50, 31, 7], 50), inputs([250], 250)])


from models_third_party import THIRD_PARTY  # noqa: E402  (torchvision, transformers' newer models)

MODELS: dict[str, Callable[[], Case]] = {
    # core
    "mlp": mlp,
    "small_cnn": small_cnn,
    "resnet_same_cnn": resnet_same_cnn,
    "transformer_encoder": transformer_encoder,
    # control flow
    "scan_cdist": scan_cdist,
    "loop_cdist": loop_cdist,
    "scan_decoder": scan_decoder,
    "cond": cond,
    "cond_in_scan": cond_in_scan,
    "while_loop": while_loop,
    # model zoo
    "conformer": conformer,
    "lstm_tagger": lstm_tagger,
    "gru_tagger": gru_tagger,
    "lstm_tagger_state": lstm_tagger_state,
    "gru_tagger_state": gru_tagger_state,
    "lstm_packed_tagger": lstm_packed_tagger,
    "gru_packed_tagger": gru_packed_tagger,
    "unet": unet,
    "vit": vit,
    "whisper_encoder": whisper_encoder,
    "bert": bert,
    "gpt2": gpt2,
    "llama": llama,
    # third-party packages
    "i6_conformer": i6_conformer,
    **THIRD_PARTY,
}
