"""Stream discovery in the ``.hwh``: :func:`find_stream_links` walks a pynqmetadata design from
master to slave ports through pass-through IP (width converters, FIFOs, register slices)."""
from __future__ import annotations

from .streams import StreamLink

# AXI4-Stream IP that forward bytes unchanged as far as a byte-level model is concerned.
PASS_THROUGH_IP = frozenset({
    "axis_dwidth_converter", "axis_data_fifo", "axis_register_slice", "axis_clock_converter",
    "axis_subset_converter", "axis_protocol_checker", "fifo_generator",
})


def _stream_ports(block):
    from pynqmetadata import StreamPort
    return {n: p for n, p in block.ports.items() if isinstance(p, StreamPort)}


def _tdata_bytes(port, default=None):
    param = port.parameters.get("TDATA_NUM_BYTES") if port.parameters else None
    try:
        return int(param.value)
    except (AttributeError, TypeError, ValueError):
        return default


def _is_pass_through(block, modelled):
    if block.hierarchy_name in modelled:
        return False
    vlnv = getattr(block, "vlnv", None)
    if vlnv is None or vlnv.name not in PASS_THROUGH_IP:
        return False
    ports = _stream_ports(block).values()
    return sum(p.driver for p in ports) == 1 and sum(not p.driver for p in ports) == 1


def find_stream_links(md, modelled=()):
    """Every AXI4-Stream path in metadata ``md`` (a pynqmetadata Module, ``parser.systemgraph``)
    from a master port to a slave port, walking through pass-through IP. Returns a list of
    :class:`StreamLink` (not yet attached to models)."""
    modelled = set(modelled)
    links = []

    def walk(port, path, capacity):
        for dst in port.destinations().values():
            blk = dst.parent()
            if blk is None:
                continue
            if hasattr(blk, "blocks"):       # an external port of the design
                yield (blk.name, dst.name, path, capacity, _tdata_bytes(dst))
                continue
            if _is_pass_through(blk, modelled):
                extra = 0
                if blk.vlnv.name == "axis_data_fifo":
                    try:
                        extra = int(blk.parameters["FIFO_DEPTH"].value) * (_tdata_bytes(dst, 1))
                    except (KeyError, TypeError, ValueError, AttributeError):
                        extra = 0
                for out in _stream_ports(blk).values():
                    if out.driver and len(path) < 32:
                        yield from walk(out, path + [blk.hierarchy_name or blk.name], capacity + extra)
            else:
                yield (blk.hierarchy_name or blk.name, dst.name, path, capacity, _tdata_bytes(dst))

    for block in md.blocks.values():
        if _is_pass_through(block, modelled):
            continue
        for pname, port in _stream_ports(block).items():
            if not port.driver:
                continue
            for dname, dport, path, extra, dwidth in walk(port, [], 0):
                link = StreamLink((block.hierarchy_name or block.name, pname), (dname, dport), path,
                                  None, _tdata_bytes(port), dwidth)
                link.fifo_bytes = extra
                links.append(link)
    return links
