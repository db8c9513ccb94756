"""Sequence models in the network mode: attention (the MatMul of two activations, Softmax, the
head moves), LayerNormalization, a transpose of rows and channels, the pick of one step."""
