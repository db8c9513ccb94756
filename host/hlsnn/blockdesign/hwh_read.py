"""Reading a ``.hwh`` the way pynq 4.0 does, the one :mod:`hlsnn.blockdesign.hwh` writes or Vivado's:
:func:`parse_hwh`, :func:`stream_peer`, :func:`pl_clock_mhz`.
"""
from __future__ import annotations

#: IP that passes an AXI-Stream through unchanged (for :func:`stream_peer`).
PASS_THROUGH = ("axis_dwidth_converter", "axis_data_fifo", "axis_register_slice", "axis_clock_converter",
                "axis_subset_converter", "axis_data_fifo_v2")


def parse_hwh(path):
    """pynq 4.0's parse of a ``.hwh``: ``RuntimeMetadataParser(Metadata(input=path))`` (what
    ``Device.get_bitfile_metadata`` returns on a board). Its ``ip_dict``, ``clock_dict``,
    ``mem_dict`` are pynq's; ``.systemgraph`` (== ``.md``) is the connection graph:
    ``systemgraph.blocks[<instance>].ports[<interface>]``."""
    from pynqmetadata.frontends import Metadata
    from pynqmetadata.views.runtime import RuntimeMetadataParser
    return RuntimeMetadataParser(Metadata(input=str(path)))


def stream_peer(md, block, port, through=PASS_THROUGH):
    """Where the AXI-Stream interface ``block/port`` ends: ``(instance, interface)`` of the IP on
    the far side, walking through pass-through stream IP (width converters, FIFOs, register
    slices). ``md`` is ``parser.systemgraph``. ``None`` if the interface is unconnected; a
    ValueError if it fans out."""
    seen = set()
    cur = md.blocks[block].ports[port]
    while True:
        dests = [d for d in cur.destinations().values() if d.parent() is not None]
        if not dests:
            return None
        if len(dests) > 1:
            raise ValueError(f"{block}/{port} fans out to {[f'{d.parent().name}/{d.name}' for d in dests]}")
        dst = dests[0]
        owner = dst.parent()
        vlnv = getattr(owner, "vlnv", None)
        if vlnv is not None and vlnv.name in through and (owner.name, dst.name) not in seen:
            seen.add((owner.name, dst.name))
            nxt = [p for p in owner.ports.values()
                   if getattr(p, "vlnv", None) is not None and p.vlnv.name == "axis"
                   and getattr(p, "driver", None) is not None and p.driver != dst.driver]
            if len(nxt) != 1:
                return owner.name, dst.name
            cur = nxt[0]
            continue
        return owner.name, dst.name


def pl_clock_mhz(parser, index=0):
    """PL clock ``index`` in MHz: pynq's ``clock_dict[index]['frequency']`` when it has one (Zynq
    UltraScale+), else the achieved rate the Zynq-7000 PS records
    (``PCW_ACT_FPGA<i>_PERIPHERAL_FREQMHZ``; pynqmetadata 0.2.0 reads no frequency there)."""
    f = parser.clock_dict.get(index, {}).get("frequency")
    if f is not None:
        return float(f)
    params = parser.ps.parameters
    for key in (f"PCW_ACT_FPGA{index}_PERIPHERAL_FREQMHZ", f"PCW_FPGA{index}_PERIPHERAL_FREQMHZ",
                f"PSU__CRL_APB__PL{index}_REF_CTRL__FREQMHZ"):
        if key in params and params[key].value not in (None, ""):
            return float(params[key].value)
    return None
