"""U-Net-style CNN: transposed convs, nearest and bilinear upsampling, group norm, concatenated
skips, reflect and replicate padding; dynamic batch, height and width (multiples of 4)."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim

from exportcheck import check_export, count_ops


class ConvBlock(nn.Module):
    """pad (reflect or replicate) -> 3x3 valid conv -> group norm -> ReLU."""

    def __init__(self, cin: int, cout: int, pad_mode: str, groups: int = 2):
        super().__init__()
        self.pad_mode = pad_mode
        self.conv = nn.Conv2d(cin, cout, 3)
        self.norm = nn.GroupNorm(groups, cout)

    def forward(self, x):
        return torch.relu(self.norm(self.conv(F.pad(x, (1, 1, 1, 1), mode=self.pad_mode))))


class UNet(nn.Module):
    def __init__(self, cin: int = 3, base: int = 8, classes: int = 4):
        super().__init__()
        self.enc1 = ConvBlock(cin, base, "reflect")
        self.enc2 = ConvBlock(base, 2 * base, "replicate")
        self.down2 = nn.Conv2d(2 * base, 2 * base, 2, stride=2)
        self.mid = ConvBlock(2 * base, 4 * base, "reflect", groups=4)
        self.up2 = nn.ConvTranspose2d(4 * base, 2 * base, 2, stride=2)
        self.dec2 = ConvBlock(4 * base, 2 * base, "replicate")
        self.dec1 = ConvBlock(3 * base, base, "reflect")
        self.head = nn.Conv2d(base, classes, 1)
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.GroupNorm):
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.normal_(0.0, 0.3)

    def forward(self, x):
        e1 = self.enc1(x)  # [N, 8, H, W]
        e2 = self.enc2(F.max_pool2d(e1, 2))  # [N, 16, H/2, W/2]
        m = self.mid(self.down2(e2))  # [N, 32, H/4, W/4]
        d2 = self.dec2(torch.cat([self.up2(m), e2], dim=1))  # transposed conv back to H/2
        up = F.interpolate(d2, scale_factor=2, mode="nearest")  # H
        d1 = self.dec1(torch.cat([up, e1], dim=1))
        logits = self.head(d1)
        coarse = F.interpolate(m, size=x.shape[-2:], mode="bilinear", align_corners=False)
        return logits, F.interpolate(logits, scale_factor=2, mode="bilinear", align_corners=True), coarse.mean(1)


def _dynamic():
    h, w = Dim("h", min=2, max=32), Dim("w", min=2, max=32)
    return {"x": {0: Dim("batch", min=1, max=16), 2: 4 * h, 3: 4 * w}}


def test_unet():
    torch.manual_seed(0)
    model = UNet().eval()
    x = torch.randn(2, 3, 16, 12)
    others = [(torch.randn(3, 3, 12, 20),), (torch.randn(1, 3, 24, 8),)]  # (batch, 4*h, 4*w)
    result = check_export(model, (x,), _dynamic(), atol=1e-4, rtol=0.0, inputs=others)
    report = result.validate(inputs=[(torch.randn(4, 3, 8, 36),)], atol=1e-4, rtol=0.0)
    assert report.ok and report.max_abs < 1e-4, report
    assert count_ops(result, "ConvTranspose") == 1
    assert count_ops(result, "Resize") == 3
    modes = sorted(n.attributes["mode"].value for n in result.model.graph if n.op_type == "Pad")
    assert modes == ["edge", "edge", "reflect", "reflect", "reflect"]
    dims = result.model.graph.inputs[0].shape
    assert str(dims[0]) == "batch" and not isinstance(dims[2], int) and not isinstance(dims[3], int)
    assert str(dims[2]).startswith("4*") and str(dims[3]).startswith("4*")
