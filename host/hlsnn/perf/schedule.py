"""Every pipelined loop's II, derived from the rendered C++ the way Vitis HLS's scheduler bounds it.

The rendered kernel is parsed by a real C++ front end (libclang's Python bindings, ``pip install
libclang``; the ``dev`` extra) with the C-simulation's include paths. ``#pragma HLS`` lines are
preprocessor directives clang keeps out of the AST: each is read from its source line and given to
the innermost loop (or function) of the AST whose body holds that line. For every loop with
``#pragma HLS PIPELINE`` the II is the largest of these bounds (``bound`` names the one that sets
it; ``notes`` says why):

``pragma``
    the pragma's ``II`` (1 when none is given).
``ports``
    resources: per memory bank, the accesses one iteration makes (inner loops are unrolled by the pipeline: an
    access in an inner loop of ``T`` iterations is ``T`` accesses, unless the array is partitioned on the dimension
    that loop's variable indexes; ``cyclic F``: index i in bank i % F; ``block F`` of a dimension of N: consecutive
    blocks of N // F, the last holding the rest) against its ports (UG1448 "Resource Constraints"): the storage of
    ``BIND_STORAGE`` or ``HLSNN_MEM`` (``ram_1p``/``kRam1p`` one port, ``ram_s2p``/``kRamS2p`` one read and one
    write, ``ram_2p`` one read or write and one read, ``ram_t2p``/``kRamT2p`` two; an array with no storage
    declared: two, Vitis picks a dual-port RAM). ``ARRAY_PARTITION ... complete`` of every dimension makes registers
    (no port limit). ``ARRAY_RESHAPE ... complete`` of a dimension makes its elements one word: accesses that differ
    only in that dimension's index are one access. A stream (``hls::stream``, ``hlsnn::Fifo``) takes one read and
    one write a cycle, each unrolled copy of an access its own; so does an ``m_axi`` bundle, whatever ports it holds
    (UG1399 "M_AXI Bundles"; ports with no ``bundle`` share ``gmem0``). Identical accesses (same array, same index
    text, same unrolled copy) count once; accesses in exclusive branches count each (:mod:`hlsnn.perf.model`'s
    rule).
``dependence``
    an array read and written in the loop body at a run-time index (not the same index of the loop's own counter on
    both sides) is a loop-carried dependence at distance 1 unless the loop declares ``#pragma HLS DEPENDENCE
    variable = X inter false`` (or ``inter RAW false``), or ``intra RAW false`` where a write of X comes before a
    read of it in the iteration (UG1399's histogram: the II 2 is that ordering); a ``WAR``/``WAW`` or ``true``
    pragma leaves it, and an ``inter ... distance = d`` divides it: II >= ceil((store stage - load stage + 1) / d),
    the stages' difference + 1 being the loop's pipeline depth (the engine page's ``Loop.depth``, the network
    models' depth constants; :data:`DEFAULT_DEPTH` for a loop none lists). With the pragma the kernel must declare
    ``HLSNN_MEM(X, kind, d)`` with ``d > 0`` (the strict C-simulation checks ``d``); else the note says "unchecked".
``register``
    a register (a scalar of the loop's function declared outside the loop, not the loop counter,
    or an element of such an array that is registers: ``ARRAY_PARTITION ... complete``) whose value
    the iteration computes from its own previous value, through any temporaries of the iteration
    (``a0 = first ? 0 : acc[l]; a0 += p; acc[l] = a0``): the chain from its register back to it,
    operator by operator along the AST, every unrolled copy of an inner loop in turn, costed and
    timed by the rules of :mod:`hlsnn.perf.recurrence` (sums as written; a divider's and a float
    operator's II a lower bound): II = the memory reads on it + ceil(delay / budget).
``m_axi``
    an access to an ``m_axi`` port under a condition or at an index that is not affine in the
    loop's counter cannot be inferred as a burst: each is a single transaction, and with
    :data:`AXI_OUTSTANDING` transactions in flight (Vitis's ``num_read_outstanding`` default) of
    :data:`hlsnn.engines.network.perf.DDR_LATENCY` cycles each, II >= ceil(latency / outstanding).

Only the loops of functions the kernel's tops (those declaring ``INTERFACE`` pragmas) call, directly or
through others, are scheduled (:func:`~hlsnn.perf.cparse.reached`): Vitis HLS synthesizes nothing else, so
an uncalled helper (``IsqrtBits`` of ``hlsnn/primitives.h``) sets no II. A source without a top: every loop.

It is a model of the scheduler's bounds, not the scheduler: it does not see operator chaining
beyond the register chains above, nor a bound a called function's own pipeline sets. Calls to
functions of the project are followed (three levels deep) with their reference parameters renamed
to the caller's arguments and a function template's integral arguments bound, so a helper's
accesses count in the loop that calls it; a local reference or pointer to an array (``int
(&row)[N] = buf[i]``) is renamed the same way.
"""
from __future__ import annotations

import functools
import hashlib
import math
import re
from pathlib import Path

from . import recurrence
from .cparse import (_MEMO, _Consts, _Loop, _children, _id, _instantiation_file, _kind, _op, _pragmas, _renamed, _root,
                     _strip, _text, _tokens, _trip, affine_index, cindex, declared_dims, names_read, parse_args,
                     plain_data, reached, template_args)
from .hlsrules import block_bank, port_ii, raw_pragma
from .schedule_rows import format_table, ii_of, layer_depths  # noqa: F401  (the module's API)

#: the recurrence of a carried memory dependence where no depth constant names the loop: a BRAM read (one
#: cycle of latency) and the store of the value computed from it in the next cycle (store 1 - load 0 + 1)
DEFAULT_DEPTH = 2
#: AXI transactions in flight per m_axi adapter (Vitis HLS ``num_read_outstanding`` and
#: ``num_write_outstanding`` default, UG1399 "INTERFACE pragma")
AXI_OUTSTANDING = 16
#: bumped when the analysis changes (the disk cache's key)
VERSION = 13

_LOOPS = ("FOR_STMT", "WHILE_STMT", "DO_STMT")
#: the overloaded assignments of ap_int and friends (an assignment to a class-typed element)
_ASSIGN_OPS = ("operator=", "operator+=", "operator-=", "operator|=", "operator&=", "operator^=", "operator<<=",
               "operator>>=")


class Kernel:
    """A parsed rendered kernel: its loops, pragmas and declarations."""

    def __init__(self, path, include_dirs=(), name=None):
        ci = cindex()
        for m in _MEMO:
            m.clear()
        path = Path(path)
        self.path, self.name = path, name or path.stem
        self.folder = str(path.parent.resolve())
        from .schedule_pch import parse        # the headers from a precompiled header
        self.tu = parse(ci, path, parse_args(path.parent, include_dirs))
        errs = [d for d in self.tu.diagnostics if d.severity >= 3]
        if errs:
            raise ValueError(f"{path}: the C++ front end failed: {errs[0]}")
        self.loops, self.funcs, mine, self.loop_vars = [], {}, [], set()
        self._in_folder = {}              # file handle -> (name, under the rendered folder): resolved once
        self._text_of = {}                # file name -> its bytes (cparse.plain_data)
        self._reads_of = {}               # cursor -> the names it reads (:meth:`_reads`)
        self._counters_of = {}            # id of a loop of self.loops -> its counters (:meth:`_counters`)
        self.files, self._dims_of = set(), {}
        self._untripped = []              # inner loops of the loop being walked whose trip count is unknown
        self._order = []                  # (array, "r"/"w", source offset, call depth) of its accesses
        self.decls = {}                   # name -> its declarations of the rendered folder (arrays' sizes)
        self._walk(self.tu.cursor, None, None, None, mine)
        self.consts = _Consts(self.tu)
        self.consts.collect(mine)
        self.pragmas = _pragmas(sorted(self.files))
        self.var_pragmas = {}          # variable -> {"partition": [(dim, type, factor)], "storage": type}
        self.m_axi, self.streams, self.global_pragmas = set(), set(), []
        self.bundle = {}               # m_axi port -> its bundle (UG1399: none named -> gmem0)
        for p in self.pragmas:
            loop = self._innermost(p.file, p.line)
            if p.name in ("PIPELINE", "UNROLL", "DEPENDENCE", "LOOP_TRIPCOUNT", "LOOP_FLATTEN") and loop is not None:
                loop.pragmas.append(p)
            elif p.name == "DEPENDENCE":
                self.global_pragmas.append(p)    # function scope: every loop of the (inlined) function
            elif p.name == "ARRAY_PARTITION":
                v = p.kv.get("variable")
                kind = p.kv.get("type") or next((f for f in ("complete", "cyclic", "block") if f in p.flags),
                                                "complete")
                self.var_pragmas.setdefault(v, {}).setdefault("partition", []).append(
                    (int(p.kv.get("dim", 1)), kind, int(p.kv.get("factor", 0) or 0)))
            elif p.name == "ARRAY_RESHAPE" and {"cyclic", "block"}.isdisjoint({*p.flags, p.kv.get("type")}):
                self.var_pragmas.setdefault(p.kv["variable"], {}).setdefault("reshape", set()).add(int(p.kv.get("dim", 1)))
            elif p.name == "BIND_STORAGE":
                self.var_pragmas.setdefault(p.kv.get("variable"), {})["storage"] = p.kv.get("type", "").lower()
            elif p.name == "INTERFACE" and ("m_axi" in p.flags or p.kv.get("mode") == "m_axi"):
                self.m_axi.add(p.kv.get("port"))
                self.bundle[p.kv.get("port")] = p.kv.get("bundle") or "gmem0"
        self.mems = self._mems()

    def _file_of(self, ch):
        """``(file name, under the rendered folder)`` of a cursor's location (None: no file), by
        the file's handle: the bindings' ``location.file.name`` costs three calls a cursor."""
        loc = ch.location
        f = _instantiation_file(loc)
        if f is None:
            return None
        got = self._in_folder.get(f)
        if got is None:
            name = loc.file.name
            got = self._in_folder[f] = (name, str(Path(name).resolve()).startswith(self.folder))
        return got

    def _walk(self, c, label, func, loop, mine):
        for ch in c.get_children():
            got = self._file_of(ch)
            if got is None:
                continue
            name, mine_file = got
            if not mine_file:
                continue
            self.files.add(name)
            mine.append(ch)
            k = _kind(ch)
            if k in ("FUNCTION_DECL", "FUNCTION_TEMPLATE", "CXX_METHOD") and ch.is_definition():
                self.funcs.setdefault(ch.spelling, ch)
                self._walk(ch, None, ch, None, mine)
            elif k == "LABEL_STMT":
                self._walk(ch, ch.spelling, func, loop, mine)
            elif k in _LOOPS:
                lp = _Loop(ch, label or f"{func.spelling if func else '?'}:{ch.location.line}", func, loop)
                self.loops.append(lp)
                if lp.var_decl is not None:
                    self.loop_vars.add(_id(lp.var_decl))
                self._walk(ch, None, func, lp, mine)
            elif k == "INIT_LIST_EXPR" and plain_data(self._text_of, name, ch):
                continue
            else:
                if k in ("VAR_DECL", "PARM_DECL", "FIELD_DECL"):
                    self.decls.setdefault(ch.spelling, []).append(ch)
                self._walk(ch, None, func, loop, mine)

    def _innermost(self, file, line):
        best = None
        for lp in self.loops:
            if lp.file == file and lp.lines[0] <= line <= lp.lines[1]:
                if best is None or lp.lines[0] >= best.lines[0]:
                    best = lp
        return best

    def _mems(self):
        """``{name: (kind, distance)}`` of the HLSNN_MEM declarations (their tokens: the macro
        is empty outside the strict C-simulation)."""
        out = {}
        for f in sorted(self.files):
            text = re.sub(r"//[^\n]*", "", Path(f).read_text(errors="replace"))
            for m in re.finditer(r"HLSNN_MEM\s*\(\s*([A-Za-z_]\w*)[^,]*,\s*(?:hlsnn::)?(\w+)\s*,\s*([^)]*)\)", text):
                if m.group(1) == "var":
                    continue                     # the macro's own definition
                d = m.group(3).strip()
                dv = int(d) if re.fullmatch(r"\d+", d) else self.consts.by_name.get(d.split("::")[-1])
                out[m.group(1)] = (m.group(2).lower(), dv)
        return out

    # ------------------------------------------------------------------- per pipelined loop
    def schedule(self, depths=None, clock_mhz=100.0, ps="zynq7", ddr_latency=None):
        if ddr_latency is None:
            from ..engines.network.perf import DDR_LATENCY as ddr_latency
        rows = []
        live = reached(self.funcs, self.pragmas)   # the functions the tops call (module docstring)
        for lp in self.loops:
            pp = lp.pipeline
            if pp is None or (live is not None and (lp.func is None or lp.func.spelling not in live)):
                continue
            rows.append(self._loop(lp, pp, depths or {}, clock_mhz, ps, ddr_latency))
        for m in _MEMO:
            m.clear()                            # the translation unit is not kept alive by the memo
        return rows

    def _loop(self, lp, pp, depths, clock_mhz, ps, ddr_latency):
        from ..engines import timing
        target = int(pp.kv.get("ii", 1) or 1)
        acc = []      # (name, [index cursors], rw, mult, spread_vars, conditional, unroll_vars, ctx)
        assigns = []  # the iteration's assignments in order (:meth:`_set`) and its unrolled loops' markers
        self._untripped, self._order = [], []
        self._body(lp, lp.body, acc, assigns, mult=1, unroll=(), cond=(), rename={}, depth=0)
        notes, bounds = [], {"pragma": target}
        for label in dict.fromkeys(self._untripped):
            notes.append(f"inner loop {label}: trip count not known to the model, counted once (Vitis HLS unrolls "
                         f"it only with a constant bound, UG1399 'Function Pipelining')")
        # ------------------------------------------------------------- ports
        banks = self._banks(acc)
        need = 1
        for name, b in banks.items():
            ii = 1
            for bank in set(b["r"]) | set(b["w"]):
                r, w = len(b["r"].get(bank, ())), len(b["w"].get(bank, ()))
                iib = port_ii(b["kind"], r, w)
                if iib > ii:
                    ii, worst = iib, (bank, r, w)
            if ii > 1:
                bank, r, w = worst
                where = f"{name}{''.join(f'[{x}]' for x in bank)}" if bank else name
                notes.append(f"{where} ({b['kind']}): {r} reads, {w} writes per iteration -> II {ii}")
            need = max(need, ii)
        bounds["ports"] = need
        # ------------------------------------------------------------- carried memory dependences
        dep = 1
        said = {}                          # variable -> [(type, "false" or a distance)]
        for p in lp.pragmas + self.global_pragmas:
            got = raw_pragma(p) if p.name == "DEPENDENCE" else None
            if got is not None:
                said.setdefault(p.kv.get("variable"), []).append(got)
        for name, b in banks.items():
            if b["kind"] in ("stream", "m_axi") or not b["r"] or not b["w"]:
                continue
            ri = {t for v in b["r"].values() for t in v}
            wi = {t for v in b["w"].values() for t in v}
            own = lp.var
            same = (len(ri | wi) == 1 and bool(own)
                    and any(isinstance(x, tuple) and own in x[0].split() for x in next(iter(ri))))
            if same or not b["runtime"]:
                continue                     # a[i] read and written at the loop counter's own index
            says = said.get(name, [])
            if ("intra", "false") in says and ("inter", "false") not in says and self._write_first(lp, name):
                notes.append(f"{name}: DEPENDENCE intra RAW false: its write before its read in the iteration "
                             f"is declared apart (UG1399 'Removing False Dependencies')")
                continue
            if ("inter", "false") in says:
                mem = self.mems.get(name)
                if mem is None or not mem[1]:
                    notes.append(f"{name}: DEPENDENCE inter false, unchecked (no HLSNN_MEM({name}, kind, d) with d > 0)")
                else:
                    notes.append(f"{name}: DEPENDENCE inter false, distance {mem[1]} checked by the strict csim")
                continue
            d = depths.get(lp.label, DEFAULT_DEPTH)
            dist = max([e for t, e in says if t == "inter" and e != "false"] or [1])
            if dist > 1:
                notes.append(f"{name}: carried dependence at distance {dist} (DEPENDENCE): "
                             f"II >= ceil(depth {d} / {dist})")
            else:
                notes.append(f"{name}: read and written at run-time indices, no DEPENDENCE pragma: carried "
                             f"dependence, II >= depth {d}")
            dep = max(dep, math.ceil(d / dist))
        bounds["dependence"] = dep
        # ------------------------------------------------------------- register recurrences
        budget = timing.budget_ns(clock_mhz)
        self._loop_banks = banks
        bounds["register"] = recurrence.register_bound(assigns, self, self.consts, budget, ps, notes)
        # ------------------------------------------------------------- m_axi
        axi = 1
        for name, idx, rw, mult, uvars, cond_, key in acc:
            if name not in self.m_axi:
                continue
            why = "under a condition" if cond_ else None
            if why is None and not all(affine_index(ix) for ix in idx):
                why = "at an index not affine in the loop counter"
            if why:
                ii = math.ceil(ddr_latency / AXI_OUTSTANDING)
                notes.append(f"m_axi {name}: {'read' if rw == 'r' else 'write'} {why}: no burst, "
                             f"single transactions -> II {ii}")
                axi = max(axi, ii)
        bounds["m_axi"] = axi
        ii = max(bounds.values())
        bound = next(k for k, v in bounds.items() if v == ii)
        return {"kernel": self.name, "loop": lp.label, "counter": self._counter(lp),
                "counters": self._counters(lp) or [lp.label], "ii": ii, "bound": bound, "target_ii": target,
                "bounds": bounds, "notes": notes, "line": lp.c.location.line,
                "file": Path(lp.file).name}

    def _banks(self, acc):
        """``{array: {"kind", "r": {bank: {address keys}}, "w": ..., "runtime"}}``: every unrolled
        copy of every access, its bank (the partitioned dimensions' indices evaluated, ``*`` where
        run-time) and its address (identical addresses of a bank merge into one access); copies
        whose conditions on unrolled counters are false are dropped. Arrays all of whose accesses
        have constant indices per copy, with no storage declared, are registers (Vitis partitions
        them) and left out; so are completely partitioned arrays. The ``m_axi`` ports are counted per
        bundle (``m_axi <bundle>``: one read and one write channel, one bank)."""
        import itertools
        per = {}
        for name, idx, rw, mult, uvars, cond_, key in acc:
            port = name
            if name in self.m_axi:             # a bundle: one read and one write channel
                kind, name = "m_axi", f"m_axi {self.bundle.get(name, 'gmem0')}"
            elif self._registers(name, len(idx)):
                continue                       # registers: no ports, no bank
            else:
                kind = self._storage(name)
            uv = [(v, t) for v, t in uvars if v and t]
            n = 1
            for _v, t in uv:
                n *= t
            envs = ([dict(zip([v for v, _t in uv], vals)) for vals in itertools.product(*[range(t) for _v, t in uv])]
                    if n <= 4096 else [{}])
            pl, rs = (self.var_pragmas.get(name, {}).get(k, ()) for k in ("partition", "reshape"))   # rs: reshaped dims
            blk = {}
            if kind == "stream":
                parts, cyc = set(range(1, len(idx) + 1)), {}
            elif kind == "m_axi":
                parts, cyc = set(), {}
            else:
                parts, cyc = {d for d, _t, _f in pl}, {d: f for d, t, f in pl if t == "cyclic" and f}
                dims = self._dims(name)
                blk = {d: (f, dims[d - 1] if d <= len(dims) else 0)
                       for d, t, f in pl if t == "block" and f}
            e = per.setdefault(name, {"kind": kind, "r": {}, "w": {}, "runtime": False, "static": True})
            for env in envs:
                if any(pol is not None and self.consts.value(cc, env=env) is not None
                       and bool(self.consts.value(cc, env=env)) != pol for cc, pol in cond_):
                    continue
                vals = [self.consts.value(ix, env=env) for ix in idx]
                if any(v is None for v in vals):
                    e["static"] = False
                bank = tuple(("*" if vals[d - 1] is None else vals[d - 1] % cyc[d] if d in cyc
                              else block_bank(vals[d - 1], *blk[d]) if d in blk else vals[d - 1])
                             for d in sorted(parts) if d <= len(idx))      # cyclic F: element i in bank i % F
                addr = tuple(v if v is not None else (_text(ix), tuple(sorted((k, x) for k, x in env.items()
                                                                             if k in self._reads(ix))))
                             for d, (v, ix) in enumerate(zip(vals, idx), 1) if d not in rs)
                if kind == "stream":           # every stream read/write is its own beat, each unrolled copy too
                    addr = (addr, key, tuple(sorted(env.items())))
                elif kind == "m_axi":
                    addr = (port, addr)
                if any(v is None for d, v in enumerate(vals, 1) if d not in parts):
                    e["runtime"] = True
                e[rw].setdefault(bank, set()).add(addr)
        return {k: v for k, v in per.items()
                if not (v["kind"] == "default" and v["static"])}

    def _dims(self, name):
        """The declared sizes of array ``name``'s dimensions (:func:`~hlsnn.perf.cparse.declared_dims`)."""
        if name not in self._dims_of:
            self._dims_of[name] = declared_dims(self.decls.get(name, ()), name, self.consts)
        return self._dims_of[name]

    def _reads(self, c):
        """:meth:`_deps` of ``c``, once per cursor (:meth:`_banks` asks every unrolled copy)."""
        got = self._reads_of.get(c)
        if got is None:
            got = self._reads_of[c] = frozenset(names_read(c))
        return got

    def _counter(self, lp):
        """The loop's counter name (``HLSNN_ITER(Name, ...)`` / ``HLSNN_ITER_AT(Name, ...)`` in
        its body: the name the cycle models count it by), else its label."""
        names = self._counters(lp)
        return lp.label if lp.label in names or not names else names[0]

    def _counters(self, lp):
        """Every counter named in the loop's own body (not in a loop nested in it): a loop that
        runs two modes (bfp ``Steps`` and ``GemvSteps``) counts its iterations under each."""
        got = self._counters_of.get(id(lp))
        if got is not None:
            return list(got)
        inner = [(x.c.extent.start.offset, x.c.extent.end.offset) for x in self.loops
                 if x.parent is lp]
        toks = list(lp.body.get_tokens())
        out = []
        for i, t in enumerate(toks[:-2]):
            if t.spelling in ("HLSNN_ITER", "HLSNN_ITER_AT") and toks[i + 1].spelling == "(":
                o = t.extent.start.offset          # a token's offset is asked only of a counter's name
                if not any(a <= o <= b for a, b in inner) and toks[i + 2].spelling not in out:
                    out.append(toks[i + 2].spelling)
        self._counters_of[id(lp)] = tuple(out)
        return out

    def _write_first(self, lp, name):
        """Whether a write of ``name`` comes before a read of it in the loop's own body (source order,
        a store after its operands): a read-after-write within one iteration."""
        w = [o for n, rw, o, d in self._order if n == name and rw == "w" and d == 0]
        return bool(w) and any(o > min(w) for n, rw, o, d in self._order if n == name and rw == "r" and d == 0)

    def _registers(self, name, ndims):
        """Whether array ``name`` accessed with ``ndims`` indices is registers (no ports, no bank)."""
        kind = self._storage(name)
        if name in self.m_axi or kind == "stream":
            return False
        pl = self.var_pragmas.get(name, {}).get("partition", [])
        return (kind == "regs"
                or ndims > 0 and all(any(d == dd and t == "complete" for dd, t, _f in pl) for d in range(1, ndims + 1)))

    def _storage(self, name):
        vp = self.var_pragmas.get(name, {})
        parts = vp.get("partition", [])
        if any(d == 0 and t == "complete" for d, t, _f in parts):
            return "regs"
        if vp.get("storage") in ("fifo",) or name in self.streams:
            return "stream"
        if name in self.mems:
            k = self.mems[name][0]
            if k == "kregs":
                return "regs"
            return k
        return vp.get("storage") or "default"

    def _body(self, lp, c, acc, assigns, mult, unroll, cond, rename, depth):
        """Collect the accesses and assignments of one iteration under ``c``: each of its children
        as a statement (:meth:`_stmt`)."""
        for ch in c.get_children():
            self._stmt(lp, ch, acc, assigns, mult, unroll, cond, rename, depth)

    def _stmt(self, lp, ch, acc, assigns, mult, unroll, cond, rename, depth):
        """Collect the accesses and assignments of the statement (or expression) ``ch``. A branch of
        an ``if`` is one statement, whatever its kind: a braced block, another ``if`` (``else if``:
        its condition joins the conditions of its branches) or a single expression (``if (c) a[i] =
        v;``: a write of ``a``, not the reads of its parts)."""
        k = _kind(ch)
        if k in _LOOPS:
            inner = next((x for x in self.loops if x.c == ch), None)
            if inner is not None and inner.pipeline is not None:
                return                           # its own row
            t = _trip(inner, self.consts) if inner is not None else None
            var = inner.var if inner is not None else None
            n0, a0 = len(acc), len(assigns)
            assigns.append(("loop", var if t else None, t or 1))
            self._body(lp, ch, acc, assigns, mult * (t or 1), unroll + ((var, t or 1),), cond, rename, depth)
            assigns.append(("end",))
            if t is None and (any(e[0] == "set" and e[6] for e in assigns[a0:])
                              or any(not self._registers(x[0], len(x[1])) for x in acc[n0:])):
                # counted once, and it reaches a memory, a stream, a port or a carried register: the note says so
                self._untripped.append(inner.label if inner is not None else f"line {ch.location.line}")
            return
        if k == "DECL_STMT" and self._aliases(lp, ch, acc, assigns, mult, unroll, cond, rename, depth):
            return
        if k == "DECL_STMT":
            self._body(lp, ch, acc, assigns, mult, unroll, cond, rename, depth)
            for v in _children(ch):              # a temporary of the iteration: its initial value
                if _kind(v) == "VAR_DECL" and "[" not in (v.type.spelling if v.type else "[") \
                        and self._scope(v, lp, scalar=True) == "temp":
                    init = [x for x in _children(v) if _kind(x) not in ("TYPE_REF", "NAMESPACE_REF", "TEMPLATE_REF")]
                    self._set(assigns, ("var", v.spelling), init[-1] if init else None, "=", cond, v.type, False)
            return
        if k == "IF_STMT":
            kids = _children(ch)
            if kids:
                self._expr(lp, kids[0], acc, assigns, mult, unroll, cond, rename, depth)
            for x, pol in zip(kids[1:], (True, False)):
                self._stmt(lp, x, acc, assigns, mult, unroll, cond + ((kids[0], pol),), rename, depth)
            return
        if k in ("SWITCH_STMT",):
            self._body(lp, ch, acc, assigns, mult, unroll, cond + ((ch, None),), rename, depth)
            return
        if k.endswith("_STMT") and k not in ("DECL_STMT", "RETURN_STMT"):
            self._body(lp, ch, acc, assigns, mult, unroll, cond, rename, depth)
            return
        self._expr(lp, ch, acc, assigns, mult, unroll, cond, rename, depth)

    def _aliases(self, lp, decl, acc, assigns, mult, unroll, cond, rename, depth):
        """A declaration of references or pointers to arrays (``int (&row)[N] = buf[i]``, ``const int
        *p = buf[i]``): each becomes another name of the array in ``rename`` (no access: only its
        indices are read). False when the declaration declares anything else."""
        got = []
        for v in _children(decl):
            t = v.type.spelling if _kind(v) == "VAR_DECL" and v.type else ""
            init = [x for x in _children(v) if _kind(x) not in ("TYPE_REF", "NAMESPACE_REF", "TEMPLATE_REF")]
            x = _strip(init[-1]) if init and ("&" in t or "*" in t) else None
            if x is None or "[" not in (x.type.spelling if x.type else ""):
                return False                     # not an array's other name
            kx = _kind(x)
            r = _root(x) if kx == "ARRAY_SUBSCRIPT_EXPR" else (x.spelling, []) if kx == "DECL_REF_EXPR" else None
            if r is None:
                return False
            got.append((v.spelling, r))
        for name, r in got:
            rename[name] = _renamed(r, rename)
            for ix in r[1]:
                self._expr(lp, ix, acc, assigns, mult, unroll, cond, rename, depth)
        return bool(got)

    def _expr(self, lp, c, acc, assigns, mult, unroll, cond, rename, depth):
        k = _kind(c)
        key = tuple(unroll)
        if k == "CONDITIONAL_OPERATOR":
            kids = _children(c)
            self._expr(lp, kids[0], acc, assigns, mult, unroll, cond, rename, depth)
            for x, pol in zip(kids[1:], (True, False)):
                self._expr(lp, x, acc, assigns, mult, unroll, cond + ((kids[0], pol),), rename, depth)
            return
        if k in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR") or (k == "CALL_EXPR" and c.spelling in _ASSIGN_OPS):
            kids = _children(c)
            op = _op(c) if k != "CALL_EXPR" else c.spelling[len("operator"):]
            if op.endswith("=") and op not in ("==", "!=", "<=", ">=") and len(kids) >= 2:
                pass
            else:
                kids = []
            if len(kids) >= 2 and (k != "CALL_EXPR" or len([x for x in kids if not x.spelling.startswith("operator")]) >= 2):
                if k == "CALL_EXPR":             # an overloaded operator: drop the operator's own reference
                    kids = [x for x in kids if not x.spelling.startswith("operator")] or kids
                lhs, rhs = kids[0], kids[-1]
                lhs_s = _strip(lhs)
                r = _root(lhs_s)
                if r is not None:
                    name, idx = _renamed(r, rename)
                    scope = self._scope(self._array_decl(lhs_s), lp) if name == r[0] else None
                    if scope is not None and (scope == "temp" or self._registers(name, len(idx))):
                        self._set(assigns, ("arr", name, idx), rhs, op, cond, lhs_s.type, scope == "carried")
                    acc.append((name, idx, "w", mult, unroll, cond, key))
                    self._order.append((name, "w", c.extent.end.offset, depth))   # stored after its operands
                    if op != "=":
                        acc.append((name, idx, "r", mult, unroll, cond, key))
                    for ix in idx:
                        self._expr(lp, ix, acc, assigns, mult, unroll, cond, rename, depth)
                elif _kind(lhs_s) == "DECL_REF_EXPR" and self._scope(lhs_s.referenced, lp, scalar=True):
                    self._set(assigns, ("var", lhs_s.spelling), rhs, op, cond, lhs_s.type,
                              self._scope(lhs_s.referenced, lp, scalar=True) == "carried")
                else:
                    self._expr(lp, lhs, acc, assigns, mult, unroll, cond, rename, depth)
                self._expr(lp, rhs, acc, assigns, mult, unroll, cond, rename, depth)
                return
        if k == "UNARY_OPERATOR" and _op(c) in ("++", "--"):
            x = _strip(_children(c)[0]) if _children(c) else None
            if x is not None and _kind(x) == "DECL_REF_EXPR" and self._scope(x.referenced, lp, scalar=True):
                self._set(assigns, ("var", x.spelling), None, "+=", cond, x.type,
                          self._scope(x.referenced, lp, scalar=True) == "carried")
                return
        r = _root(c) if k in ("ARRAY_SUBSCRIPT_EXPR", "CALL_EXPR") else None
        if r is not None:
            name, idx = _renamed(r, rename)
            acc.append((name, idx, "r", mult, unroll, cond, key))
            self._order.append((name, "r", c.extent.start.offset, depth))
            for ix in idx:
                self._expr(lp, ix, acc, assigns, mult, unroll, cond, rename, depth)
            return
        if k == "CALL_EXPR":
            kids = _children(c)
            callee = c.referenced
            if c.spelling in ("read", "write", "read_nb", "write_nb", "empty", "full") and kids:
                obj = _strip(kids[0])
                if _kind(obj) == "MEMBER_REF_EXPR" and _children(obj):
                    obj = _strip(_children(obj)[0])
                r = _root(obj) if _kind(obj) == "ARRAY_SUBSCRIPT_EXPR" else None
                if r is not None:
                    base, sidx = _renamed(r, rename)
                elif _kind(obj) in ("DECL_REF_EXPR", "MEMBER_REF_EXPR"):
                    base, sidx = _renamed((obj.spelling, []), rename)
                else:
                    base, sidx = None, []
                if base and c.spelling in ("read", "write", "read_nb", "write_nb"):
                    rw = "r" if c.spelling.startswith("read") else "w"
                    acc.append((base, sidx, rw, mult, unroll, cond, (key, c.extent.start.offset)))
                    self.streams.add(base)
                for ix in sidx:
                    self._expr(lp, ix, acc, assigns, mult, unroll, cond, rename, depth)
                for x in kids[1:]:
                    self._expr(lp, x, acc, assigns, mult, unroll, cond, rename, depth)
                return
            elif (callee is not None and depth < 3 and callee.spelling in self.funcs
                  and not ("constexpr" in _tokens(self.funcs[callee.spelling])[:4]    # the compiler evaluates it
                           and all(self.consts.value(x) is not None for x in kids[1:]))):
                fn = self.funcs[callee.spelling]
                params = [x.spelling for x in fn.get_children() if _kind(x) == "PARM_DECL"]
                args = [x for x in kids[1:]] if len(kids) > len(params) else kids
                sub = dict(rename)
                for p_, a in zip(params, args):
                    a_ = _strip(a)
                    if _kind(a_) == "DECL_REF_EXPR":
                        sub[p_] = _renamed((a_.spelling, []), rename)
                    elif _kind(a_) == "ARRAY_SUBSCRIPT_EXPR" and _root(a_) is not None:
                        sub[p_] = _renamed(_root(a_), rename)     # an element of an array of memories
                body = [x for x in fn.get_children() if _kind(x) == "COMPOUND_STMT"]
                if body:
                    outer = self.consts.tparams
                    self.consts.tparams = template_args(callee, fn)
                    try:
                        self._body(lp, body[-1], acc, assigns, mult, unroll, cond, sub, depth + 1)
                    finally:
                        self.consts.tparams = outer
        for x in c.get_children():
            self._expr(lp, x, acc, assigns, mult, unroll, cond, rename, depth)

    def _set(self, assigns, target, rhs, op, cond, typ, carried):
        """An assignment of the iteration, for :class:`~hlsnn.perf.recurrence.Flow`: ``("set", target,
        rhs or None, op, conditions, (bits, float mantissa or None), carried)``, ``target`` ``("var",
        name)`` or ``("arr", name, index cursors)``."""
        assigns.append(("set", target, rhs, op, cond,
                        (recurrence.type_bits(typ, self.consts), recurrence.type_mantissa(typ)), carried))

    def memory(self, name, ndims):
        """Whether array ``name`` is a memory of the loop being derived (a read takes a cycle): it
        has banks (not registers, not a stream) or is an ``m_axi`` port."""
        b = getattr(self, "_loop_banks", {}).get(name)
        return name in self.m_axi or (b is not None and b["kind"] != "stream")

    def _array_decl(self, c):
        """The declaration of the array an access ``a[i][j]`` reads (None: not a named array)."""
        while _kind(c) == "ARRAY_SUBSCRIPT_EXPR" and _children(c):
            c = _strip(_children(c)[0])
        return c.referenced if _kind(c) == "DECL_REF_EXPR" else None

    def _scope(self, d, lp, scalar=False):
        """``carried`` (declared in the loop's function outside the loop body: its value is carried
        from one iteration to the next), ``temp`` (declared in the body: the iteration's own) or None
        (a parameter, a constant, the loop counter, a stream, another function's local); ``scalar``:
        only a scalar counts."""
        if d is None or _kind(d) != "VAR_DECL":
            return None
        t = d.type.spelling if d.type else ""
        if ("[" in t) == scalar or "stream" in t or "Fifo" in t or _id(d) in self.loop_vars:
            return None
        f = d.location.file
        if f is None or lp.func is None or f.name != lp.file:
            return None
        s, e = lp.body.extent.start.offset, lp.body.extent.end.offset
        o = d.extent.start.offset
        if not lp.func.extent.start.offset <= o <= lp.func.extent.end.offset:
            return None
        return "temp" if s <= o <= e else "carried"


def source_schedule(path, *, name=None, depths=None, clock_mhz=100.0, ps="zynq7", include_dirs=(), cache=True):
    """The schedule rows (module docstring) of every pipelined loop of the rendered C++ file
    ``path`` (its folder holds the rendered headers)."""
    path = Path(path)
    h = hashlib.sha256(f"{VERSION} {name} {sorted((depths or {}).items())} {clock_mhz} {ps}".encode())
    for f in sorted(path.parent.rglob("*")):
        if f.is_file() and f.suffix in (".cpp", ".h", ".inc", ".hpp"):
            h.update(f.name.encode() + f.read_bytes())
    key = h.hexdigest()[:32]
    return _cached(key, str(path), name, tuple(sorted((depths or {}).items())), clock_mhz, ps, tuple(include_dirs),
                   cache)


@functools.lru_cache(maxsize=64)
def _cached(key, path, name, depths, clock_mhz, ps, include_dirs, cache):
    def derive():
        return Kernel(path, include_dirs, name).schedule(dict(depths), clock_mhz, ps)
    if not cache:
        return derive()
    from .schedule_pch import cache_dir, load_or_derive
    return load_or_derive(cache_dir() / f"{key}.json", derive)


def config_schedule(cfg) -> list:
    """The schedule of the layer kernel of config ``cfg`` (a :class:`~hlsnn.config.Config`)."""
    return [dict(r) for r in _config_schedule_cfg(cfg)]


_CFG_MEMO = {}


def _config_schedule_cfg(cfg):
    key = cfg.sha
    if key not in _CFG_MEMO:
        import tempfile
        from ..codegen import render
        with tempfile.TemporaryDirectory(prefix="hlsnn-sched-") as tmp:
            r = render(cfg, Path(tmp) / "hls", testbench=False)     # the sources only
            src = r.dir / f"{cfg.engine}.cpp"
            _CFG_MEMO[key] = tuple(source_schedule(src, name=cfg.engine, depths=layer_depths(cfg),
                                                   clock_mhz=cfg.clock_mhz, ps=cfg.board.ps))
    return _CFG_MEMO[key]
