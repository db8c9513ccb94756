"""The ``register`` bound of :mod:`hlsnn.perf.schedule`: a scalar's loop-back chain, operator by operator.

A scalar assigned in a pipelined loop from an expression that reads its own previous value
(``x = f(x, ...)``, ``x op= ...``, ``++x``; not the loop counter) carries the chain from its
register back to it: adders, subtractors and magnitude compares as carry chains of the operand's
width, a select, a logic operator or an equality test as a LUT level, a variable shift as
``log4`` LUT levels; an assignment under a condition adds the select; an unrolled inner loop of
``T`` iterations repeats its assignments ``T`` times; a register that only sums, ``x += a`` under
conditions or not, carries one adder (the compiler folds the conditions into the operands and
reassociates integer sums into a tree). The chain is timed with :mod:`hlsnn.engines.timing`'s
operator delays against the clock's budget: II = ceil(delay / budget).
"""
from __future__ import annotations

import math

from .cparse import _bits, _children, _kind, _op, _refs


def register_bound(assigns, loop_var, consts, budget, ps, notes) -> int:
    """The II the loop's register recurrences need (1: none above the budget); ``assigns`` the
    loop body's ``(var, rhs cursor or None, op, mult, conditional, type)``, ``budget`` the clock's
    ns; a note per register that raises it is appended to ``notes``."""
    from ..engines import timing
    chains = {}
    for var, rhs, op, mult, cond_, typ in assigns:
        if var == loop_var:
            continue
        bits = _bits(typ, consts)
        ch = chain(var, rhs, op, bits, consts)
        if ch is None:
            chains.pop(var, None)
            continue
        if cond_:
            ch = ch + [("lut", 1)]
        chains.setdefault(var, []).extend(ch * max(1, mult))
    reg = 1
    for var, ch in chains.items():
        if not ch:
            continue
        if all(k in ("add", "lut") for k, _n in ch) and any(k == "add" for k, _n in ch):
            # a sum (x += a; x += b; ... under conditions or not): the compiler folds the
            # conditions into the operands and reassociates the integer adds into a tree
            # (LLVM's InstCombine and Reassociate), so one adder is carried
            ch = [("carry", max(n for k, n in ch if k == "add"))]
        ch = [("carry", n) if k == "add" else (k, n) for k, n in ch]
        t = timing.chain_delay_ns(ch, ps)
        ii = max(1, math.ceil(t / budget))
        if ii > 1:
            notes.append(f"register {var}: {len(ch)} operators in its loop-back, {t:.1f} ns against "
                         f"{budget:.2f} ns -> II {ii}")
        reg = max(reg, ii)
    return reg


def chain(var, rhs, op, bits, consts):
    """The operators between ``var``'s register and its new value (None: the assignment
    does not read ``var``, so it starts a new chain)."""
    base = {"+=": [("add", bits)], "-=": [("add", bits)], "|=": [("lut", 1)], "&=": [("lut", 1)],
            "^=": [("lut", 1)], "<<=": [], ">>=": []}
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
            return sub
        return sub + [("lut", 1)]
    return sub


def cost(chain):
    """A chain's weight when two are compared (a LUT level 1, a carry chain 1 + bits / 16)."""
    return sum(n if k == "lut" else 1 + n / 16 for k, n in chain)
