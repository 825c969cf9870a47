"""A Conformer encoder in pure PyTorch: conv subsampling (two stride-2 convs), macaron feed-forward,
self-attention with a key padding mask from the input lengths, convolution module (depthwise conv
padding="same", batch norm), layer norms. features float[batch, time, 80], lengths int64[batch] ->
logits float[batch, out_time, vocab], out_lengths int64[batch]."""

import torch
from torch import nn

from exportcheck import check_export

FEATS, D_MODEL, HEADS, VOCAB, KERNEL = 80, 64, 4, 32, 7


class FeedForward(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(), nn.Dropout(0.1),
                                 nn.Linear(4 * d, d), nn.Dropout(0.1))

    def forward(self, x):
        return self.net(x)


class ConvModule(nn.Module):
    """LayerNorm, pointwise conv + GLU, depthwise conv (padding="same"), batch norm, SiLU, pointwise."""

    def __init__(self, d: int):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.pointwise1 = nn.Conv1d(d, 2 * d, 1)
        self.depthwise = nn.Conv1d(d, d, KERNEL, groups=d, padding="same")
        self.bn = nn.BatchNorm1d(d)
        self.pointwise2 = nn.Conv1d(d, d, 1)

    def forward(self, x, pad):
        y = self.norm(x).transpose(1, 2)
        y = nn.functional.glu(self.pointwise1(y), dim=1)
        y = y.masked_fill(pad.unsqueeze(1), 0.0)  # padded frames do not leak into the depthwise conv
        y = nn.functional.silu(self.bn(self.depthwise(y)))
        return self.pointwise2(y).transpose(1, 2)


class SelfAttention(nn.Module):
    """Multi-head self-attention with a key padding mask (True = padding), on SDPA.

    (nn.MultiheadAttention's view/contiguity checks make torch.export guard ``min(T', 4*T') == T'``
    on the subsampled length, which it cannot prove for every time size.)
    """

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x, pad):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        keep = ~pad[:, None, None, :]
        y = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class ConformerBlock(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.ff1, self.ff2 = FeedForward(d), FeedForward(d)
        self.attn_norm = nn.LayerNorm(d)
        self.attn = SelfAttention(d, HEADS)
        self.conv = ConvModule(d)
        self.out_norm = nn.LayerNorm(d)

    def forward(self, x, pad):
        x = x + 0.5 * self.ff1(x)
        y = self.attn_norm(x)
        x = x + self.attn(y, pad)
        x = x + self.conv(x, pad)
        x = x + 0.5 * self.ff2(x)
        return self.out_norm(x)


class Conformer(nn.Module):
    def __init__(self, blocks: int = 2):
        super().__init__()
        self.subsample = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.ReLU(),
                                       nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU())
        self.proj = nn.Linear(8 * (FEATS // 4), D_MODEL)
        self.blocks = nn.ModuleList(ConformerBlock(D_MODEL) for _ in range(blocks))
        self.head = nn.Linear(D_MODEL, VOCAB)

    @staticmethod
    def _conv_lengths(n):
        return torch.div(n - 1, 2, rounding_mode="floor") + 1  # kernel 3, stride 2, padding 1

    def forward(self, features, lengths):
        x = self.subsample(features.unsqueeze(1))  # [B, 8, T', F']
        b, c, t, f = x.shape
        x = self.proj(x.permute(0, 2, 1, 3).reshape(b, t, c * f))
        out_lengths = self._conv_lengths(self._conv_lengths(lengths))
        pad = torch.arange(t, device=x.device).unsqueeze(0) >= out_lengths.unsqueeze(1)
        for block in self.blocks:
            x = block(x, pad)
        return torch.log_softmax(self.head(x), dim=-1), out_lengths


def _conformer() -> Conformer:
    torch.manual_seed(0)
    model = Conformer()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm1d):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.2)
                m.running_mean.normal_(0.0, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    return model.eval()


def test_conformer_lengths_and_logits():
    torch.manual_seed(1)
    features = torch.randn(3, 37, FEATS)  # 37 frames: not a multiple of 4
    lengths = torch.tensor([22, 37, 9])  # unsorted, one equal to time
    extra = [(torch.randn(2, 50, FEATS), torch.tensor([50, 31])),
             (torch.randn(4, 23, FEATS), torch.tensor([5, 23, 1, 17]))]
    time = torch.export.Dim("time", min=5)  # the subsampling needs 5 frames
    r = check_export(_conformer(), (features, lengths), {"features": {0: "batch", 1: time}, "lengths": {0: "batch"}},
                     atol=1e-4, rtol=0.0, sizes=[{"batch": 2, "time": 41}, {"batch": 5, "time": 62}], inputs=extra,
                     output_names=["logits", "out_lengths"])
    logits, out_lengths = (v for v in r.model.graph.outputs)
    assert logits.shape[0] == "batch" and logits.shape[2] == VOCAB
    assert out_lengths.dtype.name == "INT64" and [str(d) for d in out_lengths.shape] == ["batch"]
