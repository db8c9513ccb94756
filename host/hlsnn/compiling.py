"""Running a compiler with a time bound and a word while it works.

:func:`run` runs ``argv`` like ``subprocess.run(capture_output=True, text=True)``; after
:data:`WORD_AFTER` seconds it prints one line on stderr saying what is being compiled and for
how long it will be waited on, and after ``HLSNN_COMPILE_TIMEOUT`` seconds (default
:data:`DEFAULT_TIMEOUT`) it kills the compiler and raises :class:`CompileTimeout`, whose message
names the command, the bound and the variable that sets it.
"""
from __future__ import annotations

import os
import subprocess
import sys

from .errors import HlsnnError, seconds

#: seconds a compile may take unless HLSNN_COMPILE_TIMEOUT says otherwise (a csim compile of the
#: largest shipped kernel takes about a minute on a loaded 2-core machine)
DEFAULT_TIMEOUT = 600.0
#: seconds before the one-line word on stderr
WORD_AFTER = 5.0


class CompileTimeout(HlsnnError, TimeoutError):
    """A compiler did not finish within the bound."""


def timeout() -> float:
    """``HLSNN_COMPILE_TIMEOUT`` in seconds (a positive number), else :data:`DEFAULT_TIMEOUT`."""
    raw = os.environ.get("HLSNN_COMPILE_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    return seconds("HLSNN_COMPILE_TIMEOUT", raw)


def run(argv, what, *, word_after=None) -> subprocess.CompletedProcess:
    """Run compiler command ``argv`` (``what``: what it builds, for the messages)."""
    limit = timeout()
    word_after = WORD_AFTER if word_after is None else word_after
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        try:
            out, err = proc.communicate(timeout=min(word_after, limit))
        except subprocess.TimeoutExpired:
            if word_after < limit:
                print(f"hlsnn: compiling {what} with {argv[0]} (waiting at most {limit:g} s; "
                      "HLSNN_COMPILE_TIMEOUT sets the bound) ...", file=sys.stderr, flush=True)
                try:
                    out, err = proc.communicate(timeout=limit - word_after)
                except subprocess.TimeoutExpired:
                    raise _timed_out(proc, argv, what, limit) from None
            else:
                raise _timed_out(proc, argv, what, limit) from None
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _timed_out(proc, argv, what, limit):
    proc.kill()
    proc.communicate()
    return CompileTimeout(f"compiling {what}: {argv[0]} did not finish within {limit:g} s and was stopped "
                          f"(command: {' '.join(map(str, argv))[:300]}); check the compiler (CC / CXX), or raise "
                          "the bound with HLSNN_COMPILE_TIMEOUT=<seconds>")
