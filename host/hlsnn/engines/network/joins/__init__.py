"""Where two tensors meet in the network mode: a residual ``Add`` pending (its moves, resizes,
pools, clamps, chains of them), channel ``Concat`` of more parts, of the input, of gates, and the
kernels' shortcut buffer that holds the skips."""
