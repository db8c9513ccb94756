"""What code only C-simulation sees (``#ifndef __SYNTHESIS__``) may do, and a tool to strip it.

The open-source ap_types headers ``#error`` under ``__SYNTHESIS__``, so the code the tool
compiles cannot be compiled here. The kernels therefore keep the two sides equal: a
C-simulation-only block may hold checks and C-sim-only bookkeeping, never anything the
synthesized design would do differently. The rule, checked by :func:`violations`:

1. No code only the tool sees: ``#ifdef __SYNTHESIS__`` bodies and the ``#else`` of an
   ``#ifndef __SYNTHESIS__`` hold no code (comments and blank lines only). Guards are the
   plain ``#ifndef __SYNTHESIS__`` / ``#ifdef __SYNTHESIS__`` / ``#if [!]defined(__SYNTHESIS__)``
   forms with no ``#elif``.
2. A sim-only block may contain ``#include`` lines, but no other preprocessor directive.
3. Every write in a sim-only block (``=``, ``op=``, ``++``, ``--``) has as its target a
   *C-sim-only name*: one declared in that same block or in a header included only from
   sim-only blocks, or one that never occurs in the synthesized source (our files with the
   sim-only blocks removed). So counters and flags may be incremented; a stream, an output,
   a kernel variable or a member of any of them may not.
4. Every call in a sim-only block is to a C-sim-only name or to a function known not to
   change state (``assert``, ``empty``, ``size``, ``printf``...). So ``s.read()``,
   ``s.write(...)``, ``wr.Put(...)`` and the like are refused.
5. No ``break``, ``continue``, ``goto``, ``throw``, and no ``return`` except of an expression
   made of C-sim-only names (the body of a C-sim-only accessor).

:func:`strip_sim_only` removes what the tool would not compile (as ``unifdef -D__SYNTHESIS__``
would for this one macro), so a test can build the stripped kernel and compare its outputs
with the unstripped one. C-sim-only state that the C ABI harness reads (a flag, counters)
belongs in a header the kernels include only inside ``#ifndef __SYNTHESIS__`` and the harness
includes directly, like ``hlsnn/csim_flags.h``: such a header is treated as sim-only as a whole.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*?)\s*$")
_SIM = {"ifndef __SYNTHESIS__", "if !defined(__SYNTHESIS__)", "if !defined __SYNTHESIS__"}
_SYN = {"ifdef __SYNTHESIS__", "if defined(__SYNTHESIS__)", "if defined __SYNTHESIS__"}

# Calls that read but never change kernel state (rule 4).
PURE_CALLS = {"assert", "static_assert", "empty", "full", "size", "printf", "fprintf", "puts",
              "range", "to_int", "to_uint", "to_int64", "to_uint64", "to_long", "to_ulong", "length",
              "sizeof", "static_cast", "const_cast", "reinterpret_cast"}
_KEYWORDS = {"if", "for", "while", "switch", "do", "else", "return", "case", "default", "sizeof",
             "static", "const", "constexpr", "inline", "volatile", "unsigned", "signed", "int", "long",
             "short", "char", "bool", "float", "double", "void", "auto", "true", "false", "struct",
             "class", "typename", "template", "namespace", "new", "delete", "this", "operator"}
_FORBIDDEN = {"break", "continue", "goto", "throw"}
_ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'|<<=|>>=|->|::|\+\+|--"
                    r"|[-+*/%&|^!=<>]=|&&|\|\||<<|>>|\S")


@dataclass
class Block:
    """A run of lines inside a ``__SYNTHESIS__`` conditional: ``kind`` is ``sim`` (only
    C-simulation compiles it) or ``syn`` (only the tool does)."""

    path: str
    line: int                     # 1-based number of the first line
    kind: str
    lines: list = field(default_factory=list)

    @property
    def text(self):
        return "\n".join(self.lines)


class GuardError(ValueError):
    """A ``__SYNTHESIS__`` conditional this checker does not accept."""


def split(text: str, path="<text>"):
    """``(kept, blocks)``: the text as the tool compiles it (sim-only lines and the guards
    themselves removed, tool-only lines kept) and the list of :class:`Block`.

    >>> kept, blocks = split("a;\\n#ifndef __SYNTHESIS__\\nb;\\n#else\\nc;\\n#endif\\nd;\\n")
    >>> kept
    'a;\\nc;\\nd;\\n'
    >>> [(b.kind, b.line, b.text) for b in blocks]
    [('sim', 3, 'b;'), ('syn', 5, 'c;')]
    """
    stack = []   # per open #if: None (other macro) or [branch kind]
    kept, blocks = [], []
    current = None
    for no, line in enumerate(text.splitlines(), 1):
        m = _DIRECTIVE.match(line)
        word = m.group(1) if m else ""
        rest = re.sub(r"\s*(//.*|/\*.*)$", "", m.group(2)) if m else ""
        guard = f"{word} {rest}".strip()
        if m and word in ("if", "ifdef", "ifndef"):
            if guard in _SIM or guard in _SYN:
                stack.append(["sim" if guard in _SIM else "syn"])
                current = None
                continue
            if "__SYNTHESIS__" in rest:
                raise GuardError(f"{path}:{no}: unsupported __SYNTHESIS__ condition '{line.strip()}': use "
                                 "#ifndef __SYNTHESIS__ or #ifdef __SYNTHESIS__")
            stack.append(None)
        elif m and word in ("else", "elif") and stack and stack[-1] is not None:
            if word == "elif":
                raise GuardError(f"{path}:{no}: #elif in a __SYNTHESIS__ conditional")
            stack[-1][0] = "syn" if stack[-1][0] == "sim" else "sim"
            current = None
            continue
        elif m and word == "endif" and stack:
            if stack.pop() is not None:
                current = None
                continue
        kinds = {f[0] for f in stack if f is not None}
        kind = "sim" if "sim" in kinds else ("syn" if kinds else None)
        if kind is None:
            kept.append(line)
            current = None
            continue
        if kind == "syn":
            kept.append(line)
        if current is None or current.kind != kind:
            current = Block(path, no, kind)
            blocks.append(current)
        current.lines.append(line)
    if stack:
        raise GuardError(f"{path}: unterminated #if")
    return "".join(s + "\n" for s in kept), blocks


def strip_sim_only(text: str, path="<text>") -> str:
    """The text as the tool compiles it with respect to ``__SYNTHESIS__`` alone."""
    return split(text, path)[0]


def _code(text: str) -> str:
    """Comments and string literals removed (string contents would look like identifiers)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"\"(?:\\.|[^\"\\])*\"", '""', text)


def tokens(text: str):
    return _TOKEN.findall(_code(text))


def _is_ident(t):
    return re.match(r"[A-Za-z_]\w*$", t) is not None


def _declared(toks):
    """Names declared in a token list: an identifier after a type-like token and before
    ``= ; [ { , (``."""
    out = set()
    for j in range(1, len(toks) - 1):
        prev, name, nxt = toks[j - 1], toks[j], toks[j + 1]
        if (_is_ident(name) and name not in _KEYWORDS and nxt in ("=", ";", "[", "{", ",", "(")
                and (_is_ident(prev) and prev not in ("return", "else", "case", "goto") or prev in (">", "*", "&"))):
            out.add(name)
    return out


def _target_root(toks, i, forward=False):
    """Root name of the postfix expression that ends just before ``toks[i]`` (or starts just
    after it with ``forward``): ``hlsnn::Counters().beats[2]`` -> ``Counters``."""
    if forward:
        j = i + 1
        head = []
        while j < len(toks) and (_is_ident(toks[j]) or toks[j] == "::"):
            head.append(toks[j])
            j += 1
        names = [t for t in head if _is_ident(t)]
        return names[-1] if names else None
    j, chain = i - 1, []
    while j >= 0:
        t = toks[j]
        if t in (")", "]"):
            depth, open_ = 0, "(" if t == ")" else "["
            while j >= 0:
                depth += toks[j] == t
                depth -= toks[j] == open_
                if depth == 0:
                    break
                j -= 1
            chain.insert(0, open_)
            j -= 1
            continue
        if _is_ident(t) and t not in _KEYWORDS:
            chain.insert(0, t)
            j -= 1
            if j >= 0 and toks[j] in (".", "->", "::"):
                chain.insert(0, toks[j])
                j -= 1
                continue
        break
    head = []
    for t in chain:
        if t in (".", "->", "(", "["):
            break
        head.append(t)
    names = [t for t in head if _is_ident(t)]
    return names[-1] if names else None


def sim_only_headers(files: dict) -> set:
    """Headers (by file name) that our files include only from sim-only blocks."""
    inside, outside = set(), set()
    for path, text in files.items():
        kept, blocks = split(text, path)
        for name in re.findall(r'#\s*include\s*[<"](?:hlsnn/)?([\w.]+)[>"]', kept):
            outside.add(name)
        for b in blocks:
            if b.kind == "sim":
                inside.update(re.findall(r'#\s*include\s*[<"](?:hlsnn/)?([\w.]+)[>"]', b.text))
    return inside - outside


def violations(files: dict):
    """Every breach of the module's rule in ``files`` ({path: text}): a list of strings
    ``path:line: what``. Headers included only from sim-only blocks count as sim-only."""
    sim_headers = sim_only_headers(files)
    synth_idents, sim_idents, declared = set(), set(), set()
    parsed = {}
    for path, text in files.items():
        kept, blocks = split(text, path)
        parsed[path] = blocks
        if Path(path).name in sim_headers:
            toks = tokens(text)
            sim_idents.update(t for t in toks if _is_ident(t))
            declared |= _declared(toks)
            continue
        synth_idents.update(t for t in tokens(kept) if _is_ident(t))
        for b in blocks:
            if b.kind == "sim":
                sim_idents.update(t for t in tokens(b.text) if _is_ident(t))
    # a name the synthesized code also uses (a stream's read/write, which the strict C-simulation's
    # hlsnn::Fifo declares again in its sim-only header) is never C-sim-only
    global_sim_only = (declared | sim_idents) - synth_idents
    out = []
    for path, blocks in parsed.items():
        if Path(path).name in sim_headers:
            continue
        for b in blocks:
            where = f"{path}:{b.line}"
            if b.kind == "syn":
                if tokens(b.text):
                    out.append(f"{where}: code only Vitis HLS compiles (#ifdef __SYNTHESIS__ or #else "
                               f"of #ifndef): C-simulation cannot check it")
                continue
            for line in b.lines:
                m = _DIRECTIVE.match(line)
                if m and m.group(1) != "include":
                    out.append(f"{where}: '#{m.group(1)}' in a sim-only block (only #include is allowed)")
            code = "\n".join(line for line in b.lines if not _DIRECTIVE.match(line))
            toks = tokens(code)
            sim_only = global_sim_only | _declared(toks)   # plus this block's own locals
            for i, t in enumerate(toks):
                if t in _FORBIDDEN:
                    out.append(f"{where}: '{t}' changes control flow in a sim-only block")
                elif t == "return":
                    j = i + 1
                    names = []
                    while j < len(toks) and toks[j] != ";":
                        if _is_ident(toks[j]) and toks[j] not in _KEYWORDS:
                            names.append(toks[j])
                        j += 1
                    bad = [n for n in names if n not in sim_only]
                    if not names or bad:
                        out.append(f"{where}: 'return' in a sim-only block changes control flow"
                                   + (f" (returns {', '.join(bad)})" if bad else ""))
                elif t in _ASSIGN or t in ("++", "--"):
                    forward = t in ("++", "--") and (i == 0 or not (_is_ident(toks[i - 1])
                                                                   or toks[i - 1] in (")", "]")))
                    root = _target_root(toks, i, forward=forward)
                    if root is None or root not in sim_only:
                        out.append(f"{where}: '{t}' writes '{root}', which the synthesized kernel also "
                                   "uses: a sim-only block may only update C-sim-only counters/flags")
                elif t == "(" and i > 0 and _is_ident(toks[i - 1]):
                    name = toks[i - 1]
                    if name in _KEYWORDS or name in PURE_CALLS or name in sim_only:
                        continue
                    if i > 1 and (_is_ident(toks[i - 2]) and toks[i - 2] not in ("return", "else")
                                  or toks[i - 2] in (">", "*", "&")):
                        continue  # a declaration with an initializer: `Type name(...)`
                    out.append(f"{where}: call to '{name}' in a sim-only block: only C-sim-only "
                               f"functions and {sorted(PURE_CALLS)} may be called")
    return out
