"""Starting child processes out of the reach of Ctrl-C and SIGTERM.

A process started with the ``spawn`` method is started in two steps: it is spawned, then sent
its work through a pipe, and only after both does its parent know it. An exception raised
between them (Ctrl-C or SIGTERM turned into one) leaves a process that nothing ends: it reads
an empty pipe and prints ``EOFError``'s traceback. And a child that is still importing when
the user presses Ctrl-C in a terminal (which signals every process of the command) prints a
``KeyboardInterrupt`` traceback of its own, under the parent's one line.

:func:`starting_children` closes both: it holds the two signals back while the block starts
the children, and the children it starts never see Ctrl-C (it reaches the parent, which ends
them). :class:`HeldSignals` is its first half alone: the two signals held back while a block
runs, for a block that must run to its end (the moves that put a result in place).
"""

from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["HeldSignals", "starting_children"]


def starting_children() -> contextlib.AbstractContextManager[None]:
    """Run the block, which starts child processes, before Ctrl-C or SIGTERM acts.

    In the main thread (where Python runs signal handlers) a Ctrl-C or SIGTERM that arrives in
    the block is handed to the handler that was in place as the block ends, so that no
    exception leaves a child half started. In any thread, Ctrl-C is blocked while the block
    runs, and the children started in it inherit that: they leave Ctrl-C to their parent. A
    child that needs Ctrl-C can unblock it (``signal.pthread_sigmask``). Where the platform
    has signal masks it first starts :mod:`multiprocessing`'s resource tracker, if it is not
    running yet (one small process for the rest of this one); where it has none (Windows)
    the block just runs.

    Example:
        >>> import subprocess, sys
        >>> with starting_children():
        ...     child = subprocess.Popen([sys.executable, "-c", "pass"])
        >>> child.wait()
        0
    """
    return _StartingChildren()


class HeldSignals:
    """Ctrl-C and SIGTERM held back while the block runs, in the main thread (where Python runs
    signal handlers; elsewhere the block just runs): each that arrives is noted in
    :attr:`arrived`, in order, and the handlers in place before are back as the block ends,
    whether it ends or raises. What to do with the signals that arrived is the caller's.

    A signal without a Python handler (set outside Python) or ignored (``SIG_IGN``, as under
    nohup) is left as it is: an ignored one stays ignored, and is never noted.

    Example:
        >>> import os, signal
        >>> calls = []
        >>> previous = signal.signal(signal.SIGTERM, lambda number, frame: calls.append(number))
        >>> with HeldSignals() as held:
        ...     os.kill(os.getpid(), signal.SIGTERM)
        >>> held.arrived == [signal.SIGTERM], calls
        (True, [])
        >>> _ = signal.signal(signal.SIGTERM, previous)
    """

    def __enter__(self) -> HeldSignals:
        self.arrived: list[int] = []
        self.previous: dict = {}
        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(number) not in (None, signal.SIG_IGN):
                    self.previous[number] = signal.signal(number, self._arrived)
        return self

    def _arrived(self, number: int, frame: object) -> None:
        self.arrived.append(number)

    def __exit__(self, *exception: object) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)


class _StartingChildren:
    """The block of :func:`starting_children` (a class rather than a generator, so that its
    steps can be mutated by the mutation tests, which leave decorated functions out)."""

    def __enter__(self) -> None:
        self.masks = hasattr(signal, "pthread_sigmask")
        if self.masks:
            # multiprocessing starts its resource tracker on first use, and unblocks Ctrl-C
            # after (SIG_UNBLOCK, not the mask it found): started here, not in the block.
            from multiprocessing import resource_tracker

            resource_tracker.ensure_running()
        self.held = HeldSignals().__enter__()
        if self.masks:
            self.blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    def __exit__(self, *exception: object) -> None:
        if self.masks:  # one that came meanwhile is delivered now, to the held handler
            signal.pthread_sigmask(signal.SIG_SETMASK, self.blocked)
        self.held.__exit__(*exception)
        if self.held.arrived:  # the first, to the handler that was in place
            signal.raise_signal(self.held.arrived[0])
