"""What the engines' network parts (``engines/<engine>/network/``) build on, engine-neutral: the
lowered program's ops (:mod:`~hlsnn.engines.network.program`), the network kernels' descriptor tables, rendering and
C-simulation binding (:mod:`~hlsnn.engines.network.kernel`), and their interface costs (:mod:`~hlsnn.engines.network.perf`)."""
