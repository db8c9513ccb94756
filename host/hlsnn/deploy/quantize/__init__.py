"""Stage 3, quantize: calibration and the fits that choose a deployment's numbers: radix points
(:mod:`~hlsnn.deploy.quantize.calibrate`, least squares, the end-to-end search, the update
rules), shift codes, equalization, bias correction, the output layer's refit, deploy-time pruning."""
