"""Issue 52's hidden family played by someone who did not write ``variant_family.py``.

The same six kinds (jet MLP, 1-D TC-ResNet, U-Nets, tiny encoder, depthwise CNN with SE, token-wise
Linear) written the way another person would: ``ConvTranspose1d`` and 1-D ``nn.Upsample`` (nearest,
linear), dilated grouped ``Conv1d``, ``norm_first`` / ``batch_first=False`` / gelu encoders,
``nn.MultiheadAttention`` with a class token, attention by hand with ``einsum`` / ``bmm``, CBAM
channel attention (avg + max pooled, one shared MLP), Hardsigmoid / SiLU gating, depthwise-separable
blocks with stride 2 and ``padding='same'``, BatchNorm1d + Dropout + LeakyReLU MLPs, concatenating
U-Nets with ``F.interpolate(mode='bilinear')``, ``torch.flatten`` / ``reshape`` / ``view``,
``x.mean(dim=-1)``, ``F.adaptive_avg_pool1d``, a weight ``nn.Parameter`` used by ``x @ w``.

It reuses ``variant_family.py``'s steps with its own models (and the same MANIFEST layout)::

    python scripts/variant_fresh.py export --out /tmp/hfam
    python scripts/variant_fresh.py deploy --out /tmp/hfam
    python scripts/variant_fresh.py status --out /tmp/hfam    # hlsnn compile + one network start?
    python scripts/variant_fresh.py table --out /tmp/hfam
    python scripts/variant_fresh.py keep --out /tmp/hfam --only f_tc_dil    # into tests/data (v_ prefix)
    python scripts/variant_fresh.py probe --out /tmp/hfam                   # import-only probes
    python scripts/variant_fresh.py keep-probes --out /tmp/hfam --only einsum_mh   # p_f_ prefix
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import variant_family as vf  # noqa: E402


def cbam_parts(torch, nn):
    """``(ChanAtt, sep)``: CBAM's channel attention and the depthwise-separable block of ``f_dw_cbam``
    (``scripts/cbam_spatial.py`` builds its full CBAM on them)."""
    F = nn.functional

    class ChanAtt(nn.Module):           # CBAM channel attention with 1x1 convs: avg + max pooled, shared MLP
        def __init__(self, c, r):
            super().__init__()
            self.mlp = nn.Sequential(nn.Conv2d(c, r, 1, bias=False), nn.ReLU(), nn.Conv2d(r, c, 1, bias=False))

        def forward(self, x):
            a = self.mlp(F.adaptive_avg_pool2d(x, 1)) + self.mlp(F.adaptive_max_pool2d(x, 1))
            return x * torch.sigmoid(a)

    def sep(c, z, stride):              # depthwise-separable: 'same' when stride 1, padding 1 when 2
        pad = "same" if stride == 1 else 1
        return nn.Sequential(nn.Conv2d(c, c, 3, stride, pad, groups=c, bias=False), nn.BatchNorm2d(c), nn.Hardswish(),
                             nn.Conv2d(c, z, 1, bias=False), nn.BatchNorm2d(z), nn.Hardswish())

    return ChanAtt, sep


def _models(torch, nn):
    F = nn.functional

    # --- jet MLPs
    class JetFlat(nn.Module):           # an image in, torch.flatten(start_dim=1), BN + LeakyReLU + Dropout
        def __init__(self):
            super().__init__()
            blocks = []
            for a, b in ((64, 64), (64, 32), (32, 32)):
                blocks += [nn.Linear(a, b, bias=False), nn.BatchNorm1d(b), nn.LeakyReLU(), nn.Dropout(0.25)]
            self.body, self.out = nn.Sequential(*blocks), nn.Linear(32, 10)

        def forward(self, x):
            return F.softmax(self.out(self.body(torch.flatten(x, start_dim=1))), dim=-1)

    jet_silu = nn.Sequential(nn.Linear(64, 48), nn.SiLU(), nn.Linear(48, 24), nn.Hardswish(), nn.Linear(24, 10))

    # --- 1-D TC-ResNets on (N, 8, 8)
    class TcDil(nn.Module):             # dilation 2, groups, adaptive_avg_pool1d then reshape
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv1d(8, 16, 3, padding=1)
            self.b1 = nn.Sequential(nn.Conv1d(16, 16, 3, padding=2, dilation=2, groups=4), nn.BatchNorm1d(16),
                                    nn.ReLU(), nn.Conv1d(16, 16, 1), nn.BatchNorm1d(16))
            self.b2 = nn.Sequential(nn.Conv1d(16, 24, 3, stride=2, padding=1, groups=8), nn.BatchNorm1d(24),
                                    nn.ReLU())
            self.fc = nn.Linear(24, 10)

        def forward(self, x):
            h = F.relu(self.stem(x))
            h = F.relu(h + self.b1(h))
            h = F.adaptive_avg_pool1d(self.b2(h), 1)
            return self.fc(h.reshape(h.shape[0], -1))

    class Cbam1d(nn.Module):            # channel attention: avg + max pooled through one shared MLP
        def __init__(self, c, r):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(c, r), nn.ReLU(), nn.Linear(r, c))

        def forward(self, x):
            a = self.mlp(x.mean(dim=-1)) + self.mlp(x.amax(dim=-1))
            return x * torch.sigmoid(a).unsqueeze(-1)

    class TcCbam(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Sequential(nn.Conv1d(8, 16, 5, padding="same", bias=False), nn.BatchNorm1d(16), nn.ReLU())
            self.att = Cbam1d(16, 4)
            self.c2 = nn.Sequential(nn.Conv1d(16, 16, 3, padding="same", dilation=2), nn.ReLU())
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            h = self.c2(self.att(self.c1(x)))
            return self.fc(h.mean(dim=-1))

    # --- 1-D autoencoders (dense) on (N, 8, 8): ConvTranspose1d, Upsample linear / nearest
    class Ae1d(nn.Module):
        def __init__(self, up):
            super().__init__()
            self.down = nn.Sequential(nn.Conv1d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool1d(2),
                                      nn.Conv1d(16, 16, 3, padding=1), nn.ReLU())
            if up == "ct":
                self.up = nn.ConvTranspose1d(16, 16, 4, stride=2, padding=1)
            else:
                self.up = nn.Sequential(nn.Upsample(scale_factor=2, mode=up), nn.Conv1d(16, 16, 3, padding=1))
            self.dec = nn.Conv1d(24, 8, 3, padding=1)

        def forward(self, x):
            return self.dec(torch.cat([F.relu(self.up(self.down(x))), x], dim=1))

    # --- U-Nets on (N, 1, 8, 8)
    def dconv(c, z):
        return nn.Sequential(nn.Conv2d(c, z, 3, padding="same", bias=False), nn.BatchNorm2d(z), nn.ReLU(inplace=True),
                             nn.Conv2d(z, z, 3, padding="same", bias=False), nn.BatchNorm2d(z), nn.ReLU(inplace=True))

    class UNetBil(nn.Module):           # the milesial U-Net: F.interpolate bilinear, cat([skip, up])
        def __init__(self):
            super().__init__()
            self.inc, self.d1, self.d2 = dconv(1, 8), dconv(8, 16), dconv(16, 16)
            self.u1, self.u2 = dconv(32, 8), dconv(16, 8)
            self.outc = nn.Conv2d(8, 1, kernel_size=1)

        def forward(self, x):
            x1 = self.inc(x)
            x2 = self.d1(F.max_pool2d(x1, 2))
            x3 = self.d2(F.max_pool2d(x2, 2))
            y = F.interpolate(x3, scale_factor=2, mode="bilinear", align_corners=False)
            y = self.u1(torch.cat([x2, y], dim=1))
            y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
            return self.outc(self.u2(torch.cat([x1, y], dim=1)))

    class UNetAdd(nn.Module):           # ConvTranspose2d(k=3, s=2, p=1, op=1), additive skips, LeakyReLU, sigmoid
        def __init__(self):
            super().__init__()
            self.e1 = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.LeakyReLU(0.2))
            self.e2 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.LeakyReLU(0.2))
            self.e3 = nn.Sequential(nn.Conv2d(16, 16, 3, stride=2, padding=1), nn.LeakyReLU(0.2))
            self.up3 = nn.ConvTranspose2d(16, 16, 3, stride=2, padding=1, output_padding=1)
            self.up2 = nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1)
            self.out = nn.Conv2d(8, 1, 3, padding=1)

        def forward(self, x):
            a = self.e1(x)
            b = self.e2(a)
            c = self.e3(b)
            d = F.leaky_relu(self.up3(c) + b, 0.2)
            e = F.leaky_relu(self.up2(d) + a, 0.2)
            return torch.sigmoid(self.out(e))

    class UNetReflect(nn.Module):       # padding_mode='reflect' / 'replicate' (an image-restoration habit)
        def __init__(self):
            super().__init__()
            self.e1 = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, padding_mode="reflect"), nn.ReLU())
            self.e2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1, padding_mode="replicate"),
                                    nn.ReLU())
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.d = nn.Sequential(nn.Conv2d(24, 8, 3, padding=1, padding_mode="reflect"), nn.ReLU(),
                                   nn.Conv2d(8, 1, 1))

        def forward(self, x):
            a = self.e1(x)
            return self.d(torch.cat([self.up(self.e2(a)), a], 1))

    # --- tiny encoders on (N, T=8, F=8)
    class EncNF(nn.Module):             # norm_first, batch_first=False, gelu; mean pooling over the tokens
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(8, 16)
            self.pos = nn.Parameter(torch.zeros(8, 1, 16))
            self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, activation="gelu", norm_first=True)
            self.norm = nn.LayerNorm(16)
            self.head = nn.Linear(16, 10)

        def forward(self, x):
            h = self.proj(x).transpose(0, 1) + self.pos       # (T, N, E)
            h = self.norm(self.layer(h))
            return self.head(h.mean(dim=0))

    class MhaCls(nn.Module):            # nn.MultiheadAttention (batch_first) with a learned class token
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(8, 16)
            self.cls = nn.Parameter(torch.randn(1, 1, 16) * 0.02)
            self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
            self.ln1, self.ln2 = nn.LayerNorm(16), nn.LayerNorm(16)
            self.ff = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
            self.head = nn.Linear(16, 10)

        def forward(self, x):
            h = self.proj(x)
            h = torch.cat([self.cls.expand(h.shape[0], 1, 16), h], dim=1)
            a, _ = self.attn(h, h, h, need_weights=False)
            h = self.ln1(h + a)
            h = self.ln2(h + self.ff(h))
            return self.head(h[:, 0, :])

    class HandAttn(nn.Module):          # single-head attention written with einsum and bmm
        def __init__(self, use_einsum):
            super().__init__()
            self.q, self.k, self.v = nn.Linear(8, 16), nn.Linear(8, 16), nn.Linear(8, 16)
            self.ln = nn.LayerNorm(16)
            self.head = nn.Linear(16 * 8, 10)
            self.use_einsum = use_einsum

        def forward(self, x):
            q, k, v = self.q(x), self.k(x), self.v(x)
            if self.use_einsum:
                s = torch.einsum("btd,bsd->bts", q, k) / 4.0
                h = torch.einsum("bts,bsd->btd", s.softmax(dim=-1), v)
            else:
                s = torch.bmm(q, k.transpose(1, 2)) * (16 ** -0.5)
                h = torch.bmm(F.softmax(s, dim=-1), v)
            h = self.ln(h + q)
            return self.head(h.flatten(1))

    # --- depthwise CNNs on (N, 1, 8, 8)
    ChanAtt, sep = cbam_parts(torch, nn)

    class DwCbam(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.Hardswish())
            self.s1, self.s2, self.s3 = sep(8, 16, 2), sep(16, 16, 1), sep(16, 24, 2)
            self.att = ChanAtt(16, 4)
            self.fc = nn.Linear(24, 10)

        def forward(self, x):
            h = self.s3(self.att(self.s2(self.s1(self.stem(x)))))
            return self.fc(h.mean([2, 3]))

    class DwGate(nn.Module):            # Hardsigmoid SE on a view, SiLU gate x * sigmoid(conv(x)), x.view flatten
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.SiLU())
            self.dw = nn.Conv2d(16, 16, 3, padding="same", groups=16)
            self.se1, self.se2 = nn.Linear(16, 4), nn.Linear(4, 16)
            self.gate = nn.Conv2d(16, 16, 1)
            self.pw = nn.Conv2d(16, 8, 1)
            self.fc = nn.Linear(8 * 4 * 4, 10)

        def forward(self, x):
            h = F.hardswish(self.dw(self.stem(x)))
            n, c = h.shape[0], h.shape[1]
            s = F.hardsigmoid(self.se2(F.relu(self.se1(h.mean(dim=(2, 3))))))
            h = h * s.view(n, c, 1, 1)
            h = h * torch.sigmoid(self.gate(h))
            h = self.pw(h)
            return self.fc(h.view(n, -1))

    # --- token-wise models on (N, T=8, F=8)
    class TokParam(nn.Module):          # a weight Parameter used by x @ w, LayerNorm over the last dim
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(8, 12) * 0.3)
            self.b = nn.Parameter(torch.zeros(12))
            self.ln = nn.LayerNorm(12)
            self.out = nn.Linear(12, 4)

        def forward(self, x):
            return self.out(F.silu(self.ln(x @ self.w + self.b)))

    class TokConv(nn.Module):           # token-wise through Conv1d(k=1) on the transposed tokens
        def __init__(self):
            super().__init__()
            self.c1, self.c2 = nn.Conv1d(8, 16, 1), nn.Conv1d(16, 6, 1)

        def forward(self, x):
            return self.c2(F.leaky_relu(self.c1(x.permute(0, 2, 1)))).permute(0, 2, 1)

    tok_ln = nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 32), nn.Hardswish(), nn.Dropout(0.1), nn.Linear(32, 8),
                           nn.LayerNorm(8, elementwise_affine=False))

    # --- a second batch
    class Tc2d(nn.Module):              # the original TC-ResNet: (N, T, F) -> (N, F, 1, T), Conv2d (1, k) kernels
        def __init__(self):
            super().__init__()
            self.c0 = nn.Conv2d(8, 16, (1, 3), padding=(0, 1), bias=False)
            self.b1 = nn.Sequential(nn.Conv2d(16, 24, (1, 9), stride=(1, 2), padding=(0, 4), bias=False),
                                    nn.BatchNorm2d(24), nn.ReLU(), nn.Conv2d(24, 24, (1, 9), padding=(0, 4), bias=False),
                                    nn.BatchNorm2d(24))
            self.s1 = nn.Sequential(nn.Conv2d(16, 24, 1, stride=(1, 2), bias=False), nn.BatchNorm2d(24), nn.ReLU())
            self.fc = nn.Conv2d(24, 10, 1)

        def forward(self, x):
            h = self.c0(x.permute(0, 2, 1).unsqueeze(2))
            h = F.relu(self.b1(h) + self.s1(h))
            h = F.avg_pool2d(h, h.shape[2:])
            return self.fc(h).view(x.shape[0], -1)

    class SEkeep(nn.Module):            # SE by x.mean((2, 3), keepdim=True) and 1x1 convs
        def __init__(self, c, r):
            super().__init__()
            self.a, self.b = nn.Conv2d(c, r, 1), nn.Conv2d(r, c, 1)

        def forward(self, x):
            return x * F.hardsigmoid(self.b(F.relu(self.a(x.mean((2, 3), keepdim=True)))))

    dw_avg = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.Hardswish(),
                           nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False), nn.BatchNorm2d(16), nn.ReLU6(),
                           SEkeep(16, 8), nn.Conv2d(16, 24, 1, bias=False), nn.BatchNorm2d(24), nn.Hardswish(),
                           nn.AvgPool2d(2), nn.Conv2d(24, 24, 3, stride=2, padding=1, groups=24), nn.Hardswish(),
                           nn.Flatten(), nn.Dropout(0.2), nn.Linear(24 * 2 * 2, 10))

    class UNetSizeOf(nn.Module):        # F.interpolate(size=skip.shape[-2:]) and ConvTranspose2d k=2
        def __init__(self):
            super().__init__()
            self.e1, self.e2, self.e3 = dconv(1, 8), dconv(8, 16), dconv(16, 16)
            self.t = nn.ConvTranspose2d(16, 16, 2, stride=2)
            self.u2, self.u1 = dconv(32, 8), dconv(16, 8)
            self.out = nn.Conv2d(8, 1, 1)

        def forward(self, x):
            a = self.e1(x)
            b = self.e2(F.max_pool2d(a, 2))
            c = self.e3(F.max_pool2d(b, 2))
            y = self.u2(torch.cat([self.t(c), b], dim=1))
            y = F.interpolate(y, size=a.shape[-2:], mode="nearest")
            return torch.tanh(self.out(self.u1(torch.cat([y, a], dim=1))))

    class EncStack(nn.Module):          # nn.TransformerEncoder, 2 layers norm_first, (T, N, E), final norm, sinusoids
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(8, 16)
            pos = torch.arange(8).unsqueeze(1) / (100 ** (torch.arange(0, 16, 2) / 16))
            self.register_buffer("pe", torch.cat([pos.sin(), pos.cos()], 1).unsqueeze(1))   # (T, 1, E)
            layer = nn.TransformerEncoderLayer(16, 4, 48, dropout=0.1, activation="gelu", norm_first=True)
            self.enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(16), enable_nested_tensor=False)
            self.out = nn.Linear(16, 10)

        def forward(self, x):
            h = self.enc(self.inp(x).transpose(0, 1) + self.pe)
            return self.out(h.mean(0))

    class MlpView(nn.Module):           # x.view(-1, 64), BN + ReLU + Dropout, F.log_softmax
        def __init__(self):
            super().__init__()
            self.f = nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3),
                                   nn.Linear(32, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 10))

        def forward(self, x):
            return F.log_softmax(self.f(x.view(-1, 64)), dim=1)

    tok_soft = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 5), nn.Softmax(dim=-1))

    class HSig(nn.Module):              # d-li14's mobilenetv3.pytorch: hard sigmoid / swish by hand
        def __init__(self):
            super().__init__()
            self.relu = nn.ReLU6(inplace=True)

        def forward(self, x):
            return self.relu(x + 3) / 6

    class HSwish(nn.Module):
        def __init__(self):
            super().__init__()
            self.sig = HSig()

        def forward(self, x):
            return x * self.sig(x)

    class SEdl(nn.Module):              # ... and its SE: view(b, c), Linears, view(b, c, 1, 1), expand_as
        def __init__(self, c, r=4):
            super().__init__()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Sequential(nn.Linear(c, c // r), nn.ReLU(inplace=True), nn.Linear(c // r, c), HSig())

        def forward(self, x):
            b, c, _, _ = x.size()
            y = self.fc(self.pool(x).view(b, c)).view(b, c, 1, 1)
            return x * y.expand_as(x)

    class InvDl(nn.Module):
        def __init__(self, c, e, z, stride, se):
            super().__init__()
            self.res = stride == 1 and c == z
            self.conv = nn.Sequential(nn.Conv2d(c, e, 1, bias=False), nn.BatchNorm2d(e), HSwish(),
                                      nn.Conv2d(e, e, 3, stride, 1, groups=e, bias=False), nn.BatchNorm2d(e),
                                      SEdl(e) if se else nn.Identity(), HSwish(),
                                      nn.Conv2d(e, z, 1, bias=False), nn.BatchNorm2d(z))

        def forward(self, x):
            return x + self.conv(x) if self.res else self.conv(x)

    mbv3_dl = nn.Sequential(nn.Conv2d(1, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), HSwish(),
                            InvDl(8, 16, 8, 1, True), InvDl(8, 24, 16, 2, True), InvDl(16, 32, 16, 1, False),
                            nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(16, 32), HSwish(), nn.Dropout(0.2),
                            nn.Linear(32, 10))

    # --- a third batch: milesial's Pytorch-UNet (bilinear align_corners=True, F.pad to the skip's size),
    # a sliced positional table, F.avg_pool1d(x, x.size(-1)).squeeze(-1)
    class DoubleConv(nn.Module):
        def __init__(self, c, z, mid=None):
            super().__init__()
            mid = mid or z
            self.double_conv = nn.Sequential(nn.Conv2d(c, mid, 3, padding=1, bias=False), nn.BatchNorm2d(mid),
                                             nn.ReLU(inplace=True), nn.Conv2d(mid, z, 3, padding=1, bias=False),
                                             nn.BatchNorm2d(z), nn.ReLU(inplace=True))

        def forward(self, x):
            return self.double_conv(x)

    class Up(nn.Module):
        def __init__(self, c, z):
            super().__init__()
            self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
            self.conv = DoubleConv(c, z, c // 2)

        def forward(self, x1, x2):
            x1 = self.up(x1)
            dy, dx = x2.size()[2] - x1.size()[2], x2.size()[3] - x1.size()[3]
            x1 = F.pad(x1, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
            return self.conv(torch.cat([x2, x1], dim=1))

    class Milesial(nn.Module):
        def __init__(self):
            super().__init__()
            self.inc = DoubleConv(1, 8)
            self.down1 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(8, 16))
            self.down2 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(16, 16))
            self.up1, self.up2 = Up(32, 8), Up(16, 8)
            self.outc = nn.Conv2d(8, 1, kernel_size=1)

        def forward(self, x):
            x1 = self.inc(x)
            x2 = self.down1(x1)
            x3 = self.down2(x2)
            return self.outc(self.up2(self.up1(x3, x2), x1))

    class EncSlice(nn.Module):          # self.pos[:, :x.size(1)], batch_first, 2 heads, ReLU, x[:, -1]
        def __init__(self):
            super().__init__()
            self.emb = nn.Linear(8, 16)
            self.pos = nn.Parameter(torch.randn(1, 32, 16) * 0.1)
            self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, 0.1, batch_first=True), 1,
                                             enable_nested_tensor=False)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            h = self.emb(x) + self.pos[:, :x.size(1)]
            return self.fc(self.enc(h)[:, -1])

    class TcPool(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv1d(8, 16, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm1d(16)
            self.c2 = nn.Conv1d(16, 32, 3, stride=2, padding=1, bias=False)
            self.bn2 = nn.BatchNorm1d(32)
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            x = F.relu(self.bn1(self.c1(x)))
            x = F.relu(self.bn2(self.c2(x)))
            return self.fc(F.avg_pool1d(x, x.size(-1)).squeeze(-1))

    return {
        "f_unet_milesial": (Milesial(), "nchw", "dense", 25),
        "f_enc_slice": (EncSlice(), "ntf", "classification", 25),
        "f_tc_pool": (TcPool(), "ncl", "classification", 25),
        "f_mbv3_dl": (mbv3_dl, "nchw", "classification", 25),
        "f_tc_2d": (Tc2d(), "ntf", "classification", 25),
        "f_dw_avg": (dw_avg, "nchw", "classification", 25),
        "f_unet_sizeof": (UNetSizeOf(), "nchw", "dense", 25),
        "f_enc_stack": (EncStack(), "ntf", "classification", 25),
        "f_mlp_view": (MlpView(), "nchw", "classification", 25),
        "f_tok_soft": (tok_soft, "ntf", "tokens", 0),
        "f_jet_flat": (JetFlat(), "nchw", "classification", 25),
        "f_jet_silu": (jet_silu, "flat", "classification", 25),
        "f_tc_dil": (TcDil(), "ncl", "classification", 25),
        "f_tc_cbam": (TcCbam(), "ncl", "classification", 25),
        "f_ae1d_ct": (Ae1d("ct"), "ncl", "dense", 25),
        "f_ae1d_lin": (Ae1d("linear"), "ncl", "dense", 25),
        "f_ae1d_near": (Ae1d("nearest"), "ncl", "dense", 25),
        "f_unet_bil": (UNetBil(), "nchw", "dense", 25),
        "f_unet_add": (UNetAdd(), "nchw", "dense", 25),
        "f_unet_reflect": (UNetReflect(), "nchw", "dense", 25),
        "f_enc_nf": (EncNF(), "ntf", "classification", 25),
        "f_mha_cls": (MhaCls(), "ntf", "classification", 25),
        "f_att_einsum": (HandAttn(True), "ntf", "classification", 25),
        "f_att_bmm": (HandAttn(False), "ntf", "classification", 25),
        "f_dw_cbam": (DwCbam(), "nchw", "classification", 25),
        "f_dw_gate": (DwGate(), "nchw", "classification", 25),
        "f_tok_param": (TokParam(), "ntf", "tokens", 0),
        "f_tok_conv": (TokConv(), "ntf", "tokens", 0),
        "f_tok_ln": (tok_ln, "ntf", "tokens", 0),
    }


def _probes(torch, nn):
    """Untrained modules for an import-only probe (``probe``): (module, input shape without the batch)."""
    F = nn.functional

    class Fn(nn.Module):
        def __init__(self, fn, *mods):
            super().__init__()
            self.fn, self.mods = fn, nn.ModuleList(mods)

        def forward(self, x):
            return self.fn(x, *self.mods)

    lin = nn.Linear(8, 24)

    def mh(x, lin):                     # multi-head attention by hand: reshape, permute, matmul
        n, t, _ = x.shape
        q, k, v = lin(x).reshape(n, t, 3, 2, 4).permute(2, 0, 3, 1, 4)
        s = torch.matmul(q, k.transpose(-2, -1)) / 2.0
        return torch.matmul(s.softmax(-1), v).transpose(1, 2).reshape(n, t, 8)

    def mh_einsum(x, lin):
        n, t, _ = x.shape
        q, k, v = lin(x).reshape(n, t, 3, 2, 4).unbind(2)
        s = torch.einsum("bqhd,bkhd->bhqk", q, k) * 0.5
        return torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v).reshape(n, t, 8)

    w = nn.Parameter(torch.randn(8, 5))
    return {
        "einsum_weight": (Fn(lambda x: torch.einsum("btf,fo->bto", x, w)), (4, 8)),
        "einsum_weight_first": (Fn(lambda x: torch.einsum("of,btf->bto", w.T, x)), (4, 8)),
        "einsum_mh": (Fn(mh_einsum, lin), (4, 8)),
        "matmul_mh": (Fn(mh, lin), (4, 8)),
        "up_linear_ac_1d": (nn.Upsample(scale_factor=2, mode="linear", align_corners=True), (2, 6)),
        "up_linear_s3_1d": (nn.Upsample(scale_factor=3, mode="linear"), (2, 5)),
        "up_linear_size_1d": (nn.Upsample(size=10, mode="linear"), (2, 6)),
        "up_nearest_exact_1d": (nn.Upsample(scale_factor=2, mode="nearest-exact"), (2, 6)),
        "adaptive_avg_1d_4": (nn.AdaptiveAvgPool1d(4), (2, 8)),
        "adaptive_max_2d_1": (nn.AdaptiveMaxPool2d(1), (2, 4, 4)),
        "convt1d_op": (nn.ConvTranspose1d(4, 4, 3, stride=2, padding=1, output_padding=1, groups=2), (4, 5)),
        "conv1d_reflect": (nn.Conv1d(2, 3, 3, padding=1, padding_mode="reflect"), (2, 6)),
        "conv2d_replicate": (nn.Conv2d(2, 3, 3, padding=1, padding_mode="replicate"), (2, 5, 5)),
        "hardtanh": (nn.Sequential(nn.Linear(8, 8), nn.Hardtanh()), (8,)),
        "softplus": (nn.Sequential(nn.Linear(8, 8), nn.Softplus()), (8,)),
        "mish": (nn.Sequential(nn.Linear(8, 8), nn.Mish()), (8,)),
        "tok_max": (Fn(lambda x: x.max(dim=1).values), (4, 8)),
        "tok_sum_div": (Fn(lambda x: x.sum(1) / 4), (4, 8)),
        "tok_cat_last": (Fn(lambda x, l: torch.cat([x, l(x)], dim=-1), nn.Linear(8, 4)), (4, 8)),
        "tok_softmax": (nn.Sequential(nn.Linear(8, 5), nn.Softmax(dim=-1)), (4, 8)),
        "chunk_gate": (Fn(lambda x, l: (lambda a, b: a * torch.sigmoid(b))(*l(x).chunk(2, -1)), nn.Linear(8, 8)),
                       (4, 8)),
        "unflatten": (nn.Sequential(nn.Linear(8, 16), nn.Unflatten(1, (4, 4)), nn.Flatten(), nn.Linear(16, 3)), (8,)),
        "ln_ncl": (Fn(lambda x, ln: ln(x.transpose(1, 2)).transpose(1, 2), nn.LayerNorm(4)), (4, 6)),
        "linear_on_length": (nn.Linear(6, 3), (4, 6)),
        "clamp01": (Fn(lambda x, l: torch.clamp(l(x), 0, 1), nn.Linear(8, 8)), (8,)),
        "hsig_gate_tok": (Fn(lambda x, l: x * F.hardsigmoid(l(x)), nn.Linear(8, 8)), (4, 8)),
        "l2norm": (Fn(lambda x: F.normalize(x, dim=-1)), (4, 8)),
        "squeeze_gap": (Fn(lambda x: F.adaptive_avg_pool2d(x, 1).squeeze(-1).squeeze(-1)), (2, 4, 4)),
        "prelu_conv": (nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.PReLU(4)), (2, 4, 4)),
        "bmm_param": (Fn(lambda x: torch.bmm(x, w.expand(x.shape[0], 8, 5))), (4, 8)),
        "adaptive_avg_2d_2": (nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.AdaptiveAvgPool2d(2)), (2, 8, 8)),
        "adaptive_avg_2d_3": (nn.AdaptiveAvgPool2d(3), (2, 6, 6)),
        "mean_neg_axes": (Fn(lambda x: torch.mean(x, dim=(-2, -1))), (2, 4, 4)),
        "amax_hw": (Fn(lambda x: torch.amax(x, dim=(2, 3))), (2, 4, 4)),
        "silu_by_hand": (Fn(lambda x, c: (lambda y: y * torch.sigmoid(y))(c(x)), nn.Conv2d(2, 4, 3, padding=1)),
                         (2, 4, 4)),
        "hardtanh06": (Fn(lambda x, c: F.hardtanh(c(x), 0.0, 6.0), nn.Conv2d(2, 4, 3, padding=1)), (2, 4, 4)),
        "permute_view": (Fn(lambda x, l: l(x.permute(0, 2, 1).contiguous().view(x.shape[0], -1)), nn.Linear(32, 3)),
                         (8, 4)),
        "softmax_tokens_dim1": (Fn(lambda x: F.softmax(x, dim=1)), (4, 8)),
        "hsig_inplace_mul": (Fn(lambda x, c: (lambda y: y * F.relu6(y + 3.0) * (1.0 / 6.0))(c(x)),
                                nn.Conv2d(2, 4, 3, padding=1)), (2, 4, 4)),
    }


def keep_probes(out, names):
    """Copy probe files (both exports) into tests/data/torch/beyond as ``p_f_<name>_<export>``,
    MANIFEST entries of task ``pattern`` marked ``"fresh": true`` (tests/deploy/test_torch_fresh.py)."""
    import onnx
    import torch
    from torch import nn
    dest = ROOT / "tests" / "data" / "torch" / "beyond"
    manifest = json.loads((dest / "MANIFEST.json").read_text())
    probes = _probes(torch, nn)
    for name in names:
        for variant, kwargs in vf.TWO_WAYS.items():
            src = out / "probe" / f"p_{name}_{variant}.onnx"
            if not src.exists():
                continue
            key = f"p_f_{name}_{variant}"
            m = onnx.load(str(src))                  # the weights inside the file: one small file
            onnx.save(m, str(dest / f"{key}.onnx"))
            manifest["models"][key] = {"export": kwargs, "files": [f"{key}.onnx"], "fresh": True, "task": "pattern",
                                       "input_shape": list(probes[name][1]), "ops": [n.op_type for n in m.graph.node]}
            print("kept", key)
    (dest / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def status(out, only=None):
    """``hlsnn compile`` of each model in each format, then one network start (kernel_network) or
    the reason it cannot: results.json's ``network`` field."""
    from hlsnn.network import artifact
    from hlsnn.network.build import compile_model
    from hlsnn.network.loader import kernel_network
    manifest = json.loads((out / "MANIFEST.json").read_text())
    res_path = out / "results.json"
    results = json.loads(res_path.read_text()) if res_path.exists() else {}
    for key, entry in sorted(manifest["models"].items()):
        if (only and not any(key.startswith(o) for o in only)) or "export_error" in entry:
            continue
        e = dict(entry, task="dense") if entry["task"] == "tokens" else entry
        cfg = vf._config(out, key, e)
        row = results.setdefault(key, {"task": entry["task"]}).setdefault("network", {})
        for fmt in vf.FORMATS:
            o = out / f"{key}-{fmt}.hlsnn"
            try:
                compile_model(str(cfg), fmt, str(o), check_samples=2)
            except Exception as exc:    # noqa: BLE001
                row[fmt] = "COMPILE " + vf._short(exc)
            else:
                try:
                    kernel_network(*artifact.read(str(o)))
                    row[fmt] = "network"
                except Exception as exc:    # noqa: BLE001
                    row[fmt] = "layers: " + str(exc)[:300]
            print(f"{key:22s} {fmt:7s} {row[fmt][:200]}", flush=True)
        res_path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


def table(out):
    results = json.loads((out / "results.json").read_text())
    lines = ["| model | float | bfp8 | two-hot | fixed8 | network (bfp8 / two-hot / fixed8) |", "|---|---|---|---|---|---|"]
    for key, row in sorted(results.items()):
        net = " / ".join(str(row.get("network", {}).get(f, "-"))[:70] for f in vf.FORMATS).replace("|", "/")
        err = next((row[k] for k in ("export_error", "import_error", "deploy_error") if k in row), None)
        if err:
            lines.append(f"| {key} | {err[:120].replace('|', '/')} | | | | {net} |")
            continue
        fl = f"{100 * row['float_accuracy']:.1f}" if row.get("float_accuracy") is not None else row["task"]
        lines.append(f"| {key} | {fl} | " + " | ".join(vf._cell(row, f).replace("|", "/") for f in vf.FORMATS)
                     + f" | {net} |")
    print("\n".join(lines))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("export", "deploy", "status", "table", "keep", "keep-probes", "probe"))
    ap.add_argument("--out", type=Path, default=Path("/tmp/hfam"))
    ap.add_argument("--only", nargs="*", help="these variants (name prefixes) only")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    vf._models, vf._probes = _models, _probes      # variant_family's steps, these models
    if args.step == "export":
        vf.export(args.out, args.only)
    elif args.step == "deploy":
        vf.deploy_all(args.out, args.only)
    elif args.step == "status":
        status(args.out, args.only)
    elif args.step == "probe":
        vf.probe(args.out / "probe")
    elif args.step == "keep-probes":
        keep_probes(args.out, args.only)
    elif args.step == "keep":
        vf.keep(args.out, args.only)
    else:
        table(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
