"""Plain register IP: :class:`RegisterFileModel` and the PS clock register blocks (SLCR,
CRL_APB, CRF_APB) preset as on a booted board."""
from __future__ import annotations

from .. import ps_clocks as _ps_clocks
from .ipmodel import IPModel


class RegisterFileModel(IPModel):
    """Plain 32-bit read/write registers (reads return what was written, 0 at first)."""

    def __init__(self, initial=None):
        self.initial = dict(initial or {})
        self.reset()

    def reset(self):
        self.values = dict(self.initial)

    def read(self, offset):
        return self.values.get(offset, 0)

    def write(self, offset, value):
        self.values[offset] = value

    closed = True

    def inert(self, offset, write):
        return True


class _PsClockModel(RegisterFileModel):
    """The PS clock registers pynq.Clocks programs during Overlay.download() (Zynq-7000 SLCR,
    ZynqMP CRL_APB/CRF_APB), preset like a board booted with the loaded design's PS
    configuration (see :mod:`hlsnn.runtime.ps_clocks`)."""

    def __init__(self, name, initial):
        super().__init__(initial)
        self.name = name

    def preset(self, values):
        """Set registers as the boot firmware would (reset values and current values)."""
        self.initial.update(values)
        self.values.update(values)


def _ps_regions():
    """(base, size, name, registers) of the PS clock blocks, preset for a PYNQ-Z2 (SLCR) and a
    ZCU104 (CRL_APB/CRF_APB) until a design's .hwh says otherwise."""
    regs = {}
    for family in ("zynq7", "zynqmp"):
        regs.update(_ps_clocks.register_values(_ps_clocks.default_clocks(family))[0])
    return [(0xF8000000, 0x1000, "SLCR", regs["SLCR"]), (0xFF5E0000, 0x1000, "CRL_APB", regs["CRL_APB"]),
            (0xFD1A0000, 0x1000, "CRF_APB", regs["CRF_APB"])]
