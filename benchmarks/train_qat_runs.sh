#!/usr/bin/env bash
# The runs of benchmarks/train_qat.md, one after another (one training job at a time, one thread).
# Each prints one JSON line (scripts/train_qat.py); the table's rows are those lines.
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1
run() { PYTHONPATH=host python scripts/train_qat.py "$@" 2>/dev/null | tail -1; }
R8="--model resnet8 --float-epochs 10 --qat-epochs 6"
MB="--model mobilenet_relu6 --float-epochs 10 --qat-epochs 6"
DS="--model dscnn --float-epochs 30 --qat-epochs 6"          # DS-CNN: 64% after 6 float epochs, under-trained
for M in "$R8" "$MB" "$DS"; do
  run $M --format pot --weight-scale channel
  run $M --format twohot
  run $M --format fixed --mode dynamic
  run $M --format sparse --sparsity 0.75 --prune-epochs 15 --prune-lr 3e-3
  run $M --format sparse --sparsity 0.9 --prune-epochs 30 --prune-lr 3e-3
done
run $R8 --format pot                                          # one scale per tensor
