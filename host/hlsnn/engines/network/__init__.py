"""What the engines' network parts (``engines/<engine>/network/``) build on, engine-neutral: the
lowered program's ops (:mod:`.program`), the network kernels' descriptor tables, rendering and
C-simulation binding (:mod:`.kernel`), and their interface costs (:mod:`.perf`)."""
