"""Stage 5, run: the layer-by-layer executor (:class:`~hlsnn.deploy.run.runner.Deployment`, the
specification), each engine layer's executor, the integer program at the speed of an
evaluation loop (:mod:`~hlsnn.deploy.run.fast`, :mod:`~hlsnn.deploy.run.bfpfast`), and the
layers that run on the host."""
