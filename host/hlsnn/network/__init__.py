"""Compiled models: ``hlsnn compile`` writes one ``NAME.hlsnn`` file (:mod:`.artifact`),
``hlsnn.load(path, target=...)`` returns a callable network (:mod:`.loader`), ``hlsnn perf
NAME.hlsnn`` models its end-to-end latency (:mod:`.latency`). The integer program they run is the
deployment's own (:mod:`hlsnn.deploy.lower.program`). See docs/compiled-models.md."""
