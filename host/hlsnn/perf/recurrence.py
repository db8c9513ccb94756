"""The ``register`` bound of :mod:`hlsnn.perf.schedule`: a scalar's loop-back chain, operator by operator.

A scalar assigned in a pipelined loop from an expression that reads its own previous value
(``x = f(x, ...)``, ``x op= ...``, ``++x``; not the loop counter) carries the chain from its
register back to it: adders, subtractors and magnitude compares as carry chains of the operand's
width, a select, a logic operator or an equality test as a LUT level, a variable shift as
``log4`` LUT levels, a multiplication as a carry chain of twice the width, a division or remainder
by a run-time value as a restoring array divider (a subtract and a select per quotient bit; by a
power of two nothing, by another constant a multiplication); an assignment under a condition adds
the select; an unrolled inner loop of ``T`` iterations repeats its assignments ``T`` times; a
register that only sums, ``x += a`` under conditions or not, carries one adder (the compiler folds
the conditions into the operands and reassociates integer sums into a tree). A floating-point
register's every add, subtract or compare is a float add's combinational path (alignment shift,
add, leading-zero count, normalising shift, rounding add; never reassociated). The chain is timed
with :mod:`hlsnn.engines.timing`'s operator delays against the clock's budget: II = ceil(delay /
budget). A divider's and a float operator's II is a lower bound, and the note says so: Vitis HLS
implements both as multi-cycle cores whose latency (an fadd of 11 cycles in Xilinx AR 62859) this
model does not know; none of the rendered kernels has either in a loop-back.
"""
from __future__ import annotations

import math
import re

from .cparse import _bits, _children, _kind, _op, _refs


def register_bound(assigns, loop_var, consts, budget, ps, notes) -> int:
    """The II the loop's register recurrences need (1: none above the budget); ``assigns`` the
    loop body's ``(var, rhs cursor or None, op, mult, conditional, type)``, ``budget`` the clock's
    ns; a note per register that raises it is appended to ``notes``."""
    from ..engines import timing
    chains, floats = {}, set()
    for var, rhs, op, mult, cond_, typ in assigns:
        if var == loop_var:
            continue
        bits = _bits(typ, consts)
        ch = chain(var, rhs, op, bits, consts)
        if ch is None:
            chains.pop(var, None)
            continue
        mant = float_mantissa(typ)
        if mant:                  # every arithmetic operator of a floating-point register is a float core
            floats.add(var)
            ch = [e for k, n in ch for e in (_float_op(mant) if k in ("add", "carry") else [(k, n)])]
        if cond_:
            ch = ch + [("lut", 1)]
        chains.setdefault(var, []).extend(ch * max(1, mult))
    reg = 1
    for var, ch in chains.items():
        if not ch:
            continue
        divides = any(k == "div" for k, _n in ch)
        ch = [e for k, n in ch for e in (_divider(n) if k == "div" else [(k, n)])]
        if all(k in ("add", "lut") for k, _n in ch) and any(k == "add" for k, _n in ch):
            # a sum (x += a; x += b; ... under conditions or not): the compiler folds the
            # conditions into the operands and reassociates the integer adds into a tree
            # (LLVM's InstCombine and Reassociate), so one adder is carried
            ch = [("carry", max(n for k, n in ch if k == "add"))]
        ch = [("carry", n) if k == "add" else (k, n) for k, n in ch]
        t = timing.chain_delay_ns(ch, ps)
        ii = max(1, math.ceil(t / budget))
        if var in floats:
            notes.append(f"register {var}: floating-point operators in its loop-back, {t:.1f} ns of "
                         f"combinational path against {budget:.2f} ns -> II {ii}, a lower bound (Vitis's "
                         f"floating-point cores take several cycles each, e.g. an fadd of 11: Xilinx AR 62859)")
        elif divides:
            notes.append(f"register {var}: a division by a run-time value in its loop-back, {t:.1f} ns of "
                         f"combinational path (a restoring array divider) against {budget:.2f} ns -> II {ii}, "
                         f"a lower bound (Vitis's divider cores are sequential, a cycle or more per quotient bit)")
        elif ii > 1:
            notes.append(f"register {var}: {len(ch)} operators in its loop-back, {t:.1f} ns against "
                         f"{budget:.2f} ns -> II {ii}")
        reg = max(reg, ii)
    return reg


def chain(var, rhs, op, bits, consts):
    """The operators between ``var``'s register and its new value (None: the assignment
    does not read ``var``, so it starts a new chain)."""
    base = {"+=": [("add", bits)], "-=": [("add", bits)], "|=": [("lut", 1)], "&=": [("lut", 1)],
            "^=": [("lut", 1)], "<<=": [], ">>=": [], "*=": [("carry", 2 * bits)]}
    if op in ("/=", "%=") and rhs is not None:
        base[op] = _divide(rhs, bits, consts)
    if op != "=":
        extra = path(var, rhs, bits, consts) if rhs is not None else []
        return base.get(op, [("lut", 1)]) + (extra or [])
    if rhs is None or var not in _refs(rhs):
        return None
    return path(var, rhs, bits, consts) or []


def path(var, c, bits, consts):
    """The longest chain of operators from a read of ``var`` up to ``c``."""
    if c is None or var not in _refs(c):
        return []
    k = _kind(c)
    kids = _children(c)
    sub = max((path(var, x, bits, consts) for x in kids), key=cost, default=[])
    if k == "BINARY_OPERATOR":
        op = _op(c)
        if op in ("+", "-"):
            return sub + [("add", bits)]
        if op in ("<", ">", "<=", ">="):
            return sub + [("carry", bits)]
        if op in ("==", "!="):
            return sub + [("lut", 1 + (bits > 6))]
        if op in ("&", "|", "^", "&&", "||"):
            return sub + [("lut", 1)]
        if op in ("<<", ">>"):
            amt = kids[1] if len(kids) > 1 else None
            if amt is not None and consts.value(amt) is None:
                return sub + [("lut", max(1, math.ceil(math.log(max(bits, 2), 4))))]
            return sub
        if op == "*":
            return sub + [("carry", 2 * bits)]
        if op in ("/", "%") and len(kids) > 1:
            return sub + _divide(kids[1], bits, consts)
        return sub
    if k == "CONDITIONAL_OPERATOR":
        return sub + [("lut", 1)]
    if k == "CALL_EXPR":
        name = c.spelling.lower()
        if "max" in name or "min" in name:
            return sub + [("carry", bits), ("lut", 1)]
        if name.startswith("operator"):
            o = name[len("operator"):]
            if o in ("+", "-"):
                return sub + [("add", bits)]
            if o in ("<", ">", "<=", ">="):
                return sub + [("carry", bits)]
            if o in ("==", "!=", "&", "|", "^", "!"):
                return sub + [("lut", 1)]
            if o in ("/", "%"):
                args = [x for x in kids if not x.spelling.startswith("operator")]
                return sub + (_divide(args[-1], bits, consts) if len(args) > 1 else [])
            return sub
        return sub + [("lut", 1)]
    return sub


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


def cost(chain):
    """A chain's weight when two are compared (a LUT level 1, a carry chain 1 + bits / 16)."""
    return sum(n if k == "lut" else 1 + n / 16 for k, n in chain)
