"""Typed errors. Each also inherits a builtin so existing ``except`` clauses keep working.

Messages say what was expected, what was found and what to change. User mistakes (a bad
config, a bad array) raise these and the CLI prints them as one line, never a traceback.
"""


class HlsnnError(Exception):
    """Base class of every error hlsnn raises on purpose."""


def excerpt(value, limit: int = 120) -> str:
    """``repr(value)`` bounded to about ``limit`` characters, also for huge or deeply nested
    values (reprlib cuts long lists, strings and nesting before anything is expanded)."""
    import reprlib
    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxtuple, r.maxdict, r.maxset = 3, 6, 6, 6, 6
    r.maxstring, r.maxother, r.maxlong = limit, limit, 40
    s = r.repr(value)
    return s if len(s) <= limit else s[:limit - 3] + "..."


class ConfigError(HlsnnError, ValueError):
    """A config file is wrong: names the file, the key, the bad value (a bounded excerpt) and
    what is allowed."""

    def __init__(self, source, key, value, allowed):
        self.source, self.key, self.value, self.allowed = str(source), key, value, allowed
        where = f"{self.source}: " if self.source else ""
        keypart = f"{key} = {excerpt(value)}: " if key else ""
        super().__init__(f"{where}{keypart}{allowed}")


class InputError(HlsnnError, ValueError):
    """An array handed to the library has the wrong shape, dtype or range."""


class CompileError(HlsnnError, RuntimeError):
    """g++ failed on rendered C++: carries the command and the compiler's message."""

    def __init__(self, argv, stderr, source_path, log_path=None):
        self.argv, self.stderr, self.source_path, self.log_path = list(argv), stderr, source_path, log_path
        lines = stderr.strip().splitlines()
        first = next((i for i, line in enumerate(lines) if "error" in line), 0)
        start = max(0, first - 2)
        excerpt = "\n".join(lines[start:start + 20])
        more = f"\n  full compiler output: {log_path}" if log_path else ""
        super().__init__(f"C-simulation compile failed for {source_path}\n  command: {' '.join(map(str, argv))}\n"
                         f"{excerpt}{more}")


class CsimError(HlsnnError, RuntimeError):
    """The C-simulated kernel reported a protocol error (missing TLAST, leftover words...)."""


class MissingDependency(HlsnnError, ImportError):
    """An optional package or tool is missing; the message says how to install it."""


class UnsupportedModelError(HlsnnError, ValueError):
    """An ONNX model has nodes hlsnn cannot run: lists every one (name, op type, reason)."""

    def __init__(self, path, nodes):
        self.path, self.nodes = path, list(nodes)
        lines = "\n".join(f"  {name} ({op}): {why}" for name, op, why in self.nodes)
        super().__init__(f"{path}: {len(self.nodes)} unsupported node(s), which no accelerator or host rule of "
                         f"hlsnn runs; --host-fallback runs each of them on the host in float32 with onnx's "
                         f"reference implementation (not on the FPGA):\n{lines}")
