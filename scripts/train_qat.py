"""Quantization-aware fine-tuning with hlsnn.train on the tiny model shapes of
scripts/export_torch_models.py (digits32, CPU, one thread): float training, then a few epochs
of fine-tuning in a format, then the accuracy three ways on the same test images: the float
model, the prepared model's eval mode (torch) and the exported model deployed on the emu
target (hlsnn's deploy path). Prints one JSON line.

    PYTHONPATH=host python scripts/train_qat.py --model resnet8 --format pot
    PYTHONPATH=host python scripts/train_qat.py --model dscnn --format sparse --sparsity 0.9
    PYTHONPATH=host python scripts/train_qat.py --model mobilenet_relu6 --format fixed --mode dynamic

Formats: pot, twohot (shift8_pynq-z2), sparse (sparse8_pynq-z2: the FLOAT model, BatchNorm live,
pruned to --sparsity by balanced magnitude pruning on a cubic schedule over the first two thirds
of --prune-epochs, every layer alike or with --allocation erk each its own share of the model's
--sparsity, then folded, prepared and fine-tuned with the zeros held), fixed
(sparse8_pynq-z2, int8; with --mode dynamic the radix of every conversion from the current
batch, E1), bfp (bfp8_pynq-z2). Both training phases decay the learning rate on a cosine;
--distill-alpha A (or the older --distill T,ALPHA) adds the float model's softened outputs as a
second target (knowledge distillation, hlsnn.train.distill.phase_loss: (1-A)*CE + A*T^2*KL, the
teacher frozen in eval mode) in pruning, recovery and fine-tuning, or in the phases
--distill-phases names (T: --distill-temperature; --distill-input clean: the teacher sees the
image before the --augment shift); --sgd-momentum M trains pruning and recovery with SGD and
momentum M instead of Adam; --weight-scale channel gives every output channel its own weight scale.
--fold K/N trains on all the digits but fold K of N stratified folds and tests on that fold
(hlsnn.train.data.cross_validation_fold: over K = 0..N-1 every image is a test image once).
--val N holds N training images out (hlsnn.train.data.validation_split, seed --val-seed, 0 by default) and reports
every accuracy on them too (choose settings there, not on the test images); --augment K shifts
each training image by up to K pixels in pruning and fine-tuning (hlsnn.train.data.random_shift;
the float model is trained as without, unless --augment-float; --augment-affine DEG,SCALE rotates and
scales them too, hlsnn.train.data.random_affine); --prune-end ends the pruning schedule earlier, and
--recover-epochs adds float epochs at the full sparsity on a fresh cosine from --recover-lr
(--recover-masks frozen: the masks fixed, hlsnn.train.rewind.FrozenMasks; at the pruning rate,
learning-rate rewinding). --average-from F averages the weights over the last (1-F) of the recovery epochs (stochastic weight
averaging, hlsnn.train.average; the mean pruned again, its BatchNorm statistics recomputed);
--qat-average-from F does the same over the last (1-F) of the fine-tuning epochs: the mean of the latent float weights
(the held zeros stay zero), quantized in eval by the same rules, so the deployment stays bit-exact. --regrow-every N prunes and regrows every N steps once the schedule is
at the target (RigL, hlsnn.train.regrow.RegrowPruner, each unit's zeros kept); --label-smoothing
smooths the labels after the float training. --lane-balance M balances each layer's zeros by
lanes of M multipliers instead of by rows (hlsnn.train.prune: the layer's balanced count, its largest
magnitudes anywhere, no row above that count rounded up to a multiple of M; --row-min N: every row
at least N; --lane-scale folded: weights compared across rows as folding the next BatchNorm scales them);
--depthwise-scale folded compares a depthwise layer's weights across its channels (the layer is balanced as one
unit) as folding the next BatchNorm scales them, not by raw magnitude. scripts/select_on_val.py keeps the best of k runs
on the validation images. --prune-seed P draws the pruning's and the recovery's batches and shifts from seed P
(the float model and the int8 step keep --seed; P = --seed is the run without it): restarts of one float model's
pruning; such a run also reports "train", the pruned float and the fine-tuned model's accuracy and cross-entropy on
the (unshifted) training images, and the deployed accuracy on the validation images at even and odd positions
("deployed_acc_halves"), figures a restart can be chosen on.
When the deployed outputs differ from torch's, the first layer whose outputs differ is named.
--save-pruned PATH writes the model the int8 step starts from (the pruned, recovered/averaged float
model where pruned_float_acc is measured, its accuracies and the options that made it);
--from-pruned PATH runs only the int8 step from it (the same command plus the int8 step's options,
which alone may change): the int8 step draws nothing from the global RNG (its batches and shifts
come from a generator seeded with --seed), so a resumed run gives the uninterrupted run's figures.
"""
from __future__ import annotations

import argparse
import copy
import json
import pathlib
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


#: the accelerator configs --accel may name (configs/accel/*.yaml)
ACCELS = sorted(p.stem for p in (pathlib.Path(__file__).resolve().parent.parent / "configs" / "accel").glob("*.yaml"))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet8", choices=["resnet8", "dscnn", "mobilenet_relu", "mobilenet_relu6",
                                                           "resnet8_mlperf"],
                    help="a tiny model of scripts/export_torch_models.py, or resnet8_mlperf: ResNet-8 at MLPerf "
                         "Tiny's widths (16, 32, 64), configs/models/resnet8_digits32's shape")
    ap.add_argument("--format", default="pot", choices=["pot", "twohot", "sparse", "fixed", "bfp"])
    ap.add_argument("--sparsity", type=float, default=0.75)
    ap.add_argument("--mode", default="static", choices=["static", "dynamic"])
    ap.add_argument("--float-epochs", type=int, default=10)
    ap.add_argument("--qat-epochs", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--qat-lr", type=float, default=1e-3)
    ap.add_argument("--prune-epochs", type=int, default=8, help="sparse: float epochs of gradual pruning")
    ap.add_argument("--prune-lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prune-seed", type=int, default=None, metavar="P",
                    help="sparse: the pruning's and the recovery's batch order and shifts from seed P instead of "
                         "--seed (the float model and the int8 step keep --seed): restarts of one float model's "
                         "pruning; reports the training-image figures a restart can be chosen on (train)")
    ap.add_argument("--weight-scale", choices=["tensor", "channel"], default=None,
                    help="one power-of-two weight scale per tensor or per output channel (every format but bfp)")
    ap.add_argument("--allocation", choices=["uniform", "erk"], default="uniform",
                    help="sparse: every layer at --sparsity, or each its own (hlsnn.train.erk_sparsities: the "
                         "small layers less, the big ones more, the whole model at --sparsity)")
    ap.add_argument("--erk-power", type=float, default=1.0,
                    help="sparse, --allocation erk: bend the rule (0: uniform, 1: ERK; erk_sparsities' power)")
    ap.add_argument("--layer-sparsity", action="append", default=[], metavar="LAYER=S",
                    help="sparse, --allocation erk: this layer (its module name) at S, the rest by the rule")
    ap.add_argument("--lane-balance", type=int, default=0, metavar="M",
                    help="sparse: balance each layer's zeros by lanes of M multipliers instead of by rows "
                         "(BalancedPruner(lanes=M): the layer's count as balanced rows would keep, its largest "
                         "magnitudes anywhere, no row above the balanced count rounded up to a multiple of M; "
                         "8 is sparse8_pynq-z2's network kernel lane); 0: every row the same count")
    ap.add_argument("--kernel-balance", default=None, metavar="P,B,S|ACCEL",
                    help="sparse: prune in the shape the board-sized sparse kernel skips (BalancedPruner(kernel=...), "
                         "hlsnn.train.prune.kernel_mask): per block of P output channels whole columns, the same "
                         "count in each of B banks, a multiple of S there; or an accel config (sparse8net_pynq-z2: "
                         "16,16,2) whose sized kernel gives P, B and S (hlsnn.train.prune.kernel_of)")
    ap.add_argument("--accel", default=None, choices=ACCELS,
                    help="the accelerator config (configs/accel) the model is deployed on; default: by --format "
                         "(shift8_pynq-z2, bfp8_pynq-z2, else sparse8_pynq-z2)")
    ap.add_argument("--row-min", type=int, default=0, metavar="N",
                    help="sparse, --lane-balance: every output channel keeps at least N weights (at most the "
                         "balanced count; BalancedPruner(row_min=N)); 0: a row may keep none")
    ap.add_argument("--lane-scale", choices=["weight", "folded"], default="weight",
                    help="sparse, --lane-balance: compare a conv's weights across rows by magnitude (weight) or "
                         "as folding will scale them, times the next BatchNorm's gamma / sqrt(var + eps) (folded)")
    ap.add_argument("--depthwise-scale", choices=["weight", "folded"], default="weight",
                    help="sparse: compare a depthwise layer's weights (balanced over the layer) across its channels "
                         "by magnitude (weight) or as folding will scale them, times the next BatchNorm's "
                         "gamma / sqrt(var + eps) (folded; BalancedPruner(depthwise_scale=...))")
    ap.add_argument("--distill", default="0", metavar="T,ALPHA",
                    help="knowledge distillation from the float model in pruning, recovery and fine-tuning "
                         "(hlsnn.train.distillation_loss): temperature T, soft-target weight ALPHA; a single "
                         "number is ALPHA at --distill-t")
    ap.add_argument("--distill-t", type=float, default=4.0, help="distillation temperature for --distill ALPHA")
    ap.add_argument("--distill-in", choices=["all", "prune", "finetune"], default="all",
                    help="the phases --distill applies to: pruning and recovery, fine-tuning, or both")
    ap.add_argument("--distill-alpha", type=float, default=None,
                    help="knowledge distillation (hlsnn.train.distill.phase_loss): the soft target's weight "
                         "ALPHA in (1-ALPHA)*CE + ALPHA*T^2*KL(teacher || student); instead of --distill")
    ap.add_argument("--distill-temperature", type=float, default=None, help="the temperature T (default 4)")
    ap.add_argument("--distill-phases", default=None,
                    help="the phases distillation applies to, comma-separated of prune, recover, finetune "
                         "(default all three; overrides --distill-in)")
    ap.add_argument("--distill-input", choices=["same", "clean"], default="same",
                    help="the teacher sees the student's (shifted) image, or the image before --augment's shift")
    ap.add_argument("--sgd-momentum", type=float, default=0.0,
                    help="sparse: SGD with this momentum instead of Adam in pruning and recovery (0: Adam)")
    ap.add_argument("--val", type=int, default=0, help="hold out this many training images for validation")
    ap.add_argument("--fold", default=None, metavar="K/N",
                    help="test on fold K of N stratified folds of all 1797 digits, train on the rest "
                         "(hlsnn.train.data.cross_validation_fold; default: digits32's fixed split)")
    ap.add_argument("--val-seed", type=int, default=0,
                    help="the validation split's seed (a fresh hold-out for a new round; with --val)")
    ap.add_argument("--augment", type=int, default=0,
                    help="random shifts of up to this many pixels in pruning and fine-tuning")
    ap.add_argument("--augment-float", action="store_true", help="the shifts (and --augment-affine) in the float training too")
    ap.add_argument("--weight-decay", type=float, default=0.0,
                    help="sparse: decoupled weight decay in pruning and recovery (AdamW; with --sgd-momentum, "
                         "SGD's weight_decay); 0: none, as in every other phase")
    ap.add_argument("--augment-affine", metavar="DEG,SCALE", default=None,
                    help="with --augment's shifts (in the same phases), each image also rotated by up to DEG "
                         "degrees and scaled by 1 +- SCALE about its centre (hlsnn.train.data.random_affine), "
                         "before its shift; e.g. 10,0.1")
    ap.add_argument("--prune-end", type=float, default=2 / 3,
                    help="sparse: the schedule reaches the target after this fraction of --prune-epochs")
    ap.add_argument("--recover-epochs", type=int, default=0,
                    help="sparse: float epochs at the full sparsity after pruning, a fresh cosine")
    ap.add_argument("--recover-lr", type=float, default=1e-3)
    ap.add_argument("--recover-masks", choices=["magnitude", "frozen"], default="magnitude",
                    help="sparse, --recover-epochs: the masks recomputed by magnitude at every step, or frozen "
                         "(hlsnn.train.rewind.FrozenMasks; with --recover-lr at the pruning rate: learning-rate rewinding)")
    ap.add_argument("--average-from", type=float, default=None, metavar="F",
                    help="sparse, --recover-epochs: the model after the recovery is the mean of its weights at the "
                         "end of every recovery epoch after the first F of them (hlsnn.train.average, stochastic "
                         "weight averaging), pruned again and its BatchNorm statistics recomputed on the training images")
    ap.add_argument("--qat-average-from", type=float, default=None, metavar="F",
                    help="the mean of the latent float weights at the end of every fine-tuning epoch after the first "
                         "F of them (hlsnn.train.average), quantized by the same rules in eval; F in [0, 1)")
    ap.add_argument("--regrow-every", type=int, default=0,
                    help="sparse: prune and regrow (hlsnn.train.regrow.RegrowPruner, RigL) every this many steps "
                         "once the schedule reaches the target, until --regrow-stop; 0: off")
    ap.add_argument("--regrow-alpha", type=float, default=0.3, help="sparse: the first update's drop fraction")
    ap.add_argument("--regrow-stop", type=float, default=0.75,
                    help="sparse: the updates stop after this fraction of --prune-epochs (masks frozen after)")
    ap.add_argument("--label-smoothing", type=float, default=0.0,
                    help="label smoothing of the cross entropy in pruning, recovery and fine-tuning (not the float model)")
    ap.add_argument("--label-smoothing-phases", default="prune,recover,finetune",
                    help="--label-smoothing: the phases it applies to, comma-separated of prune, recover, finetune "
                         "(hlsnn.train.smoothing); plain cross entropy in the others")
    ap.add_argument("--latency", action="store_true", help="modelled latency (always for sparse)")
    ap.add_argument("--save", help="write the prepared, fine-tuned model (torch.save) here, its ONNX export to "
                                   "SAVE.onnx and the deploy config as deployed (hlsnn.train.trained_config: every "
                                   "format's fields written out, model SAVE.onnx) to "
                                   "SAVE.yaml; with --val also SAVE.npz, the config's data: the training images left "
                                   "after the split (its x_train, whose first N the script calibrated on) and the "
                                   "test images")
    ap.add_argument("--qat-radix", choices=["dynamic", "static"], default="dynamic",
                    help="--mode static: the fine-tuning converts every batch at its own radixes (dynamic, "
                         "DETERMINE on the batch) or at the static radixes calibrated before it, as the deployment "
                         "runs (static: hlsnn.train.calibrate(..., in_training=True))")
    ap.add_argument("--qat-recalibrate", type=int, default=0, metavar="N",
                    help="--qat-radix static: calibrate again after every N fine-tuning epochs (0: never; the "
                         "radixes are calibrated once more after the fine-tuning either way)")
    ap.add_argument("--calibration-samples", type=int, default=128, metavar="N",
                    help="calibration images (the first N training images): PTQ, fine-tuning and the deployment "
                         "(its config's calibration: samples)")
    ap.add_argument("--overflow-ratio", type=float, default=0.0, metavar="R",
                    help="DETERMINE's allowed fraction of saturating values (the deploy config's calibration: "
                         "overflow_ratio, and hlsnn.train.prepare's): 0, the largest value sets the radix")
    ap.add_argument("--strided-stats", choices=("all", "kept"), default="all",
                    help="a strided sparse_cluster conv's static output radix from every stride-1 result (all, what "
                         "the statistics unit sees) or from the outputs the stride keeps (kept; --mode static "
                         "only): the deploy config's calibration: strided_stats, and hlsnn.train.prepare's")
    ap.add_argument("--clip-stats", choices=("off", "clipped"), default="off",
                    help="a conv whose output only a ReLU6 reads: its static output radix from its results (off) or "
                         "from its results clipped at 6 (clipped; --mode static only): the deploy config's "
                         "calibration: clip_stats, and hlsnn.train.prepare's")
    ap.add_argument("--fold-constants", action="store_true",
                    help="the int8 step: fold each constant channel (a layer's output channel whose weights are all "
                         "zero, e.g. a depthwise channel pruned away) into the layers that read it, in the float "
                         "model after BatchNorm folding (hlsnn.train.fold_constant_channels: exact in float)")
    ap.add_argument("--save-pruned", metavar="PATH",
                    help="write the model the int8 step starts from (the pruned, recovered/averaged float model, "
                         "BatchNorm live; for a dense format the float model) with its accuracies and this "
                         "command's options here (torch.save), for --from-pruned")
    ap.add_argument("--from-pruned", metavar="PATH",
                    help="start from a --save-pruned checkpoint: no float training or pruning, only the int8 step "
                         "(fold, prepare, hold zeros, PTQ, fine-tuning, calibration, deployment, bit-exact check); "
                         "every option of the phases before it must equal the checkpoint's")
    declare_ranges(ap)
    a = ap.parse_args(argv)
    from hlsnn.train import distill as kd
    try:
        a.distill, a.distill_t, a.kd_phases = kd.resolve(a.distill, a.distill_t, a.distill_in, a.distill_alpha,
                                                         a.distill_temperature, a.distill_phases)
    except ValueError as exc:
        ap.error(str(exc))
    from hlsnn.train.smoothing import PHASES, parse_phases
    try:
        a.ls_phases = parse_phases(a.label_smoothing_phases)
    except ValueError as exc:
        ap.error(str(exc))
    if a.average_from is not None and not (a.format == "sparse" and a.recover_epochs
                                           and 0.0 <= a.average_from < 1.0):
        ap.error(f"--average-from {a.average_from}: a fraction in [0, 1) of the recovery epochs, with "
                 "--format sparse and --recover-epochs N (N > 0)")

    if a.qat_average_from is not None and not (a.qat_epochs > 0 and 0.0 <= a.qat_average_from < 1.0):
        ap.error(f"--qat-average-from {a.qat_average_from}: a fraction in [0, 1) of the fine-tuning epochs, with "
                 "--qat-epochs N (N > 0)")

    if (a.qat_radix == "static" or a.qat_recalibrate) and a.mode != "static":
        ap.error(f"--qat-radix {a.qat_radix} --qat-recalibrate {a.qat_recalibrate}: static radixes in the "
                 "fine-tuning need --mode static")
    if a.qat_recalibrate and a.qat_radix != "static" or a.qat_recalibrate < 0:
        ap.error(f"--qat-recalibrate {a.qat_recalibrate}: a number of epochs >= 0, with --qat-radix static")

    if a.lane_balance and (a.lane_balance < 0 or a.format != "sparse" or a.regrow_every):
        ap.error(f"--lane-balance {a.lane_balance}: a number of multipliers per lane >= 1 (0: balanced rows), with "
                 "--format sparse and without --regrow-every (regrowth keeps each row's count)")
    if a.row_min and (a.row_min < 0 or not a.lane_balance):
        ap.error(f"--row-min {a.row_min}: a number of weights >= 0, with --lane-balance M")
    if a.lane_scale != "weight" and not (a.lane_balance or a.kernel_balance):
        ap.error(f"--lane-scale {a.lane_scale}: with --lane-balance M or --kernel-balance P,B,S")
    if a.kernel_balance and (a.lane_balance or a.row_min):
        ap.error("--kernel-balance: not with --lane-balance or --row-min (a column is pruned across a block's rows)")
    if a.kernel_balance and (a.format != "sparse" or a.regrow_every):
        ap.error(f"--kernel-balance {a.kernel_balance}: with --format sparse and without --regrow-every (regrowth "
                 "keeps each row's count)")
    if a.depthwise_scale != "weight" and (a.format != "sparse" or a.regrow_every):
        ap.error(f"--depthwise-scale {a.depthwise_scale}: with --format sparse and without --regrow-every")
    if a.fold is not None:
        from hlsnn.train.data import parse_fold
        try:
            parse_fold(a.fold)
        except ValueError as exc:
            ap.error(f"--fold: {exc}")
    if a.weight_decay != 0 and not (0 <= a.weight_decay < float("inf") and a.format == "sparse"):
        ap.error(f"--weight-decay {a.weight_decay}: a decay >= 0 (finite), with --format sparse (pruning and recovery)")
    a.affine = None
    if a.augment_affine is not None:
        from hlsnn.train.data import parse_affine
        try:
            a.affine = parse_affine(a.augment_affine)
        except ValueError as exc:
            ap.error(f"--augment-affine: {exc}")
        if a.affine == (0.0, 0.0):
            a.affine = None
    if a.val_seed and not a.val:
        ap.error(f"--val-seed {a.val_seed}: with --val N (the seed of the N images held out)")
    if a.prune_seed is not None and a.format != "sparse":
        ap.error(f"--prune-seed {a.prune_seed}: with --format sparse (it seeds the pruning and the recovery)")
    if a.lane_balance < 0:
        ap.error(f"--lane-balance {a.lane_balance}: a number of multipliers per lane >= 1 (0: balanced rows)")

    import torch
    from torch import nn
    from hlsnn.deploy import datasets
    from hlsnn.train import (BalancedPruner, calibrate, deployed, fold_batchnorm, fold_constant_channels,
                             hold_zeros, prepare)
    from hlsnn.train.prune import parse_kernel

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    ds = datasets.load("digits32")
    from hlsnn.train.data import split_images
    try:
        x_train, y_train, xva, yva, x_test, y_test = split_images(ds, fold=a.fold, val=a.val, val_seed=a.val_seed)
    except ValueError as exc:                  # --val out of range for the training images
        ap.error(f"--val {a.val}: {exc}")
    xtr, ytr = torch.tensor(x_train, dtype=torch.float32), torch.tensor(y_train)
    xte, yte = x_test.astype(np.float64), np.asarray(y_test)
    if a.val:
        xva, yva = xva.astype(np.float64), np.asarray(yva)
    model = _model(nn, a.model)
    t0 = time.time()

    steps_per_epoch = (len(xtr) + 63) // 64

    teacher = None
    kd_seen = [0, 0]                 # training images the teacher saw, of them right (its targets' quality)

    from hlsnn.train.data import random_affine, random_shift
    aug = {"on": False, "phase": None}           # phase: prune, recover, finetune (None: the float model)

    def loss_of(m, idx, gen):
        x = x0 = xtr[idx]
        if aug["on"] and a.affine:
            x = random_affine(x, *a.affine, generator=gen)
        if aug["on"] and a.augment:
            x = random_shift(x, a.augment, gen)
        out = m(x)
        t_out = None
        if teacher is not None and aug["phase"] in a.kd_phases:
            with torch.no_grad():
                t_out = teacher(x0 if a.distill_input == "clean" else x)
            kd_seen[0] += len(idx)
            kd_seen[1] += int((t_out.argmax(1) == ytr[idx]).sum())
        return kd.phase_loss(out, t_out, ytr[idx], aug["phase"], alpha=a.distill, temperature=a.distill_t,
                             kd_phases=a.kd_phases, smoothing=a.label_smoothing, ls_phases=a.ls_phases)

    def fit(m, epochs, lr, step=None, epoch_end=None, seed=None):
        if a.sgd_momentum and aug["phase"] in ("prune", "recover"):
            opt = torch.optim.SGD(m.parameters(), lr=lr, momentum=a.sgd_momentum, weight_decay=a.weight_decay)
        elif a.weight_decay and aug["phase"] in ("prune", "recover"):
            opt = torch.optim.AdamW(m.parameters(), lr=lr, weight_decay=a.weight_decay)
        else:
            opt = torch.optim.Adam(m.parameters(), lr=lr)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(1, epochs * steps_per_epoch))
        gen = torch.Generator().manual_seed(a.seed if seed is None else seed)
        for ep in range(epochs):
            m.train()
            for idx in torch.randperm(len(xtr), generator=gen).split(64):
                opt.zero_grad()
                loss_of(m, idx, gen).backward()
                opt.step()
                sched.step()
                if step:
                    step()
            if epoch_end:
                epoch_end(ep)

    def float_eval(m, val=False):
        m.eval()
        with torch.no_grad():
            return acc(m(torch.tensor(xva if val else xte, dtype=torch.float32)).numpy(), val)

    def acc(out, val=False):
        return float(np.mean(np.argmax(out, 1) == (yva if val else yte)))

    vals = {}

    pre = {}                                   # what the phases before the int8 step report
    if a.from_pruned:
        try:
            ck = torch.load(a.from_pruned, weights_only=False)
            ck["args"], ck["model"]
        except Exception as exc:               # not a torch file, or not a --save-pruned checkpoint
            ap.error(f"--from-pruned {a.from_pruned}: not a checkpoint --save-pruned wrote ({type(exc).__name__}: "
                     f"{(str(exc).splitlines() or [''])[0][:120]})")
        # an option newer than the checkpoint is taken at its default there
        was = {k: ck["args"].get(k, ap.get_default(k)) for k in _pre_int8_args(a)}
        differ = {k: (was[k], v) for k, v in _pre_int8_args(a).items() if was[k] != v}
        if differ:
            ap.error(f"--from-pruned {a.from_pruned}: options of the phases before the int8 step differ from the "
                     "checkpoint's (option: checkpoint, here): "
                     + ", ".join(f"--{k.replace('_', '-')}: {c!r}, {h!r}" for k, (c, h) in sorted(differ.items())))
        model.load_state_dict(ck["model"])
        model.eval()
        if ck.get("teacher") is not None:
            teacher = _model(nn, a.model)
            teacher.load_state_dict(ck["teacher"])
            teacher = kd.frozen_teacher(teacher)
        float_acc, vals, pre, t_float = ck["float_acc"], dict(ck["vals"]), ck["pre"], ck["seconds_float"]
        pruned_float_acc = pre.get("pruned_float_acc")
        kd_seen[:] = pre["kd_seen"]
        aug["on"] = True
        pruner = bool(pre.get("pruned_layers"))
    else:
        aug["on"] = a.augment_float
        fit(model, a.float_epochs, a.lr)
        float_acc = float_eval(model)
        if a.val:
            vals["float_acc"] = float_eval(model, True)
        t_float = time.time() - t0
        aug["on"] = True
        if a.distill:
            teacher = kd.frozen_teacher(model)     # the float model, eval mode, frozen; used in a.kd_phases only
        pruner = pruned_float_acc = None
        if a.format == "sparse":                   # prune the float model, BatchNorm live
            steps = a.prune_epochs * steps_per_epoch
            sparsities = None
            if a.allocation == "erk" and (a.erk_power != 1.0 or a.layer_sparsity):
                from hlsnn.train import erk_sparsities
                named = [(n, m) for n, m in model.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
                fixed = dict(_layer_sparsity_arg(kv) for kv in a.layer_sparsity)
                try:
                    sparsities = erk_sparsities(named, a.sparsity, fixed=fixed, power=a.erk_power)
                except ValueError as exc:          # a --layer-sparsity LAYER not in the model, a target not reached
                    ap.error(f"--layer-sparsity {' '.join(a.layer_sparsity)}: {exc}")
            end = max(1, int(a.prune_end * steps))
            if a.regrow_every:
                from hlsnn.train.regrow import RegrowPruner
                pruner = RegrowPruner(model, a.sparsity, 0, end, allocation=a.allocation, sparsities=sparsities,
                                      stop=int(a.regrow_stop * steps), every_regrow=a.regrow_every,
                                      alpha=a.regrow_alpha)
            else:
                pruner = BalancedPruner(model, a.sparsity, 0, end, allocation=a.allocation, sparsities=sparsities,
                                        lanes=a.lane_balance or None, row_min=a.row_min,
                                        kernel=parse_kernel(a.kernel_balance) if a.kernel_balance else None,
                                        lane_scale=a.lane_scale, depthwise_scale=a.depthwise_scale)
            aug["phase"] = "prune"
            fit(model, a.prune_epochs, a.prune_lr, pruner.step, seed=a.prune_seed)
            frozen = avg = snap = None
            aug["phase"] = "recover"
            if a.average_from is not None:
                from hlsnn.train.average import WeightAverage, update_batchnorm
                avg = WeightAverage(model)
                first = int(a.average_from * a.recover_epochs)      # epochs [first, recover_epochs) are averaged

                def snap(ep):
                    if ep >= first:
                        avg.add()
            if a.recover_epochs and a.recover_masks == "frozen":
                from hlsnn.train.rewind import FrozenMasks
                frozen = FrozenMasks(pruner)
                fit(model, a.recover_epochs, a.recover_lr, frozen.step, snap, seed=a.prune_seed)
            elif a.recover_epochs:
                fit(model, a.recover_epochs, a.recover_lr, pruner.step, snap, seed=a.prune_seed)
            if avg:
                if a.val:
                    model.eval()      # the last recovery epoch's model, before averaging (for comparison)
                    vals["recovered_float_acc"] = float_eval(model, True)
                avg.apply()
            if frozen:
                frozen.step()                      # the masks as frozen, not recomputed
            elif a.regrow_every and pruner.n > pruner.end:
                pruner._hold()                     # the regrown masks as they are
            else:
                pruner.apply(a.sparsity)
            if avg:
                update_batchnorm(model, xtr)       # the averaged, pruned weights' own statistics (unshifted images)
            pruned_float_acc = float_eval(model)
            if a.val:
                vals["pruned_float_acc"] = float_eval(model, True)
            pre = {"pruned_float_acc": pruned_float_acc,
                   "pruned_layers": [(n, zmin, zmax, sp) for n, zmin, zmax, sp in pruner.report()]}
            if a.prune_seed is not None:           # what a restart can be chosen on, without a validation image
                with torch.no_grad():
                    pre["train"] = _train_fit(model(xtr).numpy(), ytr.numpy(), "pruned_float")
            if avg:
                pre["average"] = {"from": a.average_from, "snapshots": avg.count}
            if a.regrow_every:
                pre["regrow"] = {"every": a.regrow_every, "alpha": a.regrow_alpha, "stop": a.regrow_stop,
                                 "updates": pruner.updates, "regrown": pruner.regrown}
        pre["kd_seen"] = list(kd_seen)
        if a.save_pruned:                      # the model the int8 step starts from (--from-pruned)
            torch.save({"model": model.state_dict(), "args": _pre_int8_args(a),
                        "teacher": None if teacher is None else teacher.state_dict(),
                        "float_acc": float_acc, "vals": dict(vals), "pre": pre,
                        "seconds_float": t_float}, a.save_pruned)

    accel = a.accel or {"pot": "shift8_pynq-z2", "twohot": "shift8_pynq-z2",
                        "bfp": "bfp8_pynq-z2"}.get(a.format, "sparse8_pynq-z2")
    tmp = pathlib.Path(tempfile.mkdtemp())
    cfg = tmp / "deploy.yaml"
    if not 0 < a.calibration_samples <= len(xtr):
        ap.error(f"--calibration-samples {a.calibration_samples}: between 1 and the {len(xtr)} training images")
    x_cal = xtr[:a.calibration_samples].double()
    if a.strided_stats == "kept" and a.mode != "static":
        ap.error("--strided-stats kept: with --mode static only (in dynamic mode the statistics unit sees every "
                 "stride-1 result)")
    if a.clip_stats == "clipped" and a.mode != "static":
        ap.error("--clip-stats clipped: with --mode static only (in dynamic mode the statistics unit chooses from "
                 "the layer's results)")
    cfg.write_text(f"name: qat\nmodel: m.onnx\ndata: digits32\n"
                   f"calibration: {{samples: {a.calibration_samples}, mode: {a.mode}, "
                   f"overflow_ratio: {a.overflow_ratio!r}"
                   + (f", strided_stats: {a.strided_stats}" if a.strided_stats != "all" else "")
                   + (f", clip_stats: {a.clip_stats}" if a.clip_stats != "off" else "") + "}\n"
                   f"formats:\n  f:\n    type: {a.format}\n    accel: {accel}\n"
                   + (f"    weight_scale: {a.weight_scale}\n" if a.weight_scale else ""))
    fm = fold_batchnorm(copy.deepcopy(model).eval())
    folded = fold_constant_channels(fm) if a.fold_constants else []   # exact in float
    q = prepare(fm, cfg, overflow_ratio=a.overflow_ratio)
    if pruner:
        hold_zeros(q)                          # the zeros stay zero through the fine-tuning
    q.eval().double()
    with torch.no_grad():                                     # before fine-tuning (post-training quantization)
        if a.mode == "static":
            calibrate(q, x_cal)
        ptq_acc = acc(q(torch.tensor(xte)).numpy())
        if a.val:
            vals["ptq_acc"] = acc(q(torch.tensor(xva)).numpy(), True)
    q.float()
    # the fine-tuning's radixes: each batch's own (dynamic), or the static ones it deploys with
    calibrate(q, x_cal if a.qat_radix == "static" else None, in_training=True)
    aug["phase"] = "finetune"
    qavg = qsnap = None
    if a.qat_average_from is not None:
        from hlsnn.train.average import WeightAverage
        qavg = WeightAverage(q)
        qfirst = int(a.qat_average_from * a.qat_epochs)     # fine-tuning epochs [qfirst, qat_epochs) are averaged

        def qsnap(ep):
            if ep >= qfirst:
                qavg.add()
    def qepoch_end(ep):
        if qsnap:
            qsnap(ep)
        if a.qat_recalibrate and (ep + 1) % a.qat_recalibrate == 0:
            calibrate(q, x_cal, in_training=True)           # the static radixes of the weights as they are now

    fit(q, a.qat_epochs, a.qat_lr, None, qepoch_end)
    if qavg:
        if a.val:                       # the last fine-tuning epoch's model, before averaging (for comparison)
            q.eval().double()
            if a.mode == "static":
                calibrate(q, x_cal)
            with torch.no_grad():
                vals["qat_last_eval_acc"] = acc(q(torch.tensor(xva)).numpy(), True)
            q.float()
        qavg.apply()                    # the zeros held in every snapshot stay zero in the mean
    q.eval().double()
    if a.mode == "static":
        calibrate(q, x_cal)
    with torch.no_grad():
        torch_out = q(torch.tensor(xte)).numpy()
        torch_val = q(torch.tensor(xva)).numpy() if a.val else None
        if a.prune_seed is not None:
            pre["train"] = dict(pre.get("train", {}), **_train_fit(q(xtr.double()).numpy(), ytr.numpy(), "qat_eval"))
    q.float()
    if a.save:
        torch.save(q, a.save)
        from hlsnn.train import export
        export(q, torch.zeros(1, 3, 32, 32), a.save + ".onnx")       # the model deployed() exports
        saved = _saved_config(cfg, pathlib.Path(a.save).name + ".onnx")
        if a.val or a.fold is not None:   # a deployment takes x_train[:samples] of its data: this run's x_cal
            np.savez_compressed(a.save + ".npz", x_train=xtr.numpy(), y_train=ytr.numpy(), x_test=x_test,
                                y_test=y_test)
            saved = saved.replace("data: digits32\n", f"data: {pathlib.Path(a.save).name}.npz\n", 1)
        pathlib.Path(a.save + ".yaml").write_text(saved)
    with deployed(q, torch.zeros(1, 3, 32, 32), cfg) as dep:
        dep.calibrate(x_cal.numpy())
        dep_out = dep.run(xte)
        if a.val:
            dep_val = dep.run(xva)
            vals.update(qat_eval_acc=acc(torch_val, True), deployed_acc=acc(dep_val, True),
                        bit_exact=bool(np.array_equal(torch_val, dep_val)))
            if a.prune_seed is not None:           # the validation images at even / odd positions
                vals["deployed_acc_halves"] = [float(np.mean(np.argmax(dep_val[h::2], 1) == yva[h::2]))
                                               for h in (0, 1)]
        first_diff = None
        if not np.array_equal(torch_out, dep_out):
            first_diff = _first_difference(q, dep, xte, torch)
        latency = None
        if a.format == "sparse" or a.latency:
            from hlsnn.train.emulate import modelled_latency
            latency = modelled_latency(dep, xte[:1])
    res = {"model": a.model, "format": a.format, "mode": a.mode, "float_acc": float_acc, "ptq_acc": ptq_acc,
           "qat_eval_acc": acc(torch_out), "deployed_acc": acc(dep_out),
           "bit_exact": bool(np.array_equal(torch_out, dep_out)),
           "weight_scale": a.weight_scale, "float_epochs": a.float_epochs, "qat_epochs": a.qat_epochs,
           "qat_lr": a.qat_lr, "distill": a.distill, "distill_t": a.distill_t, "augment": a.augment, "augment_float": a.augment_float,
           **({"augment_affine": list(a.affine)} if a.affine else {}),
           **({"weight_decay": a.weight_decay} if a.weight_decay else {}),
           "seconds_float": round(t_float, 1),
           "seconds_total": round(time.time() - t0, 1)}
    if a.distill:
        if a.distill_phases is None:
            res["distill_in"] = a.distill_in
        res["distill_phases"] = [p for p in kd.PHASES if p in a.kd_phases]
        if a.distill_input != "same":
            res["distill_input"] = a.distill_input
        res["teacher_train_acc"] = round(kd_seen[1] / max(1, kd_seen[0]), 4)
    if a.from_pruned:
        res["from_pruned"] = a.from_pruned
    if a.prune_seed is not None:
        res["prune_seed"] = a.prune_seed
        res["train"] = pre["train"]
    if a.qat_radix != "dynamic":
        res["qat_radix"] = a.qat_radix
    if a.qat_recalibrate:
        res["qat_recalibrate"] = a.qat_recalibrate
    if a.overflow_ratio:
        res["overflow_ratio"] = a.overflow_ratio
    if a.calibration_samples != 128:
        res["calibration_samples"] = a.calibration_samples
    if a.strided_stats != "all":
        res["strided_stats"] = a.strided_stats
    if a.clip_stats != "off":
        res["clip_stats"] = a.clip_stats
    if a.fold_constants:
        res["fold_constants"] = [[name, chans] for name, chans in folded]
    if a.fold is not None:
        res["fold"] = a.fold
    if a.val:
        res["val"] = dict(vals, images=a.val, **({"seed": a.val_seed} if a.val_seed else {}))
    if latency:
        res["modelled_latency"] = latency
    if first_diff:
        res["first_difference"] = first_diff
    if a.sgd_momentum:
        res["sgd_momentum"] = a.sgd_momentum
    if qavg:
        res["qat_average"] = {"from": a.qat_average_from, "snapshots": qavg.count}
    if pruner:
        res["sparsity_target"] = a.sparsity
        res["prune_epochs"] = a.prune_epochs
        res["prune_lr"] = a.prune_lr
        res["prune_end"] = round(a.prune_end, 4)
        res["recover_epochs"], res["recover_lr"] = a.recover_epochs, a.recover_lr
        if a.recover_masks != "magnitude":
            res["recover_masks"] = a.recover_masks
        for k in ("average", "regrow"):
            if k in pre:
                res[k] = pre[k]
        if a.label_smoothing:
            res["label_smoothing"] = a.label_smoothing
            if a.ls_phases != frozenset(PHASES):
                res["label_smoothing_phases"] = [p for p in PHASES if p in a.ls_phases]
        res["allocation"] = a.allocation
        if a.lane_balance:
            res["lane_balance"] = a.lane_balance
            if a.row_min:
                res["row_min"] = a.row_min
            if a.lane_scale != "weight":
                res["lane_scale"] = a.lane_scale
        if a.depthwise_scale != "weight":
            res["depthwise_scale"] = a.depthwise_scale
        if a.erk_power != 1.0 or a.layer_sparsity:
            res["erk_power"], res["layer_sparsity"] = a.erk_power, a.layer_sparsity
        res["pruned_float_acc"] = pruned_float_acc
        res["pruned_layers"] = pre["pruned_layers"]
        res["weight_sparsity"] = _sparsity(q, torch)
        res["deployed_layers"] = _layer_sparsity(q)
    print(json.dumps(res))


def option_rules():
    """What every option taking a value allows, declared once (issue 84): a
    :class:`hlsnn.train.checks.Range` (numbers), or a rule of its text (a parser of
    hlsnn.train whose ValueError is the refusal, a file); :func:`declare_ranges` makes each the
    option's argparse ``type``, so a bad value ends in one line naming the option, the value and
    what is allowed (argparse's exit 2), never a traceback. The options with ``choices`` (argparse
    refuses an unknown choice) and the flags need none."""
    from hlsnn.train import checks as c
    from hlsnn.train.data import parse_affine, parse_fold
    from hlsnn.train.distill import parse_distill, parse_distill_phases
    from hlsnn.train.prune import parse_kernel
    from hlsnn.train.smoothing import parse_phases
    epochs, rate = c.COUNT, c.POSITIVE
    return {
        "--sparsity": c.SPARSITY, "--float-epochs": epochs, "--qat-epochs": epochs, "--prune-epochs": epochs,
        "--recover-epochs": epochs, "--lr": rate, "--qat-lr": rate, "--prune-lr": rate, "--recover-lr": rate,
        "--seed": c.COUNT, "--prune-seed": c.COUNT, "--val-seed": c.COUNT, "--erk-power": c.NONNEG,
        "--lane-balance": c.COUNT, "--row-min": c.COUNT, "--kernel-balance": c.parsed(parse_kernel), "--distill-t": c.POSITIVE,
        "--distill-alpha": c.FRACTION, "--distill-temperature": c.POSITIVE, "--sgd-momentum": c.FRACTION_BELOW_1,
        "--val": c.COUNT, "--augment": c.Range(0, 31, integer=True), "--weight-decay": c.NONNEG,
        "--prune-end": c.Range(0, 1, lo_open=True), "--average-from": c.FRACTION_BELOW_1,
        "--qat-average-from": c.FRACTION_BELOW_1, "--regrow-every": c.COUNT, "--regrow-alpha": c.FRACTION,
        "--regrow-stop": c.Range(0, 1, lo_open=True), "--label-smoothing": c.FRACTION_BELOW_1,
        "--qat-recalibrate": c.COUNT, "--calibration-samples": c.COUNT1, "--overflow-ratio": c.OVERFLOW_RATIO,
        "--layer-sparsity": c.parsed(_layer_sparsity_arg), "--distill": c.parsed(parse_distill),
        "--distill-phases": c.parsed(parse_distill_phases), "--fold": c.parsed(parse_fold),
        "--augment-affine": c.parsed(parse_affine), "--label-smoothing-phases": c.parsed(parse_phases),
        "--from-pruned": c.existing_file, "--save": c.writable_path, "--save-pruned": c.writable_path,
    }


def _model(nn, name):
    """A fresh torch model of ``--model`` (before the seed's training)."""
    from export_torch_models import _tiny_models, resnet8_of
    return resnet8_of(nn, (16, 16, 32, 64)) if name == "resnet8_mlperf" else _tiny_models(nn)[name][0]


def _layer_sparsity_arg(text):
    """``LAYER=S``: a module name and its sparsity in [0, 1); a ValueError otherwise."""
    from hlsnn.train.checks import SPARSITY
    name, eq, value = str(text).partition("=")
    try:
        s = float(value)
    except ValueError:
        s = None
    if not name or not eq or not SPARSITY.ok(s):
        raise ValueError(f"{text!r}: LAYER=S, a layer's module name and its sparsity, {SPARSITY.describe()}")
    return name, s


def declare_ranges(ap):
    """Each option of :func:`option_rules` takes its rule as its argparse ``type``; an option
    taking a value with neither a rule nor ``choices`` is a bug of this script (a new option
    must declare what it allows)."""
    from hlsnn.train import checks as c
    rules = option_rules()
    for act in ap._actions:
        if not act.option_strings or act.nargs == 0 or act.choices is not None or act.dest == "help":
            continue
        opt = max(act.option_strings, key=len)
        if opt not in rules:
            raise AssertionError(f"scripts/train_qat.py: {opt} declares no range (option_rules)")
        rule = rules[opt]
        act.type = rule.arg(opt) if isinstance(rule, c.Range) else rule(opt)


#: the options of the int8 step (and of reporting): the only ones --from-pruned may change
INT8_STEP_ARGS = frozenset({"accel", "mode", "qat_epochs", "qat_lr", "weight_scale", "qat_average_from", "latency", "save",
                            "save_pruned", "from_pruned", "qat_radix", "qat_recalibrate", "calibration_samples",
                            "overflow_ratio", "strided_stats", "clip_stats", "fold_constants"})


def _saved_config(cfg, model):
    """The text of ``--save``'s deploy config: the script's config ``cfg`` (a path) as
    ``hlsnn.train.deployed`` deploys it (:func:`hlsnn.train.trained_config`: the shift formats'
    ``weight_fit: nearest`` and one code per weight, a shift format's ``radix: auto`` as the
    ``msb`` training used, ``bias_correction: none``), every field of each format written out,
    and ``model`` (the exported ONNX file's name, beside the config)."""
    from hlsnn.train import trained_config
    tc = trained_config(cfg, model)
    head = pathlib.Path(cfg).read_text().split("formats:\n", 1)[0].replace("model: m.onnx\n", f"model: {model}\n", 1)
    lines = ["formats:"]
    for name, f in tc.formats.items():
        lines.append(f"  {name}:")
        lines += [f"    {k}: {getattr(f, k)}" for k in ("type", "accel", "delta", "prune", "weight_scale", "weight_fit",
                                                         "weight_terms", "bias_correction", "input_terms", "radix",
                                                         "equalize")]
    return head + "\n".join(lines) + "\n"


def _pre_int8_args(a):
    """The options that shape the model the int8 step starts from (every option but
    :data:`INT8_STEP_ARGS`, the resolved distillation and label-smoothing phases as lists)."""
    out = {}
    for k, v in sorted(vars(a).items()):
        if k in INT8_STEP_ARGS:
            continue
        out[k] = sorted(v) if isinstance(v, (set, frozenset)) else v
    return out


def _train_fit(out, y, name):
    """``{name}_acc``, ``{name}_loss``: the accuracy and the mean cross-entropy (no smoothing) of the
    logits ``out`` on the training images' labels ``y`` (unshifted images, eval mode)."""
    z = out - out.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    return {f"{name}_acc": float(np.mean(np.argmax(out, 1) == y)),
            f"{name}_loss": round(float(-np.mean(logp[np.arange(len(y)), y])), 6)}


def _sparsity(q, torch):
    from hlsnn.train import quantized_layers
    ws = [m.quantized_weight().detach() for _, m in quantized_layers(q)]
    return round(float(sum(int((w == 0).sum()) for w in ws)) / sum(w.numel() for w in ws), 4)


def _layer_sparsity(q):
    """``[name, weights, sparsity]`` of each engine layer's deployed (quantized) weights."""
    from hlsnn.train import quantized_layers
    return [[n, m.weight.numel(), round(float((m.quantized_weight().detach() == 0).float().mean()), 4)]
            for n, m in quantized_layers(q)]


def _first_difference(q, dep, x, torch):
    """The first quantized layer (in execution order) whose torch outputs differ from the
    deployment's, with the radix points each side chose."""
    from hlsnn.train import quantized_layers
    seen = []
    hooks = [m.register_forward_hook(lambda mod, i, o, n=n: seen.append((n, mod, o.detach().numpy().copy())))
             for n, m in quantized_layers(q)]
    q.eval().double()
    with torch.no_grad():
        q(torch.tensor(x))
    q.float()
    for h in hooks:
        h.remove()
    _, inter = dep.run(x, keep=True)
    for (n, mod, out), (ln, ex) in zip(seen, dep.execs.items()):
        cands = [v for v in inter.values() if np.shape(v) == out.shape]
        if not any(np.array_equal(v, out) for v in cands):
            return {"torch_layer": n, "deployed_layer": ln,
                    "torch_f_in_out": [getattr(mod.aq, "last_f", None), getattr(mod.oq, "last_f", None)],
                    "deployed_f_in_out": [None if ex.f_x is None else int(ex.f_x),
                                          None if ex.f_out is None else int(ex.f_out)]}
    return {"torch_layer": None, "note": "every quantized layer's outputs match; the difference is on the host"}


if __name__ == "__main__":
    main()
