"""Which frame a ``warnings.warn(..., stacklevel)`` call names, under mutation testing too."""

import pathlib
import sys


def _in_mutmut_or_gradlab(frame) -> bool:
    package = frame.f_globals.get("__name__", "").partition(".")[0]
    return package in ("mutmut", "gradlab")


def frame_named_by_stacklevel(stacklevel):
    """The frame ``warnings.warn(..., stacklevel)`` names when called by our caller.

    Counted as Python counts (every frame) when that lands outside gradlab and mutmut: a level
    from :func:`gradlab.errors.caller_stacklevel`, which skips mutmut's trampolines itself.
    Else counted in the program's own frames, the trampolines mutmut adds skipped: a fixed
    level written for the program's frames. Without mutmut both counts agree."""
    caller = sys._getframe(2)  # the function that called warnings.warn
    frame = caller
    for _ in range(stacklevel - 1):
        frame = frame.f_back
    if not _in_mutmut_or_gradlab(frame):
        return frame
    frame = caller
    for _ in range(stacklevel - 1):
        frame = frame.f_back
        while "mutmut" in pathlib.Path(frame.f_code.co_filename).parts:
            frame = frame.f_back
    return frame
