"""A deployment config evaluated through every stage: ``hlsnn deploy`` (:mod:`hlsnn.evaluation.run`: each
assignment calibrated and run on a target, layer by layer or on its network kernel, against onnx's
float evaluation, with modelled latencies) and ``hlsnn report MODEL.yaml`` (:mod:`hlsnn.evaluation.report`, its
HTML page). Above :mod:`hlsnn.deploy` (import, quantize, calibrate) and :mod:`hlsnn.network`
(compile, load, run, latency), which it runs in that order."""
