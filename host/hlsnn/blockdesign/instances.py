"""A block design of several kernel instances of one config, each with its own AXI DMA: the
values of ``hls/tcl/bd.tcl.j2`` for it (the hardware handoff is ``render_hwh(cfg, path,
instances=n)``; the simulated board ``hlsnn.runtime.sim_target.SimBoard``)."""
from __future__ import annotations

from .design import bd_context
from .hwh import INSTANCE_STRIDE, instance_names


def instances_context(cfg, instances) -> dict:
    """:func:`bd_context` for a block design of ``instances`` kernel instances, each with its own
    AXI DMA: ``more_instances`` lists instances 1.. with their IP names and control windows
    (:func:`hlsnn.blockdesign.hwh.instance_names`, ``INSTANCE_STRIDE`` apart), as the hardware
    handoff of ``render_hwh(cfg, path, instances=instances)`` describes them. With more than one,
    the Vivado project and the files it writes are named ``overlay``: ``<config>_x<instances>``
    (:func:`overlay_name`), so the overlay of several never overwrites the config's own."""
    ctx = bd_context(cfg)
    if instances > 1:
        ctx["overlay"] = overlay_name(cfg, instances)
    ctx["more_instances"] = [
        {"index": i, "dma": instance_names(cfg, i)[0], "kernel": instance_names(cfg, i)[1],
         "dma_base": f"0x{int(ctx['dma_base'], 16) + i * INSTANCE_STRIDE:08X}",
         "kernel_base": f"0x{int(ctx['kernel_base'], 16) + i * INSTANCE_STRIDE:08X}"} for i in range(1, instances)]
    return ctx


def overlay_name(cfg, instances) -> str:
    """The overlay's name: the config's for one instance, ``<config>_x<instances>`` for several
    (``hlsnn build --instances``, the simulated board's ``sim_overlay/`` folder alike)."""
    return cfg.name if instances == 1 else f"{cfg.name}_x{instances}"
