"""What every network kernel's cycle and resource model shares (``engines/<engine>/network/perf.py``):
the DDR's first-word latency, the pool and Add loops' depths, a descriptor row's fields, and the
allowances for the AXI adapters and the control."""
from __future__ import annotations


#: cycles from the AXI master's read request to its first data word: an assumption for a Zynq
#: HP port at 100 MHz (the PS's DDR controller and interconnect), not measured
DDR_LATENCY = 40
#: the pool and Add loops' pipeline depths (the same loops in every network kernel)
POOL_DEPTH = 3
ADD_DEPTH = 4
LUT_DEPTH = 3       # a table (engines/network/gate.py): act read (BRAM, 1), the ROM read (1), the write
MOVE_DEPTH = 2      # a data move (engines/network/move.py): act read (BRAM, 1), the zero select and the write


def _f(row, key):
    """Field ``key`` of a descriptor row (each kernel's rows name their own fields)."""
    return row["vals"][row["names"].index(key)]


#: allowances (LUT, FF) for what the model does not derive from widths: each 64-bit m_axi
#: adapter with its burst logic, the s_axilite register file, and the descriptor walk with the
#: loops' control. Assumptions of the order Vitis HLS reports for such interfaces, not measured.
AXI_MASTER = (1200, 1600)
AXI_LITE = (300, 400)
CONTROL = (1500, 1500)
