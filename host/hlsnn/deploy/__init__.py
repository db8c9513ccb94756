"""Whole-model deployment: ONNX import, calibration, per-layer formats, reports."""
