"""Run-time multiplications and divisions in each pipelined loop of a rendered kernel, counted
from its C++ (what Vitis HLS would build operators for), for tests/strict/test_loop_operators.py.

Vitis HLS gives each pipelined loop a module of its own and fully unrolls the loops inside it,
so every ``*``, ``/`` and ``%`` in the body is an operator of that module, once per unrolled
copy, and so is every one in a function the body calls (inlined or instantiated per call
site). A product or quotient costs a DSP or a divider core only when **both** operands are
run-time values: an operand made only of literals, ``k...`` constants (``Cfg::kRows``, ``kL``),
the indices of the unrolled loops, template parameters, and ``const int`` locals computed from
them is a constant, and a product by a constant is shifts and adds (a quotient or remainder
by one is a shift or a mask when it is a power of two; the kernels use no other).

The count is of the code as the tool compiles it (``synthesis_guards.strip_sim_only``, comments
removed). It is a text analysis, not a C++ parser: it knows the forms the kernels use (labelled
``for`` loops with a ``#pragma HLS PIPELINE`` or ``UNROLL`` first in the body, ``const int``
locals, casts in parentheses) and raises on a loop bound it cannot evaluate, so that a new
form is noticed rather than miscounted.
"""
from __future__ import annotations

import re
from pathlib import Path

from synthesis_guards import strip_sim_only

ROOT = Path(__file__).resolve().parents[1]
INCLUDE = ROOT / "hls" / "include" / "hlsnn"

_IDENT = re.compile(r"[A-Za-z_]\w*")
_CONST_NAME = re.compile(r"^k[A-Z]\w*$")
_TYPE_WORDS = {"int", "unsigned", "signed", "long", "short", "char", "bool", "const", "true", "false", "sizeof",
               "ap_int", "ap_uint", "ap_fixed", "ap_ufixed", "static_cast", "Cfg", "hlsnn", "std"}
_FOR = re.compile(r"\bfor\s*\(")
_TEMPLATE_TYPES = {"ap_int", "ap_uint", "ap_fixed", "ap_ufixed", "static_cast"}
# member calls that are never one of the file's functions (a stream's, an ap_int's)
_STREAM_METHODS = {"read", "write", "empty", "full", "range", "size", "to_int", "to_uint"}
_FUNC = re.compile(r"(?:^|\n)[ \t]*(?:template\s*<([^>]*)>\s*)?(?:inline\s+|static\s+)*[\w:<>, ]+?[\s&*]"
                   r"(\w+)\s*\(([^;{}]*)\)\s*(?:const\s*)?\{")


def code_of(text: str) -> str:
    """The code the tool compiles: sim-only blocks and comments removed."""
    text = strip_sim_only(text)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def constants(config_header: str) -> dict:
    """``{name: value}`` of the config header's ``static constexpr`` integer and boolean members."""
    out = {}
    for name, expr in re.findall(r"static constexpr (?:int|bool|unsigned|long) (k\w+) = ([^;]+);",
                                 code_of(config_header)):
        try:
            out[name] = _eval(expr, out)
        except ValueError:
            pass
    return out


def _eval(expr: str, env: dict) -> int:
    e = re.sub(r"\b\w+::", "", expr).replace("true", "1").replace("false", "0")
    e = e.replace("&&", " and ").replace("||", " or ").replace("!=", "<>").replace("!", " not ")
    e = e.replace("<>", "!=").replace("/", "//").replace("////", "//")
    e = re.sub(r"\(int\)|\(bool\)", "", e)
    names = set(_IDENT.findall(e)) - {"and", "or", "not"}
    if not names <= set(env):
        raise ValueError(f"cannot evaluate {expr!r}: {sorted(names - set(env))}")
    try:
        return int(eval(e, {"__builtins__": {}}, dict(env)))     # noqa: S307 (integer constants only)
    except Exception as err:                                   # a form this analysis does not know
        raise ValueError(f"cannot evaluate {expr!r}: {err}") from None


def _match(text: str, i: int) -> int:
    """Index of the bracket closing the one at ``i``."""
    pairs = {"(": ")", "[": "]", "{": "}", "<": ">"}
    opening, closing, depth = text[i], pairs[text[i]], 0
    for j in range(i, len(text)):
        if text[j] == opening:
            depth += 1
        elif text[j] == closing:
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"unbalanced {opening!r} at {i}")


def _match_back(text: str, i: int) -> int:
    pairs = {")": "(", "]": "["}
    closing, opening, depth = text[i], pairs[text[i]], 0
    for j in range(i, -1, -1):
        if text[j] == closing:
            depth += 1
        elif text[j] == opening:
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"unbalanced {closing!r} at {i}")


def functions(code: str) -> dict:
    """``{name: (template parameter names, parameter names, body)}`` of the functions defined
    in ``code`` (the last definition of a name wins)."""
    out = {}
    for m in _FUNC.finditer(code):
        tparams, name, params = m.group(1), m.group(2), m.group(3)
        if name in {"if", "for", "while", "switch", "return"}:
            continue
        brace = m.end() - 1
        body = code[brace + 1:_match(code, brace)]
        tnames = [p.split()[-1] for p in (tparams or "").split(",") if p.strip()]
        pnames = []
        for p in split_top(params):
            ids = _IDENT.findall(p.split("=")[0].split("[")[0])
            pnames.append(ids[-1] if ids else "")
        out[name] = (tnames, pnames, body)
    return out


def split_top(s: str, sep: str = ",", *, keep_empty_tail: bool = False) -> list:
    """``s`` split at each ``sep`` outside brackets (``<>``, ``()``, ``[]``, ``{}``); a blank last
    part is dropped unless ``keep_empty_tail``. Also used by tests/test_resources.py."""
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + [cur] if keep_empty_tail or cur.strip() else parts


def class_template_params(code: str) -> frozenset:
    """The parameter names of the class templates in ``code`` (``template <int W, int L>
    struct LaneWriter``): constants in their member functions."""
    names = set()
    for params in re.findall(r"template\s*<([^<>]*)>\s*(?:struct|class)\s+\w+", code):
        names |= {p.split()[-1] for p in params.split(",") if p.strip()}
    return frozenset(names)


def pipelined_loops(code: str) -> list:
    """``[(label, body)]`` of every ``for`` loop whose body starts with ``#pragma HLS PIPELINE``."""
    out = []
    for m in _FOR.finditer(code):
        close = _match(code, m.end() - 1)
        rest = code[close + 1:].lstrip()
        if not rest.startswith("{"):
            continue
        brace = close + 1 + (len(code[close + 1:]) - len(rest))
        body = code[brace + 1:_match(code, brace)]
        if not re.match(r"\s*#pragma HLS PIPELINE", body):
            continue
        label = re.search(r"(\w+)\s*:\s*$", code[:m.start()])
        out.append((label.group(1) if label else f"loop@{m.start()}", body))
    return out


class Counter:
    """Counts the run-time products and quotients of a loop body (see the module docstring)."""

    def __init__(self, env: dict, funcs: dict, class_params: frozenset = frozenset()):
        self.env = env
        self.funcs = funcs
        self.class_params = class_params            # a class template's parameters: constants

    def count(self, body: str, consts: frozenset = frozenset(), mult: int = 1, depth: int = 0,
              targs: dict | None = None) -> dict:
        """``{"mul": n, "div": n}`` of ``body`` run ``mult`` times, with ``consts`` the names
        known constant in it and ``targs`` the values of template parameters."""
        if depth > 20:
            raise ValueError("calls nested too deep (recursion?)")
        env = {**self.env, **(targs or {})}
        total = {"mul": 0, "div": 0}
        consts = set(consts) | self.class_params
        pos = 0
        flat = []                                   # the body without its nested loops
        for m in _FOR.finditer(body):
            if m.start() < pos:
                continue
            close = _match(body, m.end() - 1)
            header = body[m.end():close]
            rest = body[close + 1:]
            stripped = rest.lstrip()
            start = close + 1 + len(rest) - len(stripped)
            if stripped.startswith("{"):
                end = _match(body, start)
                inner = body[start + 1:end]
            else:                                   # a single statement
                end = body.index(";", start)
                inner = body[start:end + 1]
            var, trips = self._trips(header, env)
            sub = self.count(inner, frozenset(consts | {var}), mult * trips, depth, targs)
            total = {k: total[k] + sub[k] for k in total}
            flat.append(body[pos:m.start()])
            pos = end + 1
        flat.append(body[pos:])
        text = " ".join(flat)
        # const int locals from constants are constants
        for decl in re.finditer(r"\bconst\s+int\s+([^;]+);", text):
            for part in split_top(decl.group(1)):
                if "=" in part:
                    name, expr = part.split("=", 1)
                    if self._constant(expr, consts):
                        consts.add(name.strip())
        for op, kind in (("*", "mul"), ("/", "div"), ("%", "div")):
            for i in [m.start() for m in re.finditer(re.escape(op), text)]:
                left = self._left(text, i)
                if left is None:
                    continue                        # not a binary operator (a pointer, a dereference)
                right = self._right(text, i + (2 if text[i + 1:i + 2] == "=" else 1))
                if not (self._constant(left, consts) or self._constant(right, consts)):
                    total[kind] += mult
        # calls of the file's functions: their operators, once per call site
        for m in re.finditer(r"\b(\w+)\s*(<[^<>()]*(?:<[^<>()]*>[^<>()]*)*>)?\s*\(", text):
            name = m.group(1)
            if name in self.funcs and name not in _STREAM_METHODS:
                tnames, _params, fbody = self.funcs[name]
                args = split_top(m.group(2)[1:-1]) if m.group(2) else []
                bound = {}
                for t, a in zip(tnames, args):
                    try:
                        bound[t] = _eval(a, env)
                    except ValueError:
                        pass                            # a type argument
                sub = self.count(fbody, frozenset(tnames), mult, depth + 1, bound)
                total = {k: total[k] + sub[k] for k in total}
        return total

    def _trips(self, header: str, env: dict):
        """``(index, trip count)`` of an unrolled loop ``for (int i = A; COND; ++i)`` (or ``--i``),
        by running its header on the constants."""
        m = re.match(r"\s*(?:int|unsigned)\s+(\w+)\s*=\s*([^;]+);([^;]+);\s*(\+\+|--)(\w+)\s*$", header)
        if not m or m.group(5) != m.group(1):
            raise ValueError(f"a loop inside a pipelined loop with a header this analysis does not know: {header!r}")
        var, step = m.group(1), 1 if m.group(4) == "++" else -1
        v, n = _eval(m.group(2), env), 0
        while _eval(m.group(3), {**env, var: v}):
            v, n = v + step, n + 1
            if n > 1 << 16:
                raise ValueError(f"an unrolled loop of more than 65536 trips: {header!r}")
        return var, n

    def _constant(self, expr: str, consts: set) -> bool:
        expr = re.sub(r"(\.|->)\s*\w+", "", expr)          # members (.range, .lop)
        expr = re.sub(r"\w+::", "", expr)                   # Cfg::kRows -> kRows
        expr = re.sub(r"\b\d[\w.']*", "", expr)             # literals
        for name in _IDENT.findall(expr):
            if not (name in consts or _CONST_NAME.match(name) or name in _TYPE_WORDS or name.endswith("_t")
                    or name in self.env):
                return False
        return True

    @staticmethod
    def _left(text: str, i: int):
        j = i - 1
        while j >= 0 and text[j] in " \t\n":
            j -= 1
        if j < 0 or not (text[j].isalnum() or text[j] in "_)]"):
            return None
        end = j + 1
        while j >= 0:
            if text[j] in ")]":
                j = _match_back(text, j) - 1
            elif text[j].isalnum() or text[j] == "_":
                j -= 1
            elif text[j] == "." or text[j:j + 2] == "->":
                j -= 1
            elif text[j] == ":" and j > 0 and text[j - 1] == ":":
                j -= 2
            else:
                break
        left = text[j + 1:end]
        if left.endswith(("_t", "int", "bool", ">")) and _IDENT.fullmatch(left):
            return None                              # a pointer declaration `T *p` (the kernels have none)
        return left

    @staticmethod
    def _right(text: str, i: int) -> str:
        j = i
        n = len(text)
        while j < n and text[j] in " \t\n":
            j += 1
        start = j
        while j < n and text[j] in "-!~+":
            j += 1
        # casts: (type) operand
        while j < n and text[j] == "(":
            close = _match(text, j)
            inner = text[j + 1:close]
            after = text[close + 1:].lstrip()
            if re.fullmatch(r"[\w:<>, *]+", inner) and after[:1] and (after[0].isalnum() or after[0] in "_("):
                j = close + 1
                while j < n and text[j] in " \t\n":
                    j += 1
                continue
            j = close + 1
            break
        else:
            while j < n and (text[j].isalnum() or text[j] in "_:"):
                j += 1
            # a template type's functional cast, `ap_int<W>(r)` or `static_cast<T>(r)`: the operand is its argument
            # (without this the operand read as the bare type name, a "constant")
            if text[start:j] in _TEMPLATE_TYPES and j < n and text[j] == "<":
                j = _match(text, j) + 1
        while j < n:
            if text[j] in "[(":
                j = _match(text, j) + 1
            elif text[j] == "." and j + 1 < n and (text[j + 1].isalpha() or text[j + 1] == "_"):
                j += 1
                while j < n and (text[j].isalnum() or text[j] == "_"):
                    j += 1
            else:
                break
        return text[start:j]


def loop_operators(rendered_dir: Path, kernel_file: str, config_header: str, with_declared=False) -> dict:
    """``{loop label: {"mul": n, "div": n}}`` for every pipelined loop of a rendered kernel
    (loops of the same label, as in the instances of a template, add up); ``with_declared``
    adds ``"declared"``, the loop's :func:`declared` operators."""
    rendered_dir = Path(rendered_dir)
    code = code_of((rendered_dir / kernel_file).read_text())
    env = constants((rendered_dir / config_header).read_text())
    for name, expr in re.findall(r"\bconst(?:expr)?\s+int\s+(k\w+)\s*=\s*([^;]+);", code):
        try:
            env[name] = _eval(expr, env)               # the kernel's own constants (kL = Cfg::kLanes)
        except ValueError:
            pass
    headers = "\n".join(code_of(p.read_text()) for p in sorted(INCLUDE.glob("*.h"))
                        if not p.name.startswith("csim_"))
    funcs = {**functions(headers), **functions(code)}
    counter = Counter(env, funcs, class_template_params(headers + code))
    out = {}
    for label, body in pipelined_loops(code):
        c = counter.count(body)
        prev = out.get(label, {"mul": 0, "div": 0})
        out[label] = {k: prev[k] + c[k] for k in c}
        if with_declared:
            out[label]["declared"] = declared(code, label, env)
    return out


_OPS = re.compile(r"\bHLSNN_OPS(_AT)?\(\s*(\w+)\s*,([^;]*)\)\s*;")

# loops that run once per instance of a replicated process (a template instantiated per unit):
# the resource model counts every instance's operators
INSTANCES = {("sparse_cluster", "MacLoop"): "units"}


def declared(code: str, label: str, env: dict) -> tuple | None:
    """``(mul, div, dsp)`` of the ``HLSNN_OPS`` / ``HLSNN_OPS_AT`` that names loop ``label``
    (in its body or just before it; None without one)."""
    for m in _OPS.finditer(code):
        if m.group(2) == label:
            args = split_top(m.group(3))[1 if m.group(1) else 0:]
            return tuple(_eval(a, env) for a in args)
    return None


def check(cfg, rendered) -> list:
    """What disagrees, for a rendered kernel (``codegen.render``'s result) of config ``cfg``:
    each pipelined loop's run-time products and quotients counted from the code against its
    ``HLSNN_OPS`` declaration (a loop without one must have none) and against the resource
    model's multipliers of that loop (``function`` = the loop's label, every instance)."""
    problems = []
    engine = cfg.engine
    d = Path(rendered.dir)
    kernel = rendered.engine.KERNEL_SOURCES[0]
    header = next(p.name for p in d.iterdir() if p.name.endswith("_config.h"))
    counts = loop_operators(d, kernel, header, with_declared=True)
    model = {}
    for m in cfg.estimates["multipliers"]:
        model[m["function"]] = model.get(m["function"], 0) + m["count"]
    for label, c in counts.items():
        decl = c["declared"]
        if decl is None:
            if c["mul"] or c["div"]:
                problems.append(f"{label}: {c['mul']} run-time products and {c['div']} quotients in the code, "
                                f"no HLSNN_OPS declaration")
        elif (c["mul"], c["div"]) != tuple(decl[:2]):
            problems.append(f"{label}: the code has {c['mul']} run-time products and {c['div']} quotients, "
                            f"HLSNN_OPS declares {decl[0]} and {decl[1]}")
        per = cfg.params[INSTANCES[engine, label]] if (engine, label) in INSTANCES else 1
        if model.get(label, 0) != c["mul"] * per:
            problems.append(f"{label}: the resource model counts {model.get(label, 0)} products, "
                            f"the code {c['mul']} x {per} instance(s)")
    return problems


# ------------------------------------------------------------ memory bank sites, statically

_ACCESS = re.compile(r"\bHLSNN_(LOAD|STORE)(_AT)?\(")
_MEM_DECL = re.compile(r"hlsnn::Mem<[^;{}]*?>\s+(\w+)((?:\[[^\]]+\])*)\s*;")
_MEM_KIND = re.compile(r"\bHLSNN_MEM\(\s*(\w+)\s*,\s*hlsnn::(\w+)")
#: ports of a bank: (reads, writes, shared), as the strict C-simulation's kinds (csim_strict_mem.h)
PORTS = {"kRam1p": (0, 0, 1), "kRamS2p": (1, 1, 0), "kRamT2p": (0, 0, 2)}


def _call_args(text: str, open_paren: int):
    close = _match(text, open_paren)
    return [a.strip() for a in split_top(text[open_paren + 1:close])], close


def resolve_mode(body: str, flag: str, value: bool) -> str:
    """``body`` with every ``if (flag) { A } else { B }`` (and ``if (flag) { A }``) replaced by
    the branch that runs when ``flag`` is ``value``: the two sides of one if never run in the
    same iteration, so each side's accesses are counted against the ports on their own."""
    pat = re.compile(r"\bif\s*\(\s*" + re.escape(flag) + r"\s*\)\s*\{")
    while True:
        m = pat.search(body)
        if not m:
            return body
        close = _match(body, m.end() - 1)
        then = body[m.end():close]
        rest = body[close + 1:]
        e = re.match(r"\s*else\s*\{", rest)
        other, end = "", close + 1
        if e:
            eo = close + 1 + e.end() - 1
            ec = _match(body, eo)
            other, end = body[eo + 1:ec], ec + 1
        body = body[:m.start()] + (then if value else other) + body[end:]


class Sites:
    """The checked access sites (``HLSNN_LOAD`` / ``HLSNN_STORE``, ``_AT``) of a loop body on
    each bank of each ``hlsnn::Mem`` array, from the code: every copy of an unrolled loop with
    its index bound, a bank index that is not a constant counted on every bank of its
    dimension, a site named by ``_AT`` counted once per name (the runtime check's rule)."""

    def __init__(self, env: dict, funcs: dict, dims: dict):
        self.env, self.funcs, self.dims = env, funcs, dims

    def walk(self, body: str, bind: dict, out: dict, depth: int = 0, alias: dict | None = None):
        """Records the sites of ``body`` in ``out``; ``bind``: the unrolled indices' values and
        template arguments; ``alias``: a called function's array parameters, as ``(array,
        [bank index values])`` of the caller's argument."""
        alias = alias or {}
        if depth > 20:
            raise ValueError("calls nested too deep (recursion?)")
        pos, flat = 0, []
        for m in _FOR.finditer(body):
            if m.start() < pos:
                continue
            close = _match(body, m.end() - 1)
            header = body[m.end():close]
            stripped = body[close + 1:].lstrip()
            start = close + 1 + len(body[close + 1:]) - len(stripped)
            if stripped.startswith("{"):
                end = _match(body, start)
                inner = body[start + 1:end]
            else:
                end = body.index(";", start)
                inner = body[start:end + 1]
            env = {**self.env, **bind}
            var, trips = Counter(env, {})._trips(header, env)
            first = _eval(re.match(r"\s*(?:int|unsigned)\s+\w+\s*=\s*([^;]+);", header).group(1), env)
            step = 1 if "++" in header.rsplit(";", 1)[1] else -1
            for t in range(trips):
                self.walk(inner, {**bind, var: first + step * t}, out, depth, alias)
            flat.append((pos, body[pos:m.start()]))
            pos = end + 1
        flat.append((pos, body[pos:]))
        for offset, text in flat:
            self._accesses(body, offset, text, bind, out, alias)
            for m in re.finditer(r"\b(\w+)\s*(<[^<>()]*(?:<[^<>()]*>[^<>()]*)*>)?\s*\(", text):
                name = m.group(1)
                if name in self.funcs and name not in _STREAM_METHODS:
                    tnames, params, fbody = self.funcs[name]
                    args = split_top(m.group(2)[1:-1]) if m.group(2) else []
                    targs = {}
                    for t, a in zip(tnames, args):
                        try:
                            targs[t] = _eval(a, {**self.env, **bind})
                        except ValueError:
                            pass
                    calls, _ = _call_args(text, m.end() - 1)
                    inner = {}
                    for prm, arg in zip(params, calls):
                        am = re.fullmatch(r"(\w+)((?:\[[^\[\]]+\])*)", arg)
                        if am and (am.group(1) in self.dims or am.group(1) in alias):
                            base, pre = alias.get(am.group(1), (am.group(1), []))
                            inner[prm] = (base, pre + [self._index(d, bind) for d in
                                                       re.findall(r"\[([^\[\]]+)\]", am.group(2))])
                    self.walk(fbody, targs, out, depth + 1, inner)

    def _index(self, expr, bind):
        try:
            return _eval(expr, {**self.env, **bind})
        except ValueError:
            return None                                    # a run-time value

    def _accesses(self, body, offset, text, bind, out, alias):
        env = {**self.env, **bind}
        for m in _ACCESS.finditer(text):
            args, _ = _call_args(text, m.end() - 1)
            kind = "reads" if m.group(1) == "LOAD" else "writes"
            arr = args[0]
            name = _IDENT.match(arr.strip()).group(0)
            pre = []
            if name in alias:
                name, pre = alias[name]
            if name not in self.dims:
                continue
            idx = pre + [self._index(d, bind) for d in re.findall(r"\[([^\[\]]+)\]", arr)]
            banks = [()]
            for v, size in zip(idx, self.dims[name]):
                vals = list(range(size)) if v is None else [v]   # a run-time bank index: every bank
                banks = [b + (x,) for b in banks for x in vals]
            if m.group(2):
                try:
                    site = ("at", _eval(args[-1], env))
                except ValueError:
                    site = ("at", args[-1])
            else:
                site = ("copy", tuple(sorted(bind.items())))
            key = (id(body), offset + m.start(), site)
            for b in banks:
                out.setdefault((name, b), {"reads": set(), "writes": set()})[kind].add(key)


def bank_sites(rendered_dir: Path, kernel_file: str, config_header: str, modes=("gemv",)) -> list:
    """``[{"loop", "mode", "array", "bank", "reads", "writes", "ports"}]``: every bank of every
    ``hlsnn::Mem`` array each pipelined loop accesses, whether or not a run reaches it, per
    value of each mode flag in ``modes`` that the loop branches on."""
    rendered_dir = Path(rendered_dir)
    code = code_of((rendered_dir / kernel_file).read_text())
    env = constants((rendered_dir / config_header).read_text())
    for name, expr in re.findall(r"\bconst(?:expr)?\s+int\s+(k\w+)\s*=\s*([^;]+);", code):
        try:
            env[name] = _eval(expr, env)
        except ValueError:
            pass
    headers = "\n".join(code_of(p.read_text()) for p in sorted(INCLUDE.glob("*.h"))
                        if not p.name.startswith("csim_"))
    funcs = {**functions(headers), **functions(code)}
    dims = {n: [_eval(d, env) for d in re.findall(r"\[([^\]]+)\]", ds)] for n, ds in _MEM_DECL.findall(code)}
    kinds = dict(_MEM_KIND.findall(code))
    rows = []
    for label, body in pipelined_loops(code):
        flags = [f for f in modes if re.search(r"\bif\s*\(\s*" + f + r"\s*\)", body)]
        variants = [("", body)] if not flags else \
            [(f"{f}={v}", resolve_mode(body, f, v)) for f in flags for v in (True, False)]
        for mode, text in variants:
            out = {}
            Sites(env, funcs, dims).walk(text, {}, out)
            for (name, bank), s in sorted(out.items()):
                rows.append({"loop": label, "mode": mode, "array": name, "bank": list(bank),
                             "reads": len(s["reads"]), "writes": len(s["writes"]),
                             "ports": PORTS.get(kinds.get(name, ""), None)})
    return rows


def over_ports(rows: list) -> list:
    """The rows of :func:`bank_sites` with more sites than their bank's ports."""
    bad = []
    for r in rows:
        p = r["ports"]
        if p is None:
            continue
        pr, pw, shared = p
        if (shared and r["reads"] + r["writes"] > shared) or (not shared and (r["reads"] > pr or r["writes"] > pw)):
            bad.append(r)
    return bad
