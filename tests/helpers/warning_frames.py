"""Which frame a ``warnings.warn(..., stacklevel)`` call names, under mutation testing too."""

import pathlib
import sys


def frame_named_by_stacklevel(stacklevel):
    """The frame ``warnings.warn(..., stacklevel)`` names when called by our caller, counted in
    the program's own frames: the ones mutmut's trampolines add (in its package) are skipped."""
    frame = sys._getframe(2)  # the function that called warnings.warn
    for _ in range(stacklevel - 1):
        frame = frame.f_back
        while "mutmut" in pathlib.Path(frame.f_code.co_filename).parts:
            frame = frame.f_back
    return frame
