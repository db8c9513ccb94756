"""Whole-model deployment: ONNX import, calibration, per-layer formats, the layer-by-layer run
(the specification) and the network mode's integer program it lowers to (:mod:`hlsnn.deploy.program`, run
compiled by :mod:`hlsnn.deploy.fast`), the report's sections."""
