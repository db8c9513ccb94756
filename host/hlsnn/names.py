"""Names that come from data (a compiled model's program, an ONNX graph) and end up in files
hlsnn generates or in paths it writes to.

Three rules, applied where a name enters:

* :func:`check_slug`: a name that becomes a folder or file name (a compiled model's ``name``,
  an accelerator's ``stem``): ``paths._FOLDER_NAME`` (letters, digits, ``_ . @ + -``, not
  starting with a dot, at most 128 characters), so ``../..``, ``/etc`` or a newline cannot
  reach a path.
* :func:`check_label`: a free-form name (an ONNX node or tensor name such as
  ``/layer1/layer1.0/conv1/Conv``): printable characters only (no control character, no line
  or paragraph separator, no format character), at most :data:`MAX_LABEL` characters.
* :func:`comment`: what generated C++ and TCL embed in a comment. Never the name itself: a
  reduced form in ASCII letters, digits, blanks and ``_ . : , + @ - > = ( ) [ ] /``, everything
  else replaced by ``_``, with ``/*``, ``*/`` (no ``*`` at all), a trailing backslash (a
  ``//`` comment's line splice) and the trigraph ``??/`` impossible (no ``\\`` or ``?``). A
  newline in a name therefore cannot end a ``//`` or ``#`` comment and have what follows
  compiled or run.
"""
from __future__ import annotations

import re
import unicodedata

from .errors import InputError

#: The longest free-form name hlsnn takes from a model.
MAX_LABEL = 256
_COMMENT_OK = re.compile(r"[^A-Za-z0-9 _.:,+@\->=()\[\]/]")


def check_slug(what: str, name) -> str:
    """``name`` if it can name a folder or file (see module docstring), else :class:`InputError`."""
    from .paths import _FOLDER_NAME
    if not isinstance(name, str) or not _FOLDER_NAME.fullmatch(name):
        raise InputError(f"{what} {_show(name)}: not a valid name (letters, digits, _ . @ + -, at most 128, not "
                         f"starting with a dot; no path separators)")
    return name


def check_label(what: str, name) -> str:
    """``name`` if it is a non-empty printable string of at most :data:`MAX_LABEL` characters."""
    if not isinstance(name, str):
        raise InputError(f"{what} {_show(name)}: not a string")
    if not name or len(name) > MAX_LABEL:
        raise InputError(f"{what} {_show(name)}: {len(name)} characters; a name has 1..{MAX_LABEL}")
    bad = next((c for c in name if unicodedata.category(c)[0] in "CZ" and c != " "), None)
    if bad is not None:
        raise InputError(f"{what} {_show(name)}: holds the character {bad!r} (U+{ord(bad):04X}); names must be "
                         f"printable (no newline, control, separator or format characters)")
    return name


def comment(text) -> str:
    """``text`` reduced to what a generated C++ ``//`` or TCL ``#`` comment may hold (module
    docstring), at most 200 characters."""
    s = _COMMENT_OK.sub("_", str(text))
    return s if len(s) <= 200 else s[:197] + "..."


def c_ident(text) -> str:
    """An ASCII C identifier fragment of ``text`` (for include guards): letters and digits kept,
    everything else ``_``."""
    return "".join(c if c.isascii() and c.isalnum() else "_" for c in str(text))


def _show(name) -> str:
    from .errors import excerpt
    return excerpt(name, 60)
