"""Issue 52's hidden family, a seventh time: idioms the first six families did not use.

Nobody here wrote these before (compare ``variant_family.py``, ``variant_fresh.py``,
``variant_fourth.py``, ``variant_fifth.py``, ``variant_sixth.py``, ``variant_dense.py``). Exported as
``variant_sixth.py`` exports (``input_names``/``output_names``, a dynamic batch axis, TorchScript at
opset 17 and the dynamo exporter, from a batch-2 example). The models: a jet MLP that standardizes
its own input (``register_buffer`` mean and deviation of the training set, ``(x - mu) / sigma``),
``nn.ELU``, a residual block scaled ``x + 0.1 * f(x)``; a jet MLP with the BatchNorm *after* the
activation (``Linear -> ReLU -> BatchNorm1d -> Dropout``, nothing to fold it into before it); a
TC-ResNet with ``nn.GroupNorm`` on (N, C, L), the CIFAR ResNet's "option A" shortcut (a
``LambdaLayer`` of ``F.pad(x[:, :, ::2], (0, 0, p, p))``: a strided slice and zero channels),
``F.leaky_relu(0.1)``, ``nn.AdaptiveMaxPool1d(1)``; a keyword spotter that normalizes each
utterance with ``nn.InstanceNorm1d`` on its input, depthwise-separable dilated ``Conv1d`` blocks,
``nn.Mish`` and ``torch.mean(x, dim=-1, keepdim=True)`` + ``squeeze(-1)``; an x-vector TDNN
(dilated ``Conv1d`` frames with the BatchNorm after the ReLU, statistics pooling
``torch.cat([x.mean(-1), x.std(-1)], 1)``); pix2pix's recursive
``UnetSkipConnectionBlock`` (``Conv2d(k=4, s=2, p=1)``, ``nn.InstanceNorm2d``, ``LeakyReLU(0.2,
True)``, ``ConvTranspose2d(k=4, s=2, p=1)``, ``torch.cat([x, self.model(x)], 1)``, a Tanh output);
a residual U-Net (``x + block(x)`` double convs, ``ConvTranspose2d(k=4, s=2, p=1, bias=False)``,
``F.interpolate(mode='nearest-exact')``, concatenated skips); a U-Net upsampled by
``nn.Upsample(scale_factor=2, mode='bicubic')``; the PyTorch tutorial's encoder
(``emb(x) * math.sqrt(d)``, ``activation=F.gelu`` passed as a function, ``norm_first=True``,
``batch_first=True``, a final norm, ``torch.mean(h, dim=1, keepdim=True).squeeze(1)``); timm's ViT
block (fused ``qkv`` by ``reshape(B, N, 3, H, D).permute(2, 0, 3, 1, 4).unbind(0)``, qk-norm by
``LayerNorm(head_dim)`` on (B, H, N, D), ``F.scaled_dot_product_attention``, ``LayerScale``); a
GhostNet (the ghost module's ``torch.cat([x1, x2], 1)[:, :self.oup]``, a depthwise cheap operation,
an SE by ``F.adaptive_avg_pool2d`` and ``F.relu6(x + 3.) / 6.``, ``nn.Hardswish``); an EfficientNet
style MBConv net with an SE of ``F.adaptive_avg_pool2d(x, 1).flatten(1)``, ``nn.Linear`` layers and
``unsqueeze(-1).unsqueeze(-1)``, ``nn.SiLU`` and ``nn.Hardswish``; and a token-wise MLP that folds
the tokens into the batch (``x.reshape(B * T, F)``, Linears, ``view(B, T, -1)``). Trained a few
epochs on scikit-learn's bundled digits (CPU, one thread)::

    python scripts/variant_seventh.py export --out /tmp/hfam8
    python scripts/variant_seventh.py deploy --out /tmp/hfam8
    python scripts/variant_seventh.py status --out /tmp/hfam8
    python scripts/variant_seventh.py table --out /tmp/hfam8
    python scripts/variant_seventh.py probe --out /tmp/hfam8    # import-only probes of 32 more idioms
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import variant_family as vf  # noqa: E402
import variant_fifth as v5  # noqa: E402
import variant_sixth as v6  # noqa: E402

FORMATS = vf.FORMATS
TWO_WAYS = vf.TWO_WAYS


def _models(torch, nn):
    """name -> (builder, layout, task, epochs); layouts as ``variant_fifth``. A builder (a class or
    function of no arguments) builds the model when ``variant_sixth.export`` calls it, from its own
    seed (``variant_sixth.build``): one model's weights do not depend on the others in this table."""
    F = nn.functional
    from hlsnn.deploy import datasets
    flat = datasets.load("digits", layout="flat").x_train

    # --- jet MLP 1: the input standardized inside the model, ELU, a residual scaled by 0.1
    class JetStd(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mu", torch.from_numpy(flat.mean(0)))
            self.register_buffer("sigma", torch.from_numpy(flat.std(0) + 1e-2))
            self.fc1 = nn.Linear(64, 64)
            self.block = nn.Sequential(nn.Linear(64, 64), nn.ELU(), nn.Linear(64, 64))
            self.fc2 = nn.Linear(64, 32)
            self.out = nn.Linear(32, 10)
            self.act = nn.ELU()

        def forward(self, x):
            x = (x - self.mu) / self.sigma
            h = self.act(self.fc1(x))
            h = self.act(h + 0.1 * self.block(h))
            return self.out(self.act(self.fc2(h)))

    # --- jet MLP 2: BatchNorm after the activation
    def jet_bnafter():
        return nn.Sequential(
            nn.Linear(64, 64), nn.ReLU(), nn.BatchNorm1d(64), nn.Dropout(0.2),
            nn.Linear(64, 32), nn.ReLU(), nn.BatchNorm1d(32), nn.Dropout(0.2),
            nn.Linear(32, 32), nn.ReLU(), nn.BatchNorm1d(32),
            nn.Linear(32, 10))

    # --- TC-ResNet: GroupNorm, option-A shortcut (strided slice + zero channels), AdaptiveMaxPool1d
    class LambdaLayer(nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, x):
            return self.fn(x)

    class BasicBlock1d(nn.Module):
        def __init__(self, c, z, stride):
            super().__init__()
            self.conv1 = nn.Conv1d(c, z, 3, stride=stride, padding=1, bias=False)
            self.gn1 = nn.GroupNorm(4, z)
            self.conv2 = nn.Conv1d(z, z, 3, padding=1, bias=False)
            self.gn2 = nn.GroupNorm(4, z)
            self.shortcut = nn.Identity()
            if stride != 1 or c != z:
                p = (z - c) // 2
                self.shortcut = LambdaLayer(lambda x: F.pad(x[:, :, ::2], (0, 0, p, p), "constant", 0))

        def forward(self, x):
            out = F.leaky_relu(self.gn1(self.conv1(x)), 0.1)
            out = self.gn2(self.conv2(out))
            return F.leaky_relu(out + self.shortcut(x), 0.1)

    class TcOptA(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv1d(8, 16, 3, padding=1, bias=False)
            self.gn = nn.GroupNorm(4, 16)
            self.layer1 = BasicBlock1d(16, 16, 1)
            self.layer2 = BasicBlock1d(16, 32, 2)
            self.pool = nn.AdaptiveMaxPool1d(1)
            self.linear = nn.Linear(32, 10)

        def forward(self, x):
            out = F.leaky_relu(self.gn(self.stem(x)), 0.1)
            out = self.layer2(self.layer1(out))
            return self.linear(torch.flatten(self.pool(out), 1))

    # --- KWS: InstanceNorm1d on the input, depthwise-separable dilated Conv1d, Mish, mean keepdim
    class SepBlock(nn.Module):
        def __init__(self, c, z, dilation):
            super().__init__()
            self.dw = nn.Conv1d(c, c, 3, padding=dilation, dilation=dilation, groups=c, bias=False)
            self.pw = nn.Conv1d(c, z, 1, bias=False)
            self.bn = nn.BatchNorm1d(z)
            self.act = nn.Mish()

        def forward(self, x):
            return self.act(self.bn(self.pw(self.dw(x))))

    class KwsInorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.InstanceNorm1d(8, affine=True)
            self.stem = nn.Conv1d(8, 24, 3, padding=1)
            self.b1, self.b2 = SepBlock(24, 24, 1), SepBlock(24, 24, 2)
            self.b3 = SepBlock(24, 32, 4)
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            x = F.relu(self.stem(self.norm(x)))
            x = x + self.b2(self.b1(x))
            x = self.b3(x)
            return self.fc(torch.mean(x, dim=-1, keepdim=True).squeeze(-1))

    # --- an x-vector TDNN: dilated Conv1d frames, statistics pooling (mean and std over time, concatenated)
    class StatsPool(nn.Module):
        def forward(self, x):
            return torch.cat([x.mean(dim=-1), x.std(dim=-1)], dim=1)

    class XVector(nn.Module):
        def __init__(self):
            super().__init__()
            self.frames = nn.Sequential(
                nn.Conv1d(8, 24, 3, padding=1), nn.ReLU(), nn.BatchNorm1d(24),
                nn.Conv1d(24, 24, 3, padding=2, dilation=2), nn.ReLU(), nn.BatchNorm1d(24),
                nn.Conv1d(24, 32, 1), nn.ReLU(), nn.BatchNorm1d(32))
            self.pool = StatsPool()
            self.segment = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.BatchNorm1d(32), nn.Linear(32, 10))

        def forward(self, x):
            return self.segment(self.pool(self.frames(x)))

    # --- pix2pix's recursive U-Net on (N, 1, 8, 8)
    class UnetSkipConnectionBlock(nn.Module):
        def __init__(self, outer_nc, inner_nc, input_nc=None, submodule=None, outermost=False, innermost=False):
            super().__init__()
            self.outermost = outermost
            input_nc = input_nc or outer_nc
            downconv = nn.Conv2d(input_nc, inner_nc, kernel_size=4, stride=2, padding=1, bias=True)
            downrelu = nn.LeakyReLU(0.2, True)
            downnorm = nn.InstanceNorm2d(inner_nc, affine=False)
            uprelu = nn.ReLU(True)
            upnorm = nn.InstanceNorm2d(outer_nc, affine=False)
            if outermost:
                upconv = nn.ConvTranspose2d(inner_nc * 2, outer_nc, kernel_size=4, stride=2, padding=1)
                model = [downconv, submodule, uprelu, upconv, nn.Tanh()]
            elif innermost:
                upconv = nn.ConvTranspose2d(inner_nc, outer_nc, kernel_size=4, stride=2, padding=1, bias=True)
                model = [downrelu, downconv, uprelu, upconv, upnorm]
            else:
                upconv = nn.ConvTranspose2d(inner_nc * 2, outer_nc, kernel_size=4, stride=2, padding=1, bias=True)
                model = [downrelu, downconv, downnorm, submodule, uprelu, upconv, upnorm]
            self.model = nn.Sequential(*model)

        def forward(self, x):
            if self.outermost:
                return self.model(x)
            return torch.cat([x, self.model(x)], 1)

    def pix2pix():
        inner = UnetSkipConnectionBlock(32, 32, innermost=True)                  # 2 -> 1 -> 2
        mid = UnetSkipConnectionBlock(16, 32, submodule=inner)                   # 4 -> 2 -> 4
        return UnetSkipConnectionBlock(1, 16, input_nc=1, submodule=mid, outermost=True)   # 8 -> 4 -> 8

    # --- a residual U-Net: x + block(x), ConvTranspose2d(k=4, s=2, p=1), nearest-exact, cat skips
    class ResDouble(nn.Module):
        def __init__(self, c, z):
            super().__init__()
            self.proj = nn.Conv2d(c, z, 1, bias=False) if c != z else nn.Identity()
            self.block = nn.Sequential(nn.Conv2d(z, z, 3, padding=1, bias=False), nn.BatchNorm2d(z),
                                       nn.ReLU(inplace=True), nn.Conv2d(z, z, 3, padding=1, bias=False),
                                       nn.BatchNorm2d(z))

        def forward(self, x):
            x = self.proj(x)
            return F.relu(x + self.block(x))

    class ResUNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc1, self.enc2, self.bott = ResDouble(1, 8), ResDouble(8, 16), ResDouble(16, 24)
            self.pool = nn.MaxPool2d(2, 2)
            self.up2 = nn.ConvTranspose2d(24, 16, kernel_size=4, stride=2, padding=1, bias=False)
            self.dec2 = ResDouble(32, 16)
            self.reduce = nn.Conv2d(16, 8, 1)
            self.dec1 = ResDouble(16, 8)
            self.head = nn.Conv2d(8, 1, 1)

        def forward(self, x):
            e1 = self.enc1(x)
            e2 = self.enc2(self.pool(e1))
            b = self.bott(self.pool(e2))
            d2 = self.dec2(torch.cat((self.up2(b), e2), dim=1))
            d1 = F.interpolate(self.reduce(d2), scale_factor=2, mode="nearest-exact")
            return self.head(self.dec1(torch.cat((d1, e1), dim=1)))

    # --- a U-Net upsampled by nn.Upsample(mode='bicubic'), concatenated skips, a Sigmoid-free 1x1 head
    class BicubicUNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.down1 = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True))
            self.down2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16),
                                       nn.ReLU(inplace=True))
            self.up = nn.Upsample(scale_factor=2, mode="bicubic", align_corners=False)
            self.fuse = nn.Sequential(nn.Conv2d(24, 8, 3, padding=1), nn.ReLU(inplace=True))
            self.head = nn.Conv2d(8, 1, kernel_size=1)

        def forward(self, x):
            a = self.down1(x)
            b = self.up(self.down2(a))
            return self.head(self.fuse(torch.cat([a, b], dim=1)))

    # --- the PyTorch tutorial's encoder: * sqrt(d), activation=F.gelu, norm_first, batch_first
    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=64):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            position = torch.arange(max_len).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
            pe = torch.zeros(1, max_len, d_model)
            pe[0, :, 0::2] = torch.sin(position * div_term)
            pe[0, :, 1::2] = torch.cos(position * div_term)
            self.register_buffer("pe", pe)

        def forward(self, x):
            return self.dropout(x + self.pe[:, :x.size(1)])

    class EncTutorial(nn.Module):
        def __init__(self, d_model=16, nhead=4):
            super().__init__()
            self.d_model = d_model
            self.embed = nn.Linear(8, d_model)
            self.pos_encoder = PositionalEncoding(d_model)
            layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=4 * d_model, dropout=0.1,
                                               activation=F.gelu, batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(d_model),
                                                 enable_nested_tensor=False)
            self.decoder = nn.Linear(d_model, 10)

        def forward(self, src):
            src = self.pos_encoder(self.embed(src) * math.sqrt(self.d_model))
            h = self.encoder(src)
            return self.decoder(torch.mean(h, dim=1, keepdim=True).squeeze(1))

    # --- timm's ViT block: fused qkv by unbind(0), qk-norm, F.scaled_dot_product_attention, LayerScale
    class Attention(nn.Module):
        def __init__(self, dim, num_heads=2, qk_norm=True):
            super().__init__()
            self.num_heads = num_heads
            self.head_dim = dim // num_heads
            self.qkv = nn.Linear(dim, dim * 3, bias=True)
            self.q_norm = nn.LayerNorm(self.head_dim) if qk_norm else nn.Identity()
            self.k_norm = nn.LayerNorm(self.head_dim) if qk_norm else nn.Identity()
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            q, k = self.q_norm(q), self.k_norm(k)
            x = F.scaled_dot_product_attention(q, k, v)
            return self.proj(x.transpose(1, 2).reshape(B, N, C))

    class LayerScale(nn.Module):
        def __init__(self, dim, init_values=0.1):
            super().__init__()
            self.gamma = nn.Parameter(init_values * torch.ones(dim))

        def forward(self, x):
            return x * self.gamma

    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.norm1, self.attn, self.ls1 = nn.LayerNorm(dim, eps=1e-6), Attention(dim), LayerScale(dim)
            self.norm2 = nn.LayerNorm(dim, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
            self.ls2 = LayerScale(dim)

        def forward(self, x):
            x = x + self.ls1(self.attn(self.norm1(x)))
            return x + self.ls2(self.mlp(self.norm2(x)))

    class VitTimm(nn.Module):
        def __init__(self, dim=16):
            super().__init__()
            self.patch_embed = nn.Conv2d(1, dim, kernel_size=2, stride=2)
            self.pos_embed = nn.Parameter(torch.randn(1, 16, dim) * 0.02)
            self.blocks = nn.Sequential(Block(dim), Block(dim))
            self.norm = nn.LayerNorm(dim, eps=1e-6)
            self.head = nn.Linear(dim, 10)

        def forward(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2) + self.pos_embed
            x = self.norm(self.blocks(x))
            return self.head(x.mean(dim=1))

    # --- GhostNet: the ghost module's concatenation sliced to oup channels, SE with relu6(x + 3) / 6
    def _make_divisible(v, divisor=4, min_value=None):
        min_value = min_value or divisor
        new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
        if new_v < 0.9 * v:
            new_v += divisor
        return new_v

    def hard_sigmoid(x, inplace: bool = False):
        return F.relu6(x + 3.) / 6.

    class SqueezeExcite(nn.Module):
        def __init__(self, in_chs, se_ratio=0.25):
            super().__init__()
            reduced = _make_divisible(in_chs * se_ratio)
            self.conv_reduce = nn.Conv2d(in_chs, reduced, 1, bias=True)
            self.act1 = nn.ReLU(inplace=True)
            self.conv_expand = nn.Conv2d(reduced, in_chs, 1, bias=True)

        def forward(self, x):
            x_se = F.adaptive_avg_pool2d(x, 1)
            x_se = self.conv_expand(self.act1(self.conv_reduce(x_se)))
            return x * hard_sigmoid(x_se)

    class GhostModule(nn.Module):
        def __init__(self, inp, oup, ratio=2, dw_size=3, relu=True):
            super().__init__()
            self.oup = oup
            init_channels = math.ceil(oup / ratio)
            new_channels = init_channels * (ratio - 1)
            self.primary_conv = nn.Sequential(nn.Conv2d(inp, init_channels, 1, bias=False),
                                              nn.BatchNorm2d(init_channels),
                                              nn.ReLU(inplace=True) if relu else nn.Sequential())
            self.cheap_operation = nn.Sequential(
                nn.Conv2d(init_channels, new_channels, dw_size, 1, dw_size // 2, groups=init_channels, bias=False),
                nn.BatchNorm2d(new_channels), nn.ReLU(inplace=True) if relu else nn.Sequential())

        def forward(self, x):
            x1 = self.primary_conv(x)
            x2 = self.cheap_operation(x1)
            out = torch.cat([x1, x2], dim=1)
            return out[:, :self.oup, :, :]

    class GhostBottleneck(nn.Module):
        def __init__(self, c, mid, z, stride, se):
            super().__init__()
            self.ghost1 = GhostModule(c, mid, relu=True)
            self.stride = stride
            if stride > 1:
                self.conv_dw = nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False)
                self.bn_dw = nn.BatchNorm2d(mid)
            self.se = SqueezeExcite(mid) if se else None
            self.ghost2 = GhostModule(mid, z, relu=False)
            if c == z and stride == 1:
                self.shortcut = nn.Sequential()
            else:
                self.shortcut = nn.Sequential(
                    nn.Conv2d(c, c, 3, stride, 1, groups=c, bias=False), nn.BatchNorm2d(c),
                    nn.Conv2d(c, z, 1, bias=False), nn.BatchNorm2d(z))

        def forward(self, x):
            residual = x
            x = self.ghost1(x)
            if self.stride > 1:
                x = self.bn_dw(self.conv_dw(x))
            if self.se is not None:
                x = self.se(x)
            x = self.ghost2(x)
            return x + self.shortcut(residual)

    class GhostNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv_stem = nn.Conv2d(1, 12, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(12)
            self.act1 = nn.Hardswish(inplace=True)
            self.blocks = nn.Sequential(GhostBottleneck(12, 24, 12, 1, False), GhostBottleneck(12, 36, 20, 2, True),
                                        GhostBottleneck(20, 40, 20, 1, True))
            self.global_pool = nn.AdaptiveAvgPool2d((1, 1))
            self.conv_head = nn.Conv2d(20, 48, 1, bias=True)
            self.act2 = nn.Hardswish(inplace=True)
            self.classifier = nn.Linear(48, 10)

        def forward(self, x):
            x = self.blocks(self.act1(self.bn1(self.conv_stem(x))))
            x = self.act2(self.conv_head(self.global_pool(x)))
            x = x.view(x.size(0), -1)
            return self.classifier(F.dropout(x, p=0.2, training=self.training))

    # --- EfficientNet-style MBConv: SE by adaptive_avg_pool2d(x, 1).flatten(1), Linears, unsqueeze twice
    class SELinear(nn.Module):
        def __init__(self, c, squeeze):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(c, squeeze), nn.Linear(squeeze, c)

        def forward(self, x):
            s = F.adaptive_avg_pool2d(x, 1).flatten(1)
            s = torch.sigmoid(self.fc2(F.silu(self.fc1(s))))
            return x * s.unsqueeze(-1).unsqueeze(-1)

    class MBConv(nn.Module):
        def __init__(self, c, z, expand, stride):
            super().__init__()
            e = c * expand
            self.use_res = stride == 1 and c == z
            self.expand = nn.Sequential(nn.Conv2d(c, e, 1, bias=False), nn.BatchNorm2d(e), nn.SiLU(inplace=True))
            self.dw = nn.Sequential(nn.Conv2d(e, e, 3, stride, 1, groups=e, bias=False), nn.BatchNorm2d(e),
                                    nn.Hardswish(inplace=True))
            self.se = SELinear(e, max(1, c // 4))
            self.project = nn.Sequential(nn.Conv2d(e, z, 1, bias=False), nn.BatchNorm2d(z))

        def forward(self, x):
            h = self.project(self.se(self.dw(self.expand(x))))
            return x + h if self.use_res else h

    class EffNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
            self.layers = nn.Sequential(MBConv(16, 16, 2, 1), MBConv(16, 24, 3, 2), MBConv(24, 24, 3, 1))
            self.head = nn.Sequential(nn.Conv2d(24, 64, 1, bias=False), nn.BatchNorm2d(64), nn.Hardswish())
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            x = self.head(self.layers(self.stem(x)))
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    # --- token-wise: the tokens folded into the batch, Linears, unfolded by view
    class TokFold(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(8, 24), nn.GELU(), nn.Linear(24, 6))

        def forward(self, x):
            B, T, Fe = x.shape
            return self.mlp(x.reshape(B * T, Fe)).view(B, T, -1)

    return {
        "s_jet_std": (JetStd, "flat", "classification", 25),
        "s_jet_bnafter": (jet_bnafter, "flat", "classification", 25),
        "s_tc_opta": (TcOptA, "ncl", "classification", 25),
        "s_kws_inorm": (KwsInorm, "ncl", "classification", 25),
        "s_xvector": (XVector, "ncl", "classification", 25),
        "s_unet_p2p": (pix2pix, "nchw", "dense", 30),
        "s_unet_res": (ResUNet, "nchw", "dense", 25),
        "s_unet_bicubic": (BicubicUNet, "nchw", "dense", 25),
        "s_enc_tut": (EncTutorial, "ntf", "classification", 30),
        "s_vit_timm": (VitTimm, "nchw", "classification", 30),
        "s_ghost": (GhostNet, "nchw", "classification", 25),
        "s_effnet": (EffNet, "nchw", "classification", 25),
        "s_tok_fold": (TokFold, "ntf", "tokens", 0),
    }


def export(out, only=None):
    """Train and export this family both ways (``variant_sixth.export`` with these models)."""
    return v6.export(out, only, _models)


def _probes(torch, nn):
    """Untrained modules for an import-only probe (``probe``): (module, input shape without the batch)."""
    F = nn.functional

    class Fn(nn.Module):
        def __init__(self, fn, *mods):
            super().__init__()
            self.fn, self.mods = fn, nn.ModuleList(mods)

        def forward(self, x):
            return self.fn(x, *self.mods)

    def c(a=2, b=4):
        return nn.Conv2d(a, b, 3, padding=1)

    def c1(a=4, b=4):
        return nn.Conv1d(a, b, 3, padding=1)

    return {
        "up_bicubic": (Fn(lambda x, m: F.interpolate(m(x), scale_factor=2, mode="bicubic"), c()), (2, 4, 4)),
        "up_bicubic_ac": (Fn(lambda x, m: F.interpolate(m(x), scale_factor=2, mode="bicubic", align_corners=True),
                             c()), (2, 4, 4)),
        "up_nearest_exact_2d": (Fn(lambda x, m: F.interpolate(m(x), scale_factor=2, mode="nearest-exact"), c()),
                                (2, 4, 4)),
        "rmsnorm": (nn.Sequential(nn.Linear(8, 8), nn.RMSNorm(8), nn.Linear(8, 4)), (5, 8)),
        "ln_chw": (nn.Sequential(c(), nn.LayerNorm([4, 4, 4]), nn.Conv2d(4, 2, 1)), (2, 4, 4)),
        "gn1": (nn.Sequential(c(), nn.GroupNorm(1, 4), nn.ReLU(), nn.Conv2d(4, 2, 1)), (2, 4, 4)),
        "ct_groups": (nn.Sequential(c(), nn.ConvTranspose2d(4, 4, 4, 2, 1, groups=4)), (2, 4, 4)),
        "ct_dil": (nn.Sequential(c(), nn.ConvTranspose2d(4, 2, 3, stride=2, padding=2, dilation=2, output_padding=1)),
                   (2, 4, 4)),
        "circular": (nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, padding_mode="circular"), nn.ReLU()), (2, 4, 4)),
        "pool_none1": (nn.Sequential(c(), nn.AdaptiveAvgPool2d((None, 1)), nn.Flatten(), nn.Linear(16, 3)), (2, 4, 4)),
        "stats_pool": (Fn(lambda x, m, l: l(torch.cat([m(x).mean(-1), m(x).std(-1)], 1)), c1(), nn.Linear(8, 3)),
                       (4, 6)),
        "where_leaky": (Fn(lambda x, m: torch.where(m(x) > 0, m(x), 0.1 * m(x)), c()), (2, 4, 4)),
        "clamp_min": (Fn(lambda x, m: m(x).clamp(min=0), c()), (2, 4, 4)),
        "max_leaky": (Fn(lambda x, m: torch.maximum(m(x), 0.2 * m(x)), c()), (2, 4, 4)),
        "mish_hand": (Fn(lambda x, m: m(x) * torch.tanh(F.softplus(m(x))), c()), (2, 4, 4)),
        "gelu_erf_hand": (Fn(lambda x, m: 0.5 * m(x) * (1 + torch.erf(m(x) / 1.4142135)), nn.Linear(8, 8)), (8,)),
        "same_even_1d": (nn.Sequential(nn.Conv1d(4, 4, 4, padding="same"), nn.ReLU()), (4, 8)),
        "up_size": (Fn(lambda x, m: F.interpolate(m(x), size=(8, 8), mode="bilinear"), c()), (2, 4, 4)),
        "ct1d_op": (nn.Sequential(c1(), nn.ConvTranspose1d(4, 2, 3, stride=2, padding=1, output_padding=1)), (4, 6)),
        "softmax_ch": (Fn(lambda x, m: F.softmax(m(x), dim=1), c()), (2, 4, 4)),
        "dropout2d": (nn.Sequential(c(), nn.Dropout2d(0.2), nn.ReLU()), (2, 4, 4)),
        "flatten_mean_hw": (Fn(lambda x, m: m(x).flatten(2).mean(-1), c()), (2, 4, 4)),
        "amax_hw": (Fn(lambda x, m: torch.amax(m(x), dim=(2, 3)), c()), (2, 4, 4)),
        "mha_nobias": (Fn(lambda x, a: a(x, x, x, need_weights=False)[0],
                          nn.MultiheadAttention(8, 2, batch_first=True, bias=False)), (5, 8)),
        "unflatten_in": (nn.Sequential(nn.Unflatten(1, (8, 8)), nn.Conv1d(8, 8, 3, padding=1), nn.ReLU(),
                                       nn.Flatten(), nn.Linear(64, 3)), (64,)),
        "unfold_patch": (Fn(lambda x, l: l(x.unfold(2, 2, 2).unfold(3, 2, 2).reshape(x.size(0), 2, 4, 4, 4)
                                           .permute(0, 2, 3, 1, 4).reshape(x.size(0), 16, 8)), nn.Linear(8, 4)),
                         (2, 8, 8)),
        "flatten01": (Fn(lambda x, l: l(torch.flatten(x, 0, 1)).view(x.size(0), x.size(1), -1), nn.Linear(8, 4)),
                      (5, 8)),
        "merge_heads": (Fn(lambda x, l: l(x).view(x.size(0), 5, 2, 4).transpose(1, 2).contiguous()
                           .view(x.size(0), -1, 8), nn.Linear(8, 8)), (5, 8)),
        "resize_conv": (nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.Upsample(scale_factor=2), nn.ReflectionPad2d(1),
                                      nn.Conv2d(4, 2, 3)), (2, 4, 4)),
        "zeropad_asym": (nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(2, 4, 2, stride=2), nn.ReLU()), (2, 4, 4)),
        "tok_max": (Fn(lambda x, l: l(x).max(dim=1).values, nn.Linear(8, 4)), (5, 8)),
        "celu": (nn.Sequential(nn.Linear(8, 8), nn.CELU(), nn.Linear(8, 3)), (8,)),
    }


def probe(out):
    """``variant_family.probe`` of this family's probes, exported with a dynamic batch (two
    samples, as ``export``)."""
    return vf.probe(out, _probes, v5._export, 2)


def main(argv=None):
    return v5.run_steps(argv, __doc__, "/tmp/hfam8", export, {"probe": lambda out: probe(out / "probe")})


if __name__ == "__main__":
    sys.exit(main())
