#!/usr/bin/env bash
# The runs of benchmarks/train_qat.md, one after another (one training job at a time, one thread).
cd "$(dirname "$0")/.."
run() { PYTHONPATH=host python scripts/train_qat.py --float-epochs 6 --qat-epochs 4 "$@" 2>/dev/null | tail -1; }
run --model resnet8 --format pot
run --model resnet8 --format twohot
run --model resnet8 --format sparse --sparsity 0.75
run --model resnet8 --format sparse --sparsity 0.9
run --model resnet8 --format fixed --mode dynamic
run --model dscnn --format pot
run --model mobilenet_relu6 --format twohot
run --model dscnn --format sparse --sparsity 0.9
run --model mobilenet_relu6 --format pot
