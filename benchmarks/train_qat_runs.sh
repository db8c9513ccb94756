#!/usr/bin/env bash
# The runs of benchmarks/train_qat.md, one after another (one training job at a time, one thread),
# in the table's order. Each prints one JSON line (scripts/train_qat.py): train_qat_runs.jsonl.
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1
run() { PYTHONPATH=host python scripts/train_qat.py "$@" 2>/dev/null | tail -1; }
run --model resnet8 --format pot --float-epochs 10 --qat-epochs 6 --weight-scale channel
run --model resnet8 --format pot --float-epochs 10 --qat-epochs 6
run --model resnet8 --format pot --float-epochs 10 --qat-epochs 20 --qat-lr 1e-2
run --model resnet8 --format twohot --float-epochs 10 --qat-epochs 6
run --model resnet8 --format fixed --mode dynamic --float-epochs 10 --qat-epochs 6
run --model resnet8 --format sparse --sparsity 0.75 --float-epochs 10 --qat-epochs 6 --prune-epochs 15 --prune-lr 3e-3
run --model resnet8 --format sparse --sparsity 0.9 --float-epochs 10 --qat-epochs 6 --prune-epochs 30 --prune-lr 3e-3
run --model resnet8 --format sparse --sparsity 0.9 --float-epochs 10 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3
run --model mobilenet_relu6 --format pot --float-epochs 10 --qat-epochs 20 --qat-lr 1e-2
run --model mobilenet_relu6 --format twohot --float-epochs 10 --qat-epochs 20 --qat-lr 1e-2
run --model mobilenet_relu6 --format fixed --mode dynamic --float-epochs 10 --qat-epochs 6
run --model mobilenet_relu6 --format sparse --sparsity 0.75 --float-epochs 10 --qat-epochs 6 --prune-epochs 15 --prune-lr 3e-3
run --model mobilenet_relu6 --format sparse --sparsity 0.75 --float-epochs 10 --qat-epochs 6 --prune-epochs 30 --prune-lr 3e-3
run --model mobilenet_relu6 --format sparse --sparsity 0.75 --float-epochs 10 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 10 --qat-epochs 6 --prune-epochs 30 --prune-lr 3e-3
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 10 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 10 --qat-epochs 6 --prune-epochs 120 --prune-lr 3e-3
run --model dscnn --format pot --float-epochs 30 --qat-epochs 20
run --model dscnn --format twohot --float-epochs 30 --qat-epochs 6
run --model dscnn --format fixed --mode dynamic --float-epochs 30 --qat-epochs 6
run --model dscnn --format sparse --sparsity 0.75 --float-epochs 30 --qat-epochs 6 --prune-epochs 15 --prune-lr 3e-3
run --model dscnn --format sparse --sparsity 0.75 --float-epochs 30 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 30 --qat-epochs 6 --prune-epochs 30 --prune-lr 3e-3
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 30 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3
# this session: per-channel int8 scales and ERK layer sparsities (--weight-scale channel, --allocation erk)
run --model dscnn --format sparse --sparsity 0.75 --float-epochs 30 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --weight-scale channel
run --model dscnn --format sparse --sparsity 0.75 --float-epochs 30 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --allocation erk --weight-scale channel
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 30 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --allocation erk
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 30 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --allocation erk --weight-scale channel
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 30 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --allocation erk --weight-scale channel --distill 0.7
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 30 --qat-epochs 6 --prune-epochs 120 --prune-lr 3e-3 --allocation erk --weight-scale channel
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 30 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 240 --prune-lr 3e-3 --allocation erk --weight-scale channel
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 30 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 3e-3 --allocation erk --weight-scale channel
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 30 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 3e-3 --allocation erk
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 30 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 3e-3 --allocation erk --weight-scale channel
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 30 --qat-epochs 40 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 3e-3 --allocation erk --weight-scale channel
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 30 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 10 --qat-epochs 6 --prune-epochs 120 --prune-lr 3e-3 --allocation erk --weight-scale channel
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 10 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 240 --prune-lr 3e-3 --allocation erk --weight-scale channel
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 10 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 3e-3 --allocation erk --weight-scale channel
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 10 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 3e-3 --allocation erk --weight-scale channel
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 10 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel
# settings chosen on a validation split (--val 287; --augment, --prune-end)
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --augment 4
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --augment 4 --distill 0.5
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --augment 2
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2
run --model dscnn --format sparse --sparsity 0.75 --float-epochs 60 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --allocation erk --weight-scale channel --val 287
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --augment 4
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --augment 4 --distill 0.5
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.2
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2
run --model mobilenet_relu6 --format sparse --sparsity 0.75 --float-epochs 60 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --val 287
run --model mobilenet_relu6 --format fixed --float-epochs 60 --qat-epochs 0 --augment 2 --augment-float --val 287
run --model dscnn --format fixed --float-epochs 60 --qat-epochs 0 --augment 2 --augment-float --val 287
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --seed 1
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --seed 1
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --seed 2
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --seed 2
# distillation from the float model (--distill T,ALPHA, --distill-in), validation split, seeds
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --distill 0.5 --distill-t 4
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --distill 2,0.3
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --augment-float --distill 4,0.5
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --augment-float
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --distill 4,0.5
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --distill 0.5 --distill-t 4
run --model mobilenet_relu6 --format sparse --sparsity 0.75 --float-epochs 60 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --val 287 --distill 4,0.5
run --model mobilenet_relu6 --format sparse --sparsity 0.75 --float-epochs 60 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --val 287 --distill 4,0.5 --seed 1
run --model mobilenet_relu6 --format sparse --sparsity 0.75 --float-epochs 60 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --val 287 --distill 4,0.5 --seed 2
run --model mobilenet_relu6 --format sparse --sparsity 0.75 --float-epochs 60 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --val 287 --seed 1
run --model mobilenet_relu6 --format sparse --sparsity 0.75 --float-epochs 60 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --val 287 --seed 2
run --model mobilenet_relu6 --format sparse --sparsity 0.75 --float-epochs 60 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --val 287 --augment 2
# longer recovery at full sparsity (--recover-epochs 120 --recover-lr 1e-3), 90% recipe, three seeds
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-3
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --seed 1
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --seed 2
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-3
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --seed 1
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --seed 2
# pruning schedule ending at a quarter, with the recovery, three seeds
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.25 --augment 2 --recover-epochs 120 --recover-lr 1e-3
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.25 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --seed 1
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.25 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --seed 2
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.25 --augment 2 --recover-epochs 120 --recover-lr 1e-3
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.25 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --seed 1
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.25 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --seed 2
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --regrow-every 100
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --regrow-every 100
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-2 --recover-masks frozen
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-2 --recover-masks frozen
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-2 --recover-masks frozen --seed 1
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-2 --recover-masks frozen --seed 2
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-2 --recover-masks frozen --seed 1
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-2 --recover-masks frozen --seed 2
run --model mobilenet_relu6 --format sparse --sparsity 0.75 --float-epochs 60 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --val 287 --recover-epochs 60 --recover-lr 3e-3 --recover-masks frozen
run --model mobilenet_relu6 --format sparse --sparsity 0.75 --float-epochs 60 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --val 287 --recover-epochs 60 --recover-lr 3e-3 --recover-masks frozen --seed 1
run --model mobilenet_relu6 --format sparse --sparsity 0.75 --float-epochs 60 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --val 287 --recover-epochs 60 --recover-lr 3e-3 --recover-masks frozen --seed 2
# a gentler first conv (--layer-sparsity), label smoothing; validation split
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-2 --recover-masks frozen --layer-sparsity 0=0.8148148 --layer-sparsity 15=0.8611111 --layer-sparsity 21=0.8611111 --layer-sparsity 29=0.875
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --layer-sparsity 0=0.95
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --label-smoothing 0.1
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --label-smoothing 0.1 --seed 1
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --label-smoothing 0.1 --seed 2
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-2 --recover-masks frozen --label-smoothing 0.1
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-2 --recover-masks frozen --label-smoothing 0.1 --seed 1
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-2 --recover-masks frozen --label-smoothing 0.1 --seed 2
run --model mobilenet_relu6 --format sparse --sparsity 0.75 --float-epochs 60 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --val 287 --recover-epochs 60 --recover-lr 3e-3 --recover-masks frozen --label-smoothing 0.1
run --model mobilenet_relu6 --format sparse --sparsity 0.75 --float-epochs 60 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --val 287 --recover-epochs 60 --recover-lr 3e-3 --recover-masks frozen --label-smoothing 0.1 --seed 1
run --model mobilenet_relu6 --format sparse --sparsity 0.75 --float-epochs 60 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3 --val 287 --recover-epochs 60 --recover-lr 3e-3 --recover-masks frozen --label-smoothing 0.1 --seed 2
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --label-smoothing 0.1 --label-smoothing-phases prune,recover
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-2 --recover-masks frozen --label-smoothing 0.1 --label-smoothing-phases prune,recover --seed 1
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-2 --recover-masks frozen --label-smoothing 0.1 --label-smoothing-phases prune,recover --seed 2
# distillation by phase (--distill-alpha/--distill-temperature/--distill-phases, --distill-input clean), longer recovery (240); validation split, seeds
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --label-smoothing 0.1 --distill-alpha 0.5 --distill-temperature 4 --distill-phases finetune --distill-input clean
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --label-smoothing 0.1 --distill-alpha 0.3 --distill-temperature 2 --distill-phases recover,finetune --distill-input clean
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --label-smoothing 0.1 --distill-alpha 0.3 --distill-temperature 2 --distill-phases recover,finetune --distill-input clean --seed 1
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-3 --label-smoothing 0.1 --distill-alpha 0.3 --distill-temperature 2 --distill-phases recover,finetune --distill-input clean --seed 2
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 240 --recover-lr 1e-3 --label-smoothing 0.1
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 240 --recover-lr 1e-3 --label-smoothing 0.1 --seed 1
run --model dscnn --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 20 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 240 --recover-lr 1e-3 --label-smoothing 0.1 --seed 2
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-2 --recover-masks frozen --label-smoothing 0.1 --distill-alpha 0.5 --distill-temperature 4 --distill-phases finetune --distill-input clean
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 120 --recover-lr 1e-2 --recover-masks frozen --label-smoothing 0.1 --distill-alpha 0.3 --distill-temperature 2 --distill-phases recover,finetune --distill-input clean
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 240 --recover-lr 1e-2 --recover-masks frozen --label-smoothing 0.1
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 240 --recover-lr 1e-2 --recover-masks frozen --label-smoothing 0.1 --seed 1
run --model mobilenet_relu6 --format sparse --sparsity 0.9 --float-epochs 60 --qat-epochs 6 --qat-lr 3e-4 --prune-epochs 480 --prune-lr 1e-2 --allocation erk --weight-scale channel --val 287 --prune-end 0.33 --augment 2 --recover-epochs 240 --recover-lr 1e-2 --recover-masks frozen --label-smoothing 0.1 --seed 2
