"""The one exception type of gradlab, and where its warnings point.

Every input error raised by gradlab is a :class:`GradlabError`. It subclasses
:class:`ValueError`, so code that already catches ``ValueError`` keeps working.
Messages name the argument, what was received and what is allowed. A name looked up by key
that does not exist raises :class:`UnknownKeyError`, a :class:`GradlabError` that is also a
:class:`KeyError`; a call that does not fit a function's signature raises
:class:`CallFormError`, a :class:`GradlabError` that is also a :class:`TypeError`.
"""

from __future__ import annotations

import functools
import os
import sys
import types


class GradlabError(ValueError):
    """Invalid input to a gradlab function or class.

    Example:
        >>> from gradlab import GradlabError
        >>> import torch
        >>> from gradlab.functional import smooth_ap
        >>> try:
        ...     smooth_ap(torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool), tau=-1.0)
        ... except GradlabError as error:
        ...     print(error)
        tau must be a finite number in [1e-30, inf) (1/tau must stay finite in float32); got -1.0
    """


class RunExistsError(GradlabError):
    """A Monitor's ``log_dir`` already holds a run and neither ``resume`` nor ``overwrite`` was
    passed (never merged): a :class:`GradlabError`, raised apart so that a framework callback
    can say where those options go.

    Example:
        >>> issubclass(RunExistsError, GradlabError)
        True
    """


class UnknownKeyError(GradlabError, KeyError):
    """A name looked up by key (``result["name"]``) that is not there.

    Both a :class:`GradlabError` and a :class:`KeyError` (code that catches either keeps
    working), printed as its message: Python prints a plain ``KeyError``'s message in quotes.

    Example:
        >>> print(UnknownKeyError("'loss' is not a quantity; the quantities are ['scores']"))
        'loss' is not a quantity; the quantities are ['scores']
    """

    __str__ = BaseException.__str__


class CallFormError(GradlabError, TypeError):
    """A call that does not fit a function's signature (an argument too many, a misspelt
    keyword), said with the signature and its keyword-only arguments.

    Both a :class:`GradlabError` and a :class:`TypeError`, which is what Python raises for such
    a call: code that catches either keeps working, the same for a gradlab function and for a
    class (whose constructor raises Python's own ``TypeError``).

    Example:
        >>> issubclass(CallFormError, GradlabError), issubclass(CallFormError, TypeError)
        (True, True)
    """


@functools.cache
def _library_roots() -> tuple[str, ...]:
    """The folders of gradlab and torch: frames there are not the user's."""
    import torch

    return (
        os.path.dirname(os.path.abspath(__file__)) + os.sep,
        os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
    )


_NOT_CALLERS = frozenset({"mutmut"})
"""Packages whose frames are never the user's: mutation testing's trampolines, which wrap every
function of the package under test (so a warning still names the test's line there)."""


def _package(frame: types.FrameType) -> str:
    """The top-level package of the module a frame runs in."""
    return frame.f_globals.get("__name__", "").partition(".")[0]


def caller_stacklevel(packages: frozenset[str] = frozenset()) -> int:
    """The ``stacklevel`` that makes a warning name the first frame outside gradlab and torch
    (and outside the top-level ``packages``, e.g. a trainer that calls the user's loss).

    Call it from the function that calls :func:`warnings.warn`. It walks the frames from
    that function outwards and skips every frame whose file lies inside the gradlab package
    or torch (``nn.Module.__call__``, a Monitor's wrapper of a watched loss, ...), so the
    warning points at the user's line however many library frames lie in between.

    Example:
        >>> import warnings
        >>> def inside_gradlab():  # a doctest's frames lie outside gradlab: level 1
        ...     return caller_stacklevel()
        >>> inside_gradlab()
        1
    """
    roots = _library_roots()
    skipped = packages | _NOT_CALLERS
    frame = sys._getframe(1)  # the function that will call warnings.warn: stacklevel 1
    while frame.f_back is not None and _package(frame) in _NOT_CALLERS:
        frame = frame.f_back  # a trampoline around this call: not on that function's stack
    level = 1
    while frame.f_back is not None and (
        os.path.abspath(frame.f_code.co_filename).startswith(roots)
        or _package(frame) in skipped
    ):
        frame = frame.f_back
        level += 1
    return level
