"""Progress reporting for long work: bars on a terminal, one plain line per stage elsewhere.

tqdm's bars redraw with carriage returns and cursor codes; in a log file or a CI console that
becomes hundreds of lines of noise. :func:`progress` therefore picks one of three modes:

* ``"bar"``: a tqdm bar (stderr is a terminal; tqdm comes with the ``studies`` extra and is
  imported only here);
* ``"lines"``: one line ``gradlab: <stage> ...`` when the stage starts and one
  ``gradlab: <stage> done (<n> steps, <s> s)`` when it ends (stderr is not a terminal), or
  ``gradlab: <stage> stopped (<k> of <n> steps, <s> s)`` when it ends early (Ctrl-C, an error);
* ``"off"``: nothing (``gradlab report --no-progress``).

The mode is chosen once per process (:func:`set_progress_mode`; ``"auto"`` decides from
``sys.stderr.isatty()`` at the time a stage starts).

Example:
    >>> set_progress_mode("off")
    >>> sum(progress(range(3), desc="counting"))
    3
    >>> set_progress_mode("auto")
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

from gradlab.errors import GradlabError
from gradlab.extras import require

MODES = ("auto", "bar", "lines", "off")
"""Accepted values of :func:`set_progress_mode`."""

_mode = "auto"


def set_progress_mode(mode: str) -> None:
    """Choose how :func:`progress` reports: one of :data:`MODES`."""
    global _mode
    if mode not in MODES:
        raise GradlabError(f"progress mode must be one of {list(MODES)}; got {mode!r}")
    _mode = mode


def progress_mode() -> str:
    """The mode in force now, with ``"auto"`` resolved against the current stderr."""
    if _mode != "auto":
        return _mode
    isatty = getattr(sys.stderr, "isatty", None)
    return "bar" if isatty is not None and isatty() else "lines"


class _PlainProgress:
    """tqdm's small interface (iterate, ``update``, ``close``, ``set_postfix``) as two lines."""

    def __init__(
        self, iterable: Iterable | None, total: int | None, desc: str, quiet: bool, unit: str
    ):
        self.iterable = iterable
        self.unit = unit
        self.total = total
        self.desc = desc
        self.quiet = quiet
        self.count = 0
        self.started = time.perf_counter()
        self.closed = False
        self._say(f"{desc} ..." if total is None else f"{desc} ({self._count(total)}) ...")

    def _count(self, number: int) -> str:
        return f"{number} {self.unit}{'' if number == 1 else 's'}"

    def _say(self, text: str) -> None:
        if not self.quiet:
            print(f"gradlab: {text}", file=sys.stderr, flush=True)

    def __iter__(self) -> Iterator:
        finished = False
        try:
            for item in self.iterable if self.iterable is not None else ():
                yield item
                self.count += 1
            finished = True
        finally:  # left early (a break, an error, Ctrl-C): stopped, even without a total
            self.close(stopped=not finished)

    def __enter__(self) -> _PlainProgress:
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        self.close(stopped=exc_type is not None)

    def update(self, n: int = 1) -> None:
        self.count += n

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        """Ignored: a plain log gets no per-step detail."""

    def close(self, stopped: bool = False) -> None:
        """Say the stage is done, or that it stopped: left by an exception (Ctrl-C) or short
        of its ``total`` (``stopped (k of n steps, ...)``), so that no log calls unfinished
        work done."""
        if self.closed:
            return
        self.closed = True
        seconds = time.perf_counter() - self.started
        if stopped or (self.total is not None and self.count < self.total):
            reached = (self._count(self.count) if self.total is None
                       else f"{self.count} of {self._count(self.total)}")  # fmt: skip
            self._say(f"{self.desc} stopped ({reached}, {seconds:.1f} s)")
            return
        self._say(f"{self.desc} done ({self._count(self.count)}, {seconds:.1f} s)")


def progress(
    iterable: Iterable | None = None,
    *,
    total: int | None = None,
    desc: str,
    leave: bool = False,
    unit: str = "step",
):
    """A progress reporter for one stage of long work, in the mode of :func:`progress_mode`.

    Args:
        iterable: what to iterate over (optional when the caller calls ``update``).
        total: number of steps, if ``iterable`` has no ``len``.
        desc: the stage's label, distinct for every stage (it names the stage in plain logs).
        leave: keep the finished bar on screen (bar mode only).
        unit: the unit shown by the bar.

    Returns:
        An object with tqdm's interface: iterate over it, or call ``update`` and ``close``.
    """
    if total is None and iterable is not None and hasattr(iterable, "__len__"):
        total = len(iterable)
    mode = progress_mode()
    if mode == "bar":
        tqdm = require("tqdm.auto", "studies", "progress bars (gradlab.progress)").tqdm
        return tqdm(iterable, total=total, desc=desc, leave=leave, unit=unit)
    return _PlainProgress(iterable, total, desc, quiet=mode == "off", unit=unit)
