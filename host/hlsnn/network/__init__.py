"""Compiled models: ``hlsnn compile`` writes one ``NAME.hlsnn`` file (:mod:`.artifact`),
``hlsnn.load(path, target=...)`` returns a callable network (:mod:`.net`), ``hlsnn perf
NAME.hlsnn`` models its end-to-end latency (:mod:`.latency`). See docs/compiled-models.md."""
