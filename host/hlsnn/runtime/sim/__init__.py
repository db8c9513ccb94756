"""The simulated PYNQ device behind the ``sim`` target, one module per idea (the public names are
re-exported by :mod:`hlsnn.runtime.simdevice`, which documents the whole).

Imports flow one way, each module using only those listed before it:

- ``errors``: :class:`~.errors.SimError` and its kinds;
- ``pynq_base``: pynq imported quietly (``pynq.Device``, ``PynqBuffer``, or stand-ins);
- ``trace``: trace events, formatted when read;
- ``memory``: the simulated DDR, buffers and the strict cache model;
- ``ipmodel``: :class:`~.ipmodel.IPModel`, the base of the IP models;
- ``registers``: plain register files and the PS clock registers;
- ``dma``: the AXI DMA in simple mode;
- ``kernel_model``: an ``ap_ctrl_hs`` HLS kernel with stream data, behaviour in Python;
- ``streams``: AXI4-Stream links between the models;
- ``metadata``: the stream paths of a ``.hwh``;
- ``device``: :class:`~.device.SimDevice`, the ``pynq.Device`` that ties them together.
"""
