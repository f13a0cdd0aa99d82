"""Starting child processes out of the reach of Ctrl-C and SIGTERM.

A process started with the ``spawn`` method is started in two steps: it is spawned, then sent
its work through a pipe, and only after both does its parent know it. An exception raised
between them (Ctrl-C or SIGTERM turned into one) leaves a process that nothing ends: it reads
an empty pipe and prints ``EOFError``'s traceback. And a child that is still importing when
the user presses Ctrl-C in a terminal (which signals every process of the command) prints a
``KeyboardInterrupt`` traceback of its own, under the parent's one line.

:func:`starting_children` closes both: it holds the two signals back while the block starts
the children, and the children it starts never see Ctrl-C (it reaches the parent, which ends
them).
"""

from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["starting_children"]


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
        self.arrived: list[int] = []
        self.previous: dict = {}
        if threading.current_thread() is threading.main_thread():  # Python's handlers run there
            for number in (signal.SIGINT, signal.SIGTERM):
                # None: set outside Python; SIG_IGN: nothing to hold back, and the children
                # inherit it (nohup): both left as they are
                if signal.getsignal(number) not in (None, signal.SIG_IGN):
                    self.previous[number] = signal.signal(number, self._arrived)
        if self.masks:
            self.blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    def _arrived(self, number: int, frame: object) -> None:
        self.arrived.append(number)

    def __exit__(self, *exception: object) -> None:
        if self.masks:  # one that came meanwhile is delivered now, to _arrived
            signal.pthread_sigmask(signal.SIG_SETMASK, self.blocked)
        for number, handler in self.previous.items():
            signal.signal(number, handler)
        if self.arrived:  # the first, to the handler that was in place
            signal.raise_signal(self.arrived[0])
