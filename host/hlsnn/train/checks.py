"""The one check of hlsnn.train's numeric arguments and of ``scripts/train_qat.py``'s options: a
declared :class:`Range` refuses a value outside it with one line naming the argument (or
option), the value and what is allowed, an :class:`~hlsnn.errors.InputError` (a ``ValueError``)
in the library and argparse's one-line error in the script (:meth:`Range.arg`, an argparse
``type=``). NaN is outside every range, and so is an infinity unless the range says
``finite=False``; a bool is not a number; a whole number is refused where it must be an integer
(2.5 epochs), and accepted as such where it is one (2.0 is 2)::

    SPARSITY = Range(0, 1, hi_open=True)               # [0, 1)
    SPARSITY.check("target", 0.9)                      # 0.9
    SPARSITY.check("target", float("nan"))             # InputError: target = nan: a number in [0, 1)
    ap.add_argument("--sparsity", type=SPARSITY.arg("--sparsity"))
"""
from __future__ import annotations

import argparse
import math
import numbers
import os

from ..errors import InputError, printable


class Range:
    """Numbers from ``lo`` to ``hi`` (None: unbounded on that side), each end included unless
    ``lo_open`` / ``hi_open``; whole numbers only with ``integer``; ``finite`` (default True):
    no infinity. ``none``: None is allowed too (an argument whose default is None)."""

    def __init__(self, lo=None, hi=None, *, integer=False, lo_open=False, hi_open=False, finite=True, none=False):
        self.lo, self.hi, self.integer, self.none = lo, hi, integer, none
        self.lo_open, self.hi_open, self.finite = lo_open, hi_open, finite

    def describe(self):
        """What is allowed, in words: ``a whole number >= 1``, ``a number in [0, 1)``..."""
        kind = "a whole number" if self.integer else "a finite number" if self.finite and (
            self.lo is None or self.hi is None) else "a number"
        lo, hi = self.lo, self.hi
        if lo is not None and hi is not None:
            text = f"{kind} in {'(' if self.lo_open else '['}{lo}, {hi}{')' if self.hi_open else ']'}"
        elif lo is not None:
            text = f"{kind} {'>' if self.lo_open else '>='} {lo}"
        elif hi is not None:
            text = f"{kind} {'<' if self.hi_open else '<='} {hi}"
        else:
            text = kind
        return text + (" (or None)" if self.none else "")

    def ok(self, value):
        """Whether ``value`` is in the range (a bool, a string, NaN are not)."""
        if value is None:
            return self.none
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        v = float(value)
        if math.isnan(v) or (self.finite and math.isinf(v)):
            return False
        if self.integer and not (math.isfinite(v) and v == int(v)):
            return False
        if self.lo is not None and (v < self.lo or (self.lo_open and v == self.lo)):
            return False
        if self.hi is not None and (v > self.hi or (self.hi_open and v == self.hi)):
            return False
        return True

    def check(self, name, value):
        """``value`` (an integer one as ``int`` with ``integer``), or an :class:`InputError`
        ``"<name> = <value>: <what is allowed>"``."""
        if not self.ok(value):
            raise InputError(f"{name} = {value!r}: {self.describe()}")
        return int(value) if self.integer and value is not None else value

    def arg(self, option):
        """An argparse ``type=``: the option's text as a number in the range; argparse prints
        ``argument OPTION: 'TEXT' is not <what is allowed>`` and exits 2 otherwise."""
        def parse(text):
            try:
                v = int(text) if self.integer else float(text)
            except ValueError:
                try:
                    v = float(text)            # "2.0" for a whole number; "2.5" is refused below
                except ValueError:
                    v = None
            if v is None or not self.ok(v):
                raise argparse.ArgumentTypeError(f"{text!r} is not {self.describe()}")
            return int(v) if self.integer else v
        parse.__name__ = f"{option} value"
        return parse


def choice(name, value, allowed):
    """``value`` when it is one of ``allowed``, else an :class:`InputError` naming them."""
    if isinstance(value, (list, dict, set)) or value not in allowed:
        raise InputError(f"{name} = {value!r}: one of {', '.join(map(str, allowed))}")
    return value


def parsed(parser):
    """A rule of an option's text from ``parser`` (hlsnn.train's own, which raises a ValueError
    naming what is allowed): ``rule(option)`` is an argparse ``type=`` that refuses the text with
    that message and otherwise keeps the text as it is."""
    def rule(option):
        def parse(text):
            try:
                parser(text)
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
            return text
        parse.__name__ = f"{option} value"
        return parse
    return rule


def existing_file(option):
    """An argparse ``type=``: the path of an existing regular file."""
    def parse(text):
        if not os.path.isfile(text):
            what = "a folder" if os.path.isdir(text) else "no such file"
            raise argparse.ArgumentTypeError(f"{printable(text)!r}: {what}")
        return text
    parse.__name__ = f"{option} file"
    return parse


def writable_path(option):
    """An argparse ``type=``: a path whose folder exists (the file is written there)."""
    def parse(text):
        folder = os.path.dirname(os.path.abspath(text))
        if not text or os.path.isdir(text) or not os.path.isdir(folder):
            what = "a folder" if text and os.path.isdir(text) else f"its folder {folder} does not exist"
            raise argparse.ArgumentTypeError(f"{printable(text)!r}: {what}; give a file in an existing folder")
        return text
    parse.__name__ = f"{option} path"
    return parse


#: the ranges hlsnn.train and scripts/train_qat.py share
SPARSITY = Range(0, 1, hi_open=True)                    # a fraction of weights zeroed: [0, 1)
FRACTION = Range(0, 1)                                  # [0, 1]
FRACTION_BELOW_1 = Range(0, 1, hi_open=True)            # [0, 1)
POSITIVE = Range(0, lo_open=True)                       # a finite number > 0 (rates, temperatures)
NONNEG = Range(0)                                       # a finite number >= 0
COUNT = Range(0, integer=True)                          # a whole number >= 0 (epochs, seeds, pixels)
COUNT1 = Range(1, integer=True)                         # a whole number >= 1
OVERFLOW_RATIO = Range(0, 0.5)                          # a deploy config's calibration: overflow_ratio
