#!/usr/bin/env bash
# The runs of benchmarks/train_qat.md, one after another (one training job at a time, one thread).
# Each prints one JSON line (scripts/train_qat.py); the table's rows are those lines, in this order.
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1
run() { PYTHONPATH=host python scripts/train_qat.py "$@" 2>/dev/null | tail -1; }
R8="--model resnet8 --float-epochs 10"
MB="--model mobilenet_relu6 --float-epochs 10"
DS="--model dscnn --float-epochs 30"          # DS-CNN: 64% after 6 float epochs, under-trained
run $R8 --format pot --qat-epochs 6 --weight-scale channel
run $R8 --format pot --qat-epochs 6                                   # one scale per tensor: -1.1
run $R8 --format twohot --qat-epochs 6
run $R8 --format fixed --mode dynamic --qat-epochs 6
run $R8 --format sparse --sparsity 0.75 --qat-epochs 6 --prune-epochs 15 --prune-lr 3e-3
run $R8 --format sparse --sparsity 0.9 --qat-epochs 6 --prune-epochs 30 --prune-lr 3e-3
run $R8 --format sparse --sparsity 0.9 --qat-epochs 6 --prune-epochs 60 --prune-lr 3e-3
run $MB --format pot --qat-epochs 20 --qat-lr 1e-2
run $MB --format twohot --qat-epochs 20 --qat-lr 1e-2
run $MB --format fixed --mode dynamic --qat-epochs 6
run $MB --format sparse --sparsity 0.75 --qat-epochs 6 --prune-epochs 15 --prune-lr 3e-3
run $MB --format sparse --sparsity 0.75 --qat-epochs 6 --prune-epochs 30 --prune-lr 3e-3
run $MB --format sparse --sparsity 0.9 --qat-epochs 6 --prune-epochs 30 --prune-lr 3e-3
run $DS --format pot --qat-epochs 20
run $DS --format twohot --qat-epochs 6
run $DS --format fixed --mode dynamic --qat-epochs 6
run $DS --format sparse --sparsity 0.75 --qat-epochs 6 --prune-epochs 15 --prune-lr 3e-3
run $DS --format sparse --sparsity 0.9 --qat-epochs 6 --prune-epochs 30 --prune-lr 3e-3
