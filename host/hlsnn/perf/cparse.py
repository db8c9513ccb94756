"""The rendered C++ of a kernel as libclang reads it, for :mod:`~hlsnn.perf.schedule`: the front end
(:func:`cindex`, :func:`parse_args`), the ``#pragma HLS`` lines (:func:`_pragmas`), the AST's
nodes and tokens, the constants the code declares (:class:`_Consts`), the widths of its types
(:func:`_bits`) and its loops with their trip counts (:class:`_Loop`, :func:`_trip`)."""
from __future__ import annotations

import ctypes
import functools
import re
import subprocess
from pathlib import Path


def cindex():
    """libclang's bindings, or a one-line MissingDependency naming the package."""
    try:
        import clang.cindex as ci
        ci.Index.create()
        return ci
    except Exception as e:                       # ImportError, or the shared library missing
        from ..errors import MissingDependency
        raise MissingDependency("hlsnn perf's schedule needs libclang's Python bindings: pip install libclang "
                                f"(or pip install -e '.[dev]'); {type(e).__name__}: {e}") from None


@functools.lru_cache(maxsize=1)
def _builtin_include():
    """The compiler's own headers (stddef.h, ...), which the libclang wheel does not ship: g++'s."""
    from ..csim import compiler
    try:
        out = subprocess.run([compiler(), "-print-file-name=include"], capture_output=True, text=True,
                             timeout=30).stdout.strip()
        return [f"-isystem{out}"] if out and Path(out).is_dir() else []
    except (OSError, subprocess.SubprocessError):
        return []


def parse_args(folder, include_dirs=()):
    from ..csim import ap_types_dir
    return (["-x", "c++", "-std=c++14", "-Wno-unknown-pragmas",
             "-DHLSNN_CSIM_COUNTERS_H_"]  # the loop counters vanish, as under __SYNTHESIS__ + [f"-I{d}" for d in include_dirs]
            + [f"-I{Path(folder) / 'include'}", f"-I{folder}", f"-isystem{ap_types_dir()}"] + _builtin_include())


# ----------------------------------------------------------------------------------- pragmas
_PRAGMA = re.compile(r"^\s*#\s*pragma\s+HLS\s+(\w+)(.*)$", re.I)


def _kv(text):
    """``key = value`` pairs and bare words of a pragma's arguments."""
    words = re.findall(r"(\w+)\s*=\s*([\w:.\-]+)|(\w+)", text)
    kv, flags = {}, set()
    for k, v, w in words:
        if k:
            kv[k.lower()] = v
        else:
            flags.add(w.lower())
    return kv, flags


class _Pragma:
    def __init__(self, file, line, name, text):
        self.file, self.line, self.name = file, line, name.upper()
        self.kv, self.flags = _kv(text)


def _pragmas(files):
    out = []
    for f in files:
        for i, ln in enumerate(Path(f).read_text(errors="replace").splitlines(), 1):
            m = _PRAGMA.match(ln)
            if m:
                out.append(_Pragma(str(f), i, m.group(1), m.group(2)))
    return out


# ---------------------------------------------------------------------------------- the AST
def _instantiation_file(loc):
    """The file handle (an int, None: no file) of a location: libclang's
    ``clang_getInstantiationLocation`` asked for the file only."""
    if _LOC_FN[0] is None:
        from clang.cindex import c_object_p, conf
        _LOC_FN[:] = [conf.lib.clang_getInstantiationLocation, c_object_p]
    fn, handle = _LOC_FN
    f = handle()
    fn(loc, ctypes.byref(f), None, None, None)
    return ctypes.cast(f, ctypes.c_void_p).value if f else None


_LOC_FN = [None, None]
_KIND_NAMES = {}


def _kind(c):
    k = c._kind_id                                # the bindings' kind lookup, once per kind
    name = _KIND_NAMES.get(k)
    if name is None:
        try:
            name = c.kind.name
        except ValueError:                        # a cursor kind these bindings do not know
            name = "UNKNOWN"
        _KIND_NAMES[k] = name
    return name


#: a kernel's cursors' children, tokens and operators, asked again and again (every unrolled copy
#: of an access evaluates its indices): by cursor, emptied for each new kernel (:class:`Kernel`)
_MEMO = ({}, {}, {})


def _children(c):
    m = _MEMO[0]
    r = m.get(c)
    if r is None:
        r = m[c] = tuple(c.get_children())
    return r


def _tokens(c):
    m = _MEMO[1]
    r = m.get(c)
    if r is None:
        r = m[c] = [t.spelling for t in c.get_tokens()]
    return list(r)


def _text(c):
    return " ".join(_tokens(c))


def _op(c):
    """The operator of a binary / compound-assignment / unary / conditional expression."""
    m = _MEMO[2]
    r = m.get(c)
    if r is None:
        r = m[c] = _op_of(c)
    return r


def _op_of(c):
    ch = _children(c)
    toks = list(c.get_tokens())
    if _kind(c) == "UNARY_OPERATOR":
        if not toks:
            return ""
        return toks[0].spelling if (ch and toks[0].extent.start.offset < ch[0].extent.start.offset) else toks[-1].spelling
    if not ch:
        return ""
    end = ch[0].extent.end.offset
    for t in toks:
        if t.extent.start.offset >= end:
            return t.spelling
    return ""


def _strip(c):
    while _kind(c) in ("UNEXPOSED_EXPR", "PAREN_EXPR", "CXX_FUNCTIONAL_CAST_EXPR", "CSTYLE_CAST_EXPR",
                       "CXX_STATIC_CAST_EXPR") and _children(c):
        c = _children(c)[-1]
    return c


def _root(c):
    """``(name, [index cursors], kind)`` of an access ``a[i][j]`` (kind ``array``) or ``m[i]`` on
    a class with ``operator[]`` (kind ``mem``), else None."""
    idx = []
    c0 = c
    while True:
        k = _kind(c)
        ch = _children(c)
        if k == "ARRAY_SUBSCRIPT_EXPR" and len(ch) == 2:
            idx.insert(0, ch[1])
            c = _strip(ch[0])
        elif k == "CALL_EXPR" and c.spelling == "operator[]" and len(ch) >= 2:
            obj = _strip(ch[0])
            t = obj.type.spelling if obj.type else ""
            if not re.search(r"\bMem\b|Mem<", t) and c is c0:
                return None                     # ap_int bit select, not a memory
            idx.insert(0, ch[-1])
            c = obj
        elif k in ("DECL_REF_EXPR", "MEMBER_REF_EXPR"):
            return (c.spelling, idx) if idx else None
        else:
            return None


def plain_data(text_of, name, c):
    """Whether the initializer list ``c`` (in file ``name``; ``text_of`` caches files' bytes) is plain
    data: its source text holds no ``[`` and no ``;``, so no lambda, statement expression, subscript
    or declaration, only literals, names and operators. Its elements hold nothing the schedule's walk
    collects (a loop, a label, a function, a constant's declaration), so it skips them: a network
    kernel's weight tables are most of its cursors (a kernel of 34,600, 30,000 in initializers)."""
    text = text_of.get(name)
    if text is None:
        text = text_of[name] = Path(name).read_bytes()
    ext = c.extent
    body = text[ext.start.offset:ext.end.offset]
    return bool(body) and b"[" not in body and b";" not in body


def _id(d):
    f = d.location.file
    return (f.name if f else "", d.extent.start.offset)


def _renamed(r, rename):
    """An access ``(name, idx)`` in a called function, in the caller's names (a reference
    parameter bound to an element of an array gets that element's indices first)."""
    name, idx = r
    if name in rename:
        n2, pre = rename[name]
        return n2, list(pre) + list(idx)
    return name, list(idx)


class _Consts:
    """Integer constants of the translation unit (``constexpr``/``const`` with literal-derived
    initializers), by name, to evaluate trip counts and widths."""

    def __init__(self, tu):
        self.by_name = {}
        self.tu = tu
        self.tparams = {}        # the template arguments of the function being walked, by parameter name

    def value(self, c, depth=0, env=None):
        if c is None or depth > 12:
            return None
        k = _kind(c)
        if env and k in ("DECL_REF_EXPR",) and c.spelling in env:
            return env[c.spelling]
        if k == "INTEGER_LITERAL":
            t = _tokens(c)
            try:
                return int(re.sub(r"[uUlL]+$", "", t[0]), 0) if t else None
            except ValueError:
                return None
        if k == "CXX_BOOL_LITERAL_EXPR":
            return 1 if _tokens(c)[:1] == ["true"] else 0
        if k in ("DECL_REF_EXPR", "MEMBER_REF_EXPR"):
            d = c.referenced
            if d is not None and _kind(d) == "TEMPLATE_NON_TYPE_PARAMETER":
                return self.tparams.get(c.spelling)
            if d is not None and _kind(d) in ("VAR_DECL", "FIELD_DECL") and d.type.is_const_qualified():
                ch = [x for x in _children(d) if _kind(x) not in ("TYPE_REF", "NAMESPACE_REF", "TEMPLATE_REF")]
                if ch:
                    v = self.value(ch[-1], depth + 1, env)
                    if v is not None:
                        return v
            if d is not None and _kind(d) in ("VAR_DECL", "PARM_DECL") and not d.type.is_const_qualified():
                return None
            return self.by_name.get(c.spelling)
        if k == "BINARY_OPERATOR":
            ch = _children(c)
            op = _op(c)
            a = self.value(ch[0], depth + 1, env)
            if op == "&&" and a == 0 or op == "||" and a not in (None, 0):
                return int(op == "||")
            b = self.value(ch[1], depth + 1, env)
            if a is None or b is None:
                return None
            try:
                return {"+": a + b, "-": a - b, "*": a * b, "/": int(a / b) if b else None, "<<": a << b,
                        ">>": a >> b, "%": (abs(a) % abs(b)) * (1 if a >= 0 else -1) if b else None,
                        "==": int(a == b), "!=": int(a != b), "<": int(a < b), ">": int(a > b),
                        "<=": int(a <= b), ">=": int(a >= b), "&&": int(bool(a and b)), "||": int(bool(a or b)),
                        "&": a & b, "|": a | b, "^": a ^ b}.get(op)
            except (ValueError, OverflowError):
                return None
        if k == "UNARY_OPERATOR":
            ch = _children(c)
            a = self.value(ch[0], depth + 1, env) if ch else None
            op = _op(c)
            if a is None:
                return None
            return {"-": -a, "!": int(not a), "~": ~a, "+": a}.get(op)
        if k == "CONDITIONAL_OPERATOR":
            ch = _children(c)
            cond = self.value(ch[0], depth + 1, env)
            return None if cond is None else self.value(ch[1] if cond else ch[2], depth + 1, env)
        ch = _children(c)
        if k in ("UNEXPOSED_EXPR", "PAREN_EXPR", "CSTYLE_CAST_EXPR", "CXX_STATIC_CAST_EXPR",
                 "CXX_FUNCTIONAL_CAST_EXPR") and ch:
            return self.value(ch[-1], depth + 1, env)
        if k == "CALL_EXPR" and len(ch) == 1:            # an implicit conversion (ap_uint from int)
            return self.value(ch[0], depth + 1, env)
        return None

    def collect(self, cursors):
        for c in cursors:
            if _kind(c) == "VAR_DECL":
                ch = [x for x in _children(c) if _kind(x) not in ("TYPE_REF", "NAMESPACE_REF", "TEMPLATE_REF")]
                if ch:
                    v = self.value(ch[-1])
                    if v is not None:
                        self.by_name.setdefault(c.spelling, v)


def _bits(type_spelling, consts):
    t = type_spelling or ""
    m = re.search(r"ap_u?int<\s*([^>]+)>|ap_u?fixed<\s*([^,>]+)", t)
    if m:
        e = (m.group(1) or m.group(2)).strip()
        if e.isdigit():
            return int(e)
        name = e.split("::")[-1].strip()
        return consts.by_name.get(name, 32)
    if re.search(r"\bbool\b", t):
        return 1
    if re.search(r"\bchar\b|int8", t):
        return 8
    if re.search(r"short|int16", t):
        return 16
    if re.search(r"long|int64", t):
        return 64
    return 32


# ---------------------------------------------------------------------------- the analysis
class _Loop:
    def __init__(self, cursor, label, func, parent):
        self.c, self.label, self.func, self.parent = cursor, label, func, parent
        body = [x for x in _children(cursor) if _kind(x) == "COMPOUND_STMT"]
        self.body = body[-1] if body else (_children(cursor)[-1] if _children(cursor) else cursor)
        self.file = cursor.location.file.name if cursor.location.file else ""
        self.lines = (self.body.extent.start.line, self.body.extent.end.line)
        self.pragmas = []
        self.var, self.var_decl = None, None
        ch = _children(cursor)
        if _kind(cursor) == "FOR_STMT" and ch:
            init = ch[0]
            for x in init.walk_preorder():
                if _kind(x) == "VAR_DECL":
                    self.var, self.var_decl = x.spelling, x
                    break

    @property
    def pipeline(self):
        return next((p for p in self.pragmas if p.name == "PIPELINE" and "off" not in p.flags), None)


def _trip(loop, consts):
    """The constant trip count of an unrolled loop ``for (i = a; i < N; ++i)`` (None: unknown)."""
    ch = _children(loop.c)
    if _kind(loop.c) != "FOR_STMT" or len(ch) < 3:
        return None
    cond = _strip(ch[1])
    if _kind(cond) != "BINARY_OPERATOR":
        return None
    op = _op(cond)
    a, b = _children(cond)
    hi = consts.value(b)
    lo = 0
    for x in ch[0].walk_preorder():
        if _kind(x) == "VAR_DECL":
            init = [y for y in _children(x) if _kind(y) not in ("TYPE_REF", "NAMESPACE_REF", "TEMPLATE_REF")]
            lo = consts.value(init[-1]) if init else 0
            break
    if hi is None or lo is None:
        return None
    step = 1
    inc = _text(ch[2])
    m = re.search(r"[+-]=\s*(\w+)", inc)
    if m:
        step = consts.by_name.get(m.group(1)) if not m.group(1).isdigit() else int(m.group(1))
        if not step:
            return None
    if op in (">", ">="):                      # counting down: for (i = N - 1; i >= 0; --i)
        if "++" in inc or "+=" in inc:
            return None
        n = lo - hi + (1 if op == ">=" else 0)
    elif "--" in inc or "-=" in inc:
        return None
    else:
        n = hi - lo + (1 if op == "<=" else 0)
    return max(0, -(-n // step)) if op in ("<", "<=", "!=", ">", ">=") else None


def template_args(call, fn):
    """``{parameter: value}`` of the integral template arguments of the specialization ``call``
    of the function template ``fn`` (``{}``: not a template, or the bindings cannot say)."""
    if _kind(fn) != "FUNCTION_TEMPLATE":
        return {}
    params = [x for x in _children(fn) if _kind(x) in ("TEMPLATE_TYPE_PARAMETER", "TEMPLATE_NON_TYPE_PARAMETER",
                                                        "TEMPLATE_TEMPLATE_PARAMETER")]
    out = {}
    try:
        n = call.get_num_template_arguments()
        for i, p in enumerate(params[:max(0, n)]):
            if _kind(p) == "TEMPLATE_NON_TYPE_PARAMETER" and call.get_template_argument_kind(i).name == "INTEGRAL":
                out[p.spelling] = call.get_template_argument_value(i)
    except Exception:                          # noqa: BLE001 - bindings without the calls: none known
        return {}
    return out


def declared_dims(decls, name, consts):
    """The sizes of the dimensions of array ``name`` (0 where unknown; [] when ``decls``, its
    declarations, give none): its type's, else its declaration's ``[N]`` tokens (a parameter's
    first dimension decays to a pointer)."""
    for d in decls:
        t, sizes = d.type, []
        while t is not None and t.kind.name == "CONSTANTARRAY":
            sizes.append(t.get_array_size())
            t = t.element_type
        if not sizes:
            toks = _tokens(d)
            i = toks.index(name) + 1 if name in toks else len(toks)
            while i < len(toks) and toks[i] == "[":
                j = toks.index("]", i)
                e = " ".join(toks[i + 1:j])
                sizes.append(int(e) if e.isdigit() else consts.by_name.get(e.split("::")[-1], 0))
                i = j + 1
        if sizes:
            return sizes
    return []


def names_read(c, depth=0):
    """The names an expression reads, through the initializers of the local constants it reads."""
    out = set()
    for x in c.walk_preorder():
        if _kind(x) == "DECL_REF_EXPR":
            out.add(x.spelling)
            d = x.referenced
            if depth < 4 and d is not None and _kind(d) == "VAR_DECL" and d.type.is_const_qualified():
                ch = [y for y in _children(d) if _kind(y) not in ("TYPE_REF", "NAMESPACE_REF", "TEMPLATE_REF")]
                if ch:
                    out |= names_read(ch[-1], depth + 1)
    return out


def affine_index(ix):
    """Whether an m_axi index may be affine in the loop's counter (no shift, mask, division,
    remainder, multiplication, select or subscript): a burst can be inferred."""
    return not any(t in {"%", "/", ">>", "&", "|", "^", "<<", "?", "[", "*"} for t in _tokens(ix))


def reached(funcs, pragmas):
    """The names of the functions of ``funcs`` (name -> definition cursor) that a kernel's top
    functions call, directly or through others, the tops included; a top is a function that declares
    an ``INTERFACE`` pragma (STYLE H3). Vitis HLS synthesizes only these (:mod:`hlsnn.perf.schedule`).
    None when no function declares one (a test source, a lone helper)."""
    todo = sorted({name for p in pragmas if p.name == "INTERFACE" for name, fn in funcs.items()
                   if fn.location.file is not None and fn.location.file.name == p.file
                   and fn.extent.start.line <= p.line <= fn.extent.end.line})
    seen = set(todo)
    while todo:
        for c in funcs[todo.pop()].walk_preorder():
            if _kind(c) == "CALL_EXPR" and c.referenced is not None:
                n = c.referenced.spelling
                if n in funcs and n not in seen:
                    seen.add(n)
                    todo.append(n)
    return seen or None
