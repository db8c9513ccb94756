"""The base class of register-level IP models (:class:`IPModel`) and the test of whether a
model may be trusted to be ``closed``."""
from __future__ import annotations


class IPModel:
    """Base class of register-level IP models.

    :meth:`SimDevice.add_model` registers a model under an IP name of the overlay (a key of
    ``ip_dict``); at download the device calls :meth:`bind` with the IP's ``ip_dict`` entry,
    then :meth:`connect` with the stream links of its AXI4-Stream ports. Register accesses
    arrive as :meth:`read` / :meth:`write` of 32-bit words at byte offsets from the IP's base
    address. After every access the device calls :meth:`step` on all models until none makes
    progress. A model that can be polled forever returns a reason from
    :meth:`blocked_reason`.
    """

    sim = None
    name = None
    description = None

    def bind(self, sim, name, description):
        self.sim, self.name, self.description = sim, name, description
        self.registers = dict(description.get("registers") or {})
        self.offsets = {r: int(d["address_offset"]) for r, d in self.registers.items()}
        self.reset()

    def connect(self, inputs, outputs):
        """``inputs``: {slave port: StreamLink}; ``outputs``: {master port: [StreamLink, ...]}."""
        self.inputs, self.outputs = dict(inputs), {k: list(v) for k, v in outputs.items()}

    def reset(self):
        pass

    def read(self, offset):
        raise NotImplementedError

    def write(self, offset, value):
        raise NotImplementedError

    def step(self):
        return False

    #: True when :meth:`step` can make progress only after a register access that
    #: :meth:`inert` does not vouch for, or through a stream link another model's step fed
    #: (not by itself, e.g. by reading DDR the CPU changed). While every model of a design
    #: says so, the device skips stepping after inert accesses to a settled design.
    closed = False

    def inert(self, offset, write):
        """True if this read (``write`` False) or write of the register at ``offset`` cannot
        let any model make progress (the device then need not step the models after it)."""
        return False

    def blocked_reason(self):
        return None

    # helpers used by other models' diagnostics
    def producer_state(self, link):
        return f"{self.name} ({type(self).__name__}) produces no more data on {link.src[1]}"

    def consumer_state(self, link):
        return f"{self.name} ({type(self).__name__}) does not read {link.dst[1]}"

    def pending_packet_bytes(self, link):
        """Bytes this producer still holds for ``link`` up to the next TLAST, or None."""
        return None


def _is_closed(model):
    """``model.closed``, trusted only if the class that declared it also defined (or inherited)
    the ``step``, ``inert``, ``read`` and ``write`` in effect: a subclass that overrides one of
    them without declaring ``closed`` again is not closed."""
    mro = type(model).__mro__

    def owner(attr):
        return next(c for c in mro if attr in c.__dict__)
    decl = owner("closed")
    return bool(model.closed) and all(issubclass(decl, owner(a)) for a in ("step", "inert", "read", "write"))
