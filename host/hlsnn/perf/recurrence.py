"""The ``register`` bound of :mod:`hlsnn.perf.schedule`: every register's loop-back chain, operator by operator.

A register is a value carried from one iteration of a pipelined loop to the next: a scalar of the
loop's function declared outside the loop (not the loop counter), or an element of an array of its
function declared outside the loop whose storage is registers (``ARRAY_PARTITION ... complete`` of
every dimension, or ``HLSNN_MEM(..., kRegs, ...)``; its element ``acc[2 * i]`` in each unrolled copy
is a register of its own). The iteration is followed as written, statement by statement, every
unrolled copy of an inner loop in turn (an unrolled loop of ``T`` iterations counting up or down is
``T`` copies, its counter bound in each, so ``acc[2 * i]`` names one element and a branch a copy's
constant condition excludes is left out; a loop whose trip count is unknown is followed once). For
every value the iteration computes (a register's, a temporary's declared in the loop, an element of
a temporary array's) the model keeps, per register, the longest chain of operators from the
register's value at the start of the iteration to it; a register's loop-back is its chain to its own
value at the end. A temporary read-modify-written and stored back to a register (``a0 = first ? 0 :
acc; a0 += p; acc = a0``) is a chain through that register. A called function's own locals are
not followed (its operators are one LUT level, below).

The operators, along the AST from a read to the value assigned: adders, subtractors and magnitude
compares as carry chains of the assigned value's width, a select, a logic operator or an equality
test as a LUT level, a variable shift as ``log4`` LUT levels, a multiplication by a run-time value
as the fabric's array multiplier (a LUT level of partial products, then ``ceil(log2 n)`` carry
chains of twice the width, ``n`` the narrower operand's bits; a multiplication by a constant one
carry chain of twice the width; the model does not know a DSP slice's combinational delay and
charges the fabric form for both), a division or remainder by a run-time value as a restoring array
divider (a subtract and a select per quotient bit; by a power of two nothing, by another constant a
multiplication), an overloaded operator of ``ap_int`` (a ``CALL_EXPR operator*``) as its built-in
one; a conversion, a constructor or a bit slice (``range``) nothing; a call of another function a
LUT level. A read of an array that is a memory (not registers) at an index computed from a register
is a cycle of latency on the chain: a block RAM registers the address and gives the word a cycle
later, so ``s = tbl[s]`` cannot start an iteration every cycle. An assignment under a condition adds
the select to the new value, and a later read sees every value written on a path to it (both
branches of an ``if``/``else``, or of ``if (c)`` and ``if (!c)`` with the same condition text, and
the value before an ``if`` whose branch may not run); the
condition's own operators are not followed (a select's ``c ? a : b`` is). A floating-point value's every add, subtract, compare or multiply is a float
add's combinational path (alignment shift, add, leading-zero count, normalising shift, rounding
add).

Sums are timed as written: ``s = acc; s += p0; s += p1; acc = s`` is two adders on ``acc``'s
loop-back, ``acc = acc + (p0 + p1)`` or ``acc = p0 + p1 + acc`` one. The model does not assume
that Vitis HLS reassociates an integer sum to put the carried register last (LLVM's Reassociate may,
but a pipelined loop's II should not rest on it); the kernels sum a step's products first and add
the accumulator last, so their figure holds either way.

The chain is timed with :mod:`hlsnn.engines.timing`'s operator delays against the clock's budget:
II = the memory reads on it + ceil(delay / budget). A divider's and a float operator's II is a
lower bound, and the note says so: Vitis HLS implements both as multi-cycle cores whose latency (an
fadd of 11 cycles in Xilinx AR 62859) this model does not know; none of the rendered kernels has
either in a loop-back.
"""
from __future__ import annotations

import functools
import math
import re

from .cparse import _bits, _children, _kind, _op, _root, _strip, _text, names_read

#: the calls that are wiring, not logic: ap_int's bit slices and element selects
_FREE_CALLS = ("range", "operator[]", "operator()", "get_bit", "to_int", "to_uint", "to_long", "to_ulong",
               "to_int64", "to_uint64")
#: a chain element's weight when two chains are compared (:func:`cost`): a memory read is a cycle
_MEM_WEIGHT = 1000.0


def type_bits(t, consts):
    """The bits of a value of type ``t`` (a libclang type): its spelling, else its canonical
    spelling (a typedef of ``ap_int<N>``), 32 when neither says."""
    if t is None:
        return 32
    s = t.spelling or ""
    if re.search(r"ap_u?(int|fixed)<|\bbool\b|char|short|long|int\d+", s):
        return _bits(s, consts)
    try:
        can = t.get_canonical().spelling
    except Exception:                        # noqa: BLE001 - bindings without it: the spelling
        can = s
    return _bits(can or s, consts)


def type_mantissa(t):
    s = t.spelling if t is not None else ""
    m = float_mantissa(s)
    if m is None and t is not None:
        try:
            m = float_mantissa(t.get_canonical().spelling)
        except Exception:                    # noqa: BLE001
            m = None
    return m


class Flow:
    """One pipelined loop's iteration, followed copy by copy (module docstring). ``kernel``
    answers which arrays are memories (:meth:`hlsnn.perf.schedule.Kernel.memory`); an unrolled
    copy's counter takes the values ``0 ... T - 1``, as :meth:`~hlsnn.perf.schedule.Kernel._banks`
    takes them."""

    def __init__(self, kernel, consts):
        self.kernel, self.consts = kernel, consts
        self._leaves, self._vals, self._names_in = {}, {}, {}

    # ------------------------------------------------------------------ the iteration
    def run(self, events):
        """``{register key: chain}`` of the registers the iteration assigns: the chain from its
        value at the start to its value at the end (``[]``: assigned from no chain of its own)."""
        sets = [e for e in events if e[0] == "set"]
        self.carried = {e[1][1] for e in sets if e[6]}
        # only the values on a path from a register back to itself are followed, and in each only
        # the chains of the registers whose loop-back it is on
        reads = {}
        for e in sets:
            reads.setdefault(e[1][1], set()).update(self._names(e))
        self.via = {}                                    # name -> the registers whose loop-back it is on
        for r in self.carried:
            for n in _reach(r, reads, forward=True) & _reach(r, reads, forward=False):
                self.via.setdefault(n, set()).add(r)
        tree = _tree([e for e in events if e[0] != "set" or e[1][1] in self.via])
        self.state, self.assigned = {}, {}
        self._run(tree, {})
        return {k: list(self._lookup(k, name, ()).get(k, _Ch()).els) for k, name in self.assigned.items()}

    def _names(self, e):
        """The names assignment ``e`` reads (its own too when it is compound)."""
        _k, target, rhs, op, _c, (bits, mant), _carried = e
        out = {target[1]} if op != "=" else set()
        for leaf, _ops in (self.leaves(rhs, bits, mant) if rhs is not None else ()):
            r = _root(leaf) if _kind(leaf) != "DECL_REF_EXPR" else (leaf.spelling, ())
            if r is not None:
                out.add(r[0])
        return out

    def _run(self, nodes, env):
        for n in nodes:
            if n[0] == "loop":
                _k, var, t, body = n
                if not body:
                    continue
                for v in range(max(1, t or 1)):
                    self._run(body, dict(env, **({var: v} if var and t else {})))
            else:
                self._set(n, env)

    def _set(self, e, env):
        _k, target, rhs, op, cond, typ, carried = e
        live = []
        for cc, pol in cond:
            cc = _strip(cc)
            while pol is not None and _kind(cc) == "UNARY_OPERATOR" and _op(cc) == "!" and _children(cc):
                cc, pol = _strip(_children(cc)[0]), not pol     # if (!c): c false
            v = self._value(cc, env) if pol is not None else None
            if v is not None and bool(v) != pol:
                return                             # this copy's branch is never taken
            if v is None:                          # the condition of this copy (its counters' values)
                live.append(((_text(cc), tuple(env.get(n) for n in self._names_of(cc))), pol))
        live = tuple(live)
        key = self._key(target, env)
        bits, mant = typ
        new = {}
        if rhs is not None:
            for leaf, ops in self.leaves(rhs, bits, mant):
                for r, ch in self._chains_of(leaf, env, live).items():
                    _longest(new, r, ch + ops)
        if op != "=":
            base = self._base(op, rhs, bits, mant)
            new = {r: ch + base for r, ch in new.items()}
            for r, ch in self._lookup(key, target[1], live).items():
                _longest(new, r, ch + base)
        via = self.via.get(target[1], ())
        new = {r: ch for r, ch in new.items() if r.split("[")[0] in via}
        if live:                                   # under a condition: the select
            new = {r: ch + [("lut", 1)] for r, ch in new.items()}
            self.state.setdefault(key, []).append((live, new))
        else:
            self.state[key] = [((), new)]
        if carried:
            self.assigned[key] = target[1]

    def _lookup(self, key, name, cond):
        """The chains of ``key``'s value as a read under conditions ``cond`` sees it: the longest of
        the values written under conditions not exclusive with ``cond`` (a branch of the same ``if``
        does not see the other's), back to the last written on every path to the read (a register's
        value at the start of the iteration before any)."""
        out = {}
        for vc, chains in reversed(self.state.get(key, ())):
            if _exclusive(vc, cond):
                continue
            for r, ch in chains.items():
                _longest(out, r, ch)
            if all(x in cond for x in vc):
                return out
        if name in self.carried:
            _longest(out, key, _Ch())
        return out

    def _chains_of(self, leaf, env, cond):
        k = _kind(leaf)
        if k == "DECL_REF_EXPR":
            name = leaf.spelling
            return self._lookup(name, name, cond) if name in self.carried or name in self.state else {}
        r = _root(leaf)
        if r is None:
            return {}
        key = self._key(("arr", r[0], r[1]), env)
        if key in self.state or r[0] in self.carried:
            return self._lookup(key, r[0], cond)
        return {}

    def _value(self, c, env):
        """``consts.value(c, env)``, once per cursor and values of the counters it reads."""
        k = (c, tuple(env.get(n) for n in self._names_of(c)))
        if k not in self._vals:
            self._vals[k] = self.consts.value(c, env=env)
        return self._vals[k]

    def _names_of(self, c):
        names = self._names_in.get(c)
        if names is None:
            names = self._names_in[c] = tuple(sorted(names_read(c)))   # through local constants too
        return names

    def _key(self, target, env):
        if target[0] == "var":
            return target[1]
        vals = []
        for ix in target[2]:
            v = self._value(ix, env)
            vals.append(str(v) if v is not None else _text(ix))
        return f"{target[1]}[{']['.join(vals)}]"

    # ------------------------------------------------------------------ one expression
    def leaves(self, c, bits, mant):
        """``[(read, chain)]``: every read in ``c`` (a scalar's name, an array's element) and the
        operators between it and ``c``'s value."""
        m = (c, bits, mant)
        got = self._leaves.get(m)
        if got is None:
            got = self._leaves[m] = self._walk(c, bits, mant)
        return got

    def _walk(self, c, bits, mant):
        k = _kind(c)
        if k == "DECL_REF_EXPR":
            return [] if c.spelling.startswith("operator") else [(c, [])]
        if k in ("ARRAY_SUBSCRIPT_EXPR", "CALL_EXPR"):
            r = _root(c)
            if r is not None:
                name, idx = r
                out = [(c, [])]
                mem = [("mem", 1)] if self.kernel.memory(name, len(idx)) else []
                for ix in idx:
                    out += [(leaf, ops + mem) for leaf, ops in self.leaves(ix, bits, None)]
                return out
        kids = _children(c)
        here = self._node(c, k, kids, bits, mant)
        out = []
        for x in kids:
            out += [(leaf, ops + here) for leaf, ops in self.leaves(x, bits, mant)]
        return out

    def _node(self, c, k, kids, bits, mant):
        """The operators node ``c`` puts between its operands and its value."""
        if k == "BINARY_OPERATOR":
            return self._binary(_op(c), kids, bits, mant)
        if k == "CONDITIONAL_OPERATOR":
            return [("lut", 1)]
        if k != "CALL_EXPR":
            return []
        ref = c.referenced
        rk = _kind(ref) if ref is not None else ""
        name = c.spelling
        if rk in ("CONSTRUCTOR", "CONVERSION_FUNCTION") or name in _FREE_CALLS or not name:
            return []       # (no name: an implicit construction or conversion, e.g. wide_t(a + b) in a ?:)
        low = name.lower()
        if name.startswith("operator"):
            args = [x for x in kids if not (_kind(x) == "DECL_REF_EXPR" and x.spelling.startswith("operator"))
                    and not (_kind(_strip(x)) == "DECL_REF_EXPR" and _strip(x).spelling.startswith("operator"))]
            o = name[len("operator"):]
            if len(args) >= 2:
                return self._binary(o, args[-2:], bits, mant)
            if o in ("+", "-"):
                return self._arith(("carry", bits), mant)
            if o in ("!", "~"):
                return [("lut", 1)]
            return []
        if "max" in low or "min" in low:
            return self._arith(("carry", bits), mant) + [("lut", 1)]
        return [("lut", 1)]

    def _binary(self, op, kids, bits, mant):
        if op in ("+", "-", "<", ">", "<=", ">="):
            return self._arith(("carry", bits), mant)
        if op in ("==", "!="):
            return [("lut", 1 + (bits > 6))]
        if op in ("&", "|", "^", "&&", "||"):
            return [("lut", 1)]
        if op in ("<<", ">>"):
            amt = kids[1] if len(kids) > 1 else None
            if amt is not None and self.consts.value(amt) is None:
                return [("lut", max(1, math.ceil(math.log(max(bits, 2), 4))))]
            return []
        if op == "*":
            return self._multiply(kids, bits, mant)
        if op in ("/", "%") and len(kids) > 1:
            return _divide(kids[1], bits, self.consts)
        return []

    def _arith(self, el, mant):
        return [("float", mant)] if mant else [el]

    def _multiply(self, kids, bits, mant):
        """A multiplication's chain (module docstring): by a constant one carry chain of twice the
        width, else the array multiplier's partial products and adder tree."""
        if mant:
            return [("float", mant)]
        if any(self.consts.value(x) is not None for x in kids):
            return [("carry", 2 * bits)]
        narrow = min([type_bits(_strip(x).type, self.consts) for x in kids] or [bits])
        levels = max(1, math.ceil(math.log2(max(2, min(narrow, bits)))))
        return [("lut", 1)] + [("carry", 2 * bits)] * levels

    def _base(self, op, rhs, bits, mant):
        """The operator of a compound assignment ``x op= rhs`` (``rhs`` None: ``++x``)."""
        o = op[:-1]
        if o in ("+", "-"):
            return self._arith(("carry", bits), mant)
        if o in ("|", "&", "^"):
            return [("lut", 1)]
        if o == "*":
            return self._multiply([rhs] if rhs is not None else [], bits, mant)
        if o in ("/", "%") and rhs is not None:
            return _divide(rhs, bits, self.consts)
        if o in ("<<", ">>"):
            return self._binary(o, [None, rhs], bits, mant) if rhs is not None else []
        return [("lut", 1)]


def _reach(r, reads, forward):
    """The names a value of ``r`` flows into (``forward``) or that flow into ``r``, ``r`` with
    them; ``reads``: ``{name: the names its assignments read}``."""
    seen, todo = {r}, [r]
    while todo:
        n = todo.pop()
        nxt = [t for t, rd in reads.items() if n in rd] if forward else reads.get(n, ())
        for m in nxt:
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


def _tree(events):
    """The events of :meth:`Flow.run` nested by their ``loop``/``end`` markers."""
    root = []
    stack = [root]
    for e in events:
        if e[0] == "loop":
            node = ("loop", e[1], e[2], [])
            stack[-1].append(node)
            stack.append(node[3])
        elif e[0] == "end":
            if len(stack) > 1:
                stack.pop()
                if not stack[-1][-1][3]:
                    stack[-1].pop()                # a loop with nothing to follow
        else:
            stack[-1].append(e)
    return root


def _exclusive(a, b):
    """Whether condition sets ``a`` and ``b`` cannot both hold (one needs a condition true, the
    other the same condition false)."""
    return any(pa is not None and pb is not None and pa != pb and ca == cb for ca, pa in a for cb, pb in b)


class _Ch:
    """A chain of operators (``els``) and its :func:`cost` (``w``); ``+`` a list of operators."""
    __slots__ = ("els", "w")

    def __init__(self, els=(), w=0.0):
        self.els, self.w = els, w

    def __add__(self, ops):
        ops = tuple(ops)
        return _Ch(self.els + ops, self.w + _cost(ops)) if ops else self


def _longest(into, r, ch):
    cur = into.get(r)
    if cur is None or ch.w > cur.w:
        into[r] = ch


def register_bound(events, kernel, consts, budget, ps, notes) -> int:
    """The II the loop's register recurrences need (1: none above the budget); ``events`` the
    loop body's assignments in order (:meth:`hlsnn.perf.schedule.Kernel._stmt`), ``budget`` the
    clock's ns; a note per array or scalar whose worst register raises it is appended to ``notes``."""
    from ..engines import timing
    loops = Flow(kernel, consts).run(events)
    reg, worst = 1, {}
    for key, ch in loops.items():
        if not ch:
            continue
        floats = any(k == "float" for k, _n in ch)
        divides = any(k == "div" for k, _n in ch)
        mems = sum(n for k, n in ch if k == "mem")
        flat = [e for k, n in ch for e in (_divider(n) if k == "div" else _float_op(n) if k == "float"
                                           else [] if k == "mem" else [(k, n)])]
        t = timing.chain_delay_ns(flat, ps)
        ii = max(1, mems + math.ceil(t / budget))
        base = key.split("[")[0]
        if base not in worst or ii > worst[base][0]:
            worst[base] = (ii, key, t, len(flat), floats, divides, mems)
        reg = max(reg, ii)
    for base, (ii, key, t, n, floats, divides, mems) in worst.items():
        if floats:
            notes.append(f"register {key}: floating-point operators in its loop-back, {t:.1f} ns of "
                         f"combinational path against {budget:.2f} ns -> II {ii}, a lower bound (Vitis's "
                         f"floating-point cores take several cycles each, e.g. an fadd of 11: Xilinx AR 62859)")
        elif divides:
            notes.append(f"register {key}: a division by a run-time value in its loop-back, {t:.1f} ns of "
                         f"combinational path (a restoring array divider) against {budget:.2f} ns -> II {ii}, "
                         f"a lower bound (Vitis's divider cores are sequential, a cycle or more per quotient bit)")
        elif mems:
            notes.append(f"register {key}: {mems} memory read(s) in its loop-back (a cycle each: the address is "
                         f"registered in the RAM) and {t:.1f} ns of logic against {budget:.2f} ns -> II {ii}")
        elif ii > 1:
            notes.append(f"register {key}: {n} operators in its loop-back, {t:.1f} ns against "
                         f"{budget:.2f} ns -> II {ii}")
    return reg


def _divide(divisor, bits, consts):
    """The chain of a division or a remainder by ``divisor``: a power of two is a shift or a mask
    (nothing); another constant a multiplication by its reciprocal (as ``*``); a run-time divisor a
    restoring array divider, one stage per quotient bit, each a ``bits``-wide subtract and the
    select of the remainder (a lower bound: Vitis HLS's divider cores are sequential, a cycle or
    more per bit)."""
    v = consts.value(divisor)
    if v is not None:
        return [] if v > 0 and v & (v - 1) == 0 else [("carry", 2 * bits)]
    return [("div", bits)]            # expanded by register_bound, which says so in its note


def _divider(bits):
    return [("carry", bits), ("lut", 1)] * bits


def _float_op(mant):
    """A floating-point add's combinational path on a ``mant``-bit significand: the alignment shift,
    the add, the leading-zero count, the normalising shift and the rounding add (a lower bound:
    Vitis HLS's floating-point cores are pipelined over several cycles)."""
    lv = max(1, math.ceil(math.log(mant, 4)))
    return [("lut", lv), ("carry", mant + 3), ("lut", lv), ("lut", lv), ("carry", mant)]


def float_mantissa(typ):
    """The significand bits of a floating-point type (None: not one)."""
    t = typ or ""
    for name, m in (("double", 53), ("float", 24), ("half", 11)):
        if re.search(rf"\b{name}\b", t):
            return m
    return None


@functools.lru_cache(maxsize=4096)
def _cost(ops):
    return cost(ops)


def cost(chain):
    """A chain's weight when two are compared (a LUT level 1, a carry chain 1 + bits / 16, a memory
    read a cycle: more than any chain of logic)."""
    w = 0.0
    for k, n in chain:
        if k == "mem":
            w += _MEM_WEIGHT * n
        else:
            for k2, n2 in (_divider(n) if k == "div" else _float_op(n) if k == "float" else [(k, n)]):
                w += n2 if k2 == "lut" else 1 + n2 / 16
    return w
