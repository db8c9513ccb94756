"""Where the work of source 002's embodiments runs: circuits, boards and the phase each does.

A :class:`Layout` names its circuits (:class:`Circuit`: a kernel instance of one accel config,
on a board, with a capability: the share of a full circuit's compute it has) and, per phase of
a radix update (:data:`hlsnn.deploy.quantize.update.PHASES`: ``preceding``, ``determine``,
``quantize``, ``main``), the circuits that do it. :func:`layout` gives each method's layout
(SPECS 3.3, fig. 20-25):

====== ===================================== ============================================
method circuits (board: circuits)             phases
====== ===================================== ============================================
e1-e4  acc51: 4A                              everything on 4A, layer after layer
e6     acc51: 4A 4B 4C 4D                     4A preceding, determine; 4B-4D main (the
                                              images shared, the sampled ones first)
e7     acc56: 56 (1/4), acc51: 51, acc52: 52  56 preceding, determine; 51, 52 main
e8     acc51: 4A 4B 4C 4D                     4B-4D preceding (wide results to 4A's RAM)
                                              and determine; 4A quantize and main (the
                                              (100-N) % not sampled)
e9     acc56: 56 (1/4), acc51: 51, acc52: 52  51, 52 preceding, determine; 56 quantize, main
====== ===================================== ============================================

``circuits`` (e6, e8) sets how many circuits the accelerator has (one does the preceding
operations, or the main operations on e8, the others the rest; at least 2); ``low`` (e7, e9)
the capability of the low-capability accelerator (default 1/4, as the source says).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError

#: the methods (source 002's embodiments E1-E9 but E5, which picks E2 or E4 per layer:
#: ``hlsnn deploy --radix-update e5``)
METHODS = ("e1", "e2", "e3", "e4", "e6", "e7", "e8", "e9")
#: methods whose preceding and main operations run on different circuits, overlapped
PIPELINED = ("e6", "e7", "e8", "e9")
#: methods whose circuits are separate accelerators (boards: Dask workers with a cluster)
ACROSS_BOARDS = ("e7", "e9")
#: which update of one layer a method's bits follow (:func:`hlsnn.deploy.quantize.update.run`): E2's two
#: operations on the sample, or E4's saved sample results; e1 is the deployment's own ``e1``
BITS_OF = {"e1": "e1", "e2": "e2", "e3": "e4", "e4": "e4", "e6": "e2", "e7": "e2", "e8": "e4", "e9": "e4"}
LOW_CAPABILITY = 0.25


@dataclass(frozen=True)
class Circuit:
    """One kernel instance: ``name``, the ``board`` (accelerator card) it is on, and its
    ``capability`` (its compute as a share of a full circuit's: the model divides its cycles
    by it)."""
    name: str
    board: str
    capability: float = 1.0


@dataclass(frozen=True)
class Layout:
    """A method's circuits and the circuits of each phase (module docstring)."""
    method: str
    circuits: tuple
    roles: dict

    def of(self, phase):
        """The circuits (:class:`Circuit`) that do ``phase`` (None: the first circuit)."""
        names = self.roles.get(phase) or (self.circuits[0].name,)      # () or None: the first
        return tuple(c for c in self.circuits if c.name in names)

    @property
    def boards(self):
        return tuple(dict.fromkeys(c.board for c in self.circuits))

    def describe(self) -> str:
        """One line: the circuits of each phase (one circuit: everything on it)."""
        if len(self.circuits) == 1:
            return f"every phase on {self.circuits[0].name}"
        return "; ".join(f"{ph}: {' '.join(c.name for c in self.of(ph))}" for ph in
                         ("preceding", "determine", "quantize", "main") if self.roles.get(ph))


def check_method(method) -> str:
    if method not in METHODS:
        raise InputError(f"method = {method!r}: one of {', '.join(METHODS)} (e5 is hlsnn deploy --radix-update e5)")
    return method


def layout(method, *, circuits=4, low=LOW_CAPABILITY) -> Layout:
    """The layout of ``method`` (module docstring)."""
    check_method(method)
    if isinstance(circuits, bool) or not isinstance(circuits, int) or not 2 <= circuits <= 16:
        raise InputError(f"circuits = {circuits!r}: an int in 2..16 (one circuit for one side of the pipeline, "
                         f"the others for the other)")
    if isinstance(low, bool) or not isinstance(low, (int, float)) or not 0 < low <= 1:
        raise InputError(f"low capability = {low!r}: a number in (0, 1] (the source's simplified LSI has about 1/4)")
    if method in ("e1", "e2", "e3", "e4"):
        c = (Circuit("4A", "acc51"),)
        return Layout(method, c, {ph: ("4A",) for ph in ("preceding", "determine", "quantize", "main")})
    if method in ("e6", "e8"):
        names = tuple(f"4{chr(ord('A') + i)}" for i in range(circuits))
        cs = tuple(Circuit(n, "acc51") for n in names)
        one, rest = names[:1], names[1:]
        if method == "e6":
            return Layout(method, cs, {"preceding": one, "determine": one, "quantize": (), "main": rest})
        return Layout(method, cs, {"preceding": rest, "determine": rest[:1], "quantize": one, "main": one})
    cs = (Circuit("56", "acc56", float(low)), Circuit("51", "acc51"), Circuit("52", "acc52"))
    if method == "e7":
        return Layout(method, cs, {"preceding": ("56",), "determine": ("56",), "quantize": (), "main": ("51", "52")})
    return Layout(method, cs, {"preceding": ("51", "52"), "determine": ("51",), "quantize": ("56",),
                               "main": ("56",)})
