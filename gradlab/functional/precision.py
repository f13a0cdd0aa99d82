"""The losses' precision under ``torch.autocast``: they compute in their inputs' dtype.

Autocast runs matrix products (``mm``, ``bmm``, ``matmul``, ``linear``) in bfloat16 or float16
and leaves a loss function's own arithmetic to the function. torch puts its own losses
(``cross_entropy``, ``nll_loss``, ...) on autocast's float32 list; gradlab's losses go one step
further and switch autocast off inside, so float32 inputs give a float32 computation (the cosine
scores of embeddings included) and half-precision inputs follow the documented half-precision
rules (SmoothAP, NT-Xent, VSE++, SigLIP, FastAP, FAPPY and Blackbox AP widen to float32).
Under autocast a product of float32 embeddings in bfloat16 moves the fine bins of FastAP
(Cakir et al. 2019) and FAPPY, and Blackbox AP's ranks, far enough to change the gradient's
direction: that is why.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

import torch

from gradlab.errors import CallFormError

Function = TypeVar("Function", bound=Callable)


def _device_type(args: tuple, kwargs: dict) -> str | None:
    """The device type of the first tensor among the arguments (None if there is none)."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value.device.type
    return None


def outside_autocast(function: Function) -> Function:
    """``function`` run with autocast off on its tensors' device (a no-op when it is off).

    The device is the first tensor argument's (a loss's tensors share one device); checking
    whether autocast is on costs one call, so a call outside autocast pays nothing more.

    Example:
        >>> @outside_autocast
        ... def product(a, b):
        ...     return a @ b
        >>> a = torch.ones(2, 2)
        >>> with torch.autocast("cpu", dtype=torch.bfloat16):
        ...     (a @ a).dtype, product(a, a).dtype
        (torch.bfloat16, torch.float32)
    """

    @functools.wraps(function)
    def run(*args, **kwargs):
        device_type = _device_type(args, kwargs)
        try:
            if device_type is None or not autocast_on(device_type):
                return function(*args, **kwargs)
            with torch.autocast(device_type, enabled=False):
                return function(*args, **kwargs)
        except TypeError as error:  # a call that does not fit the signature: said as gradlab's
            _refuse_call_form(function, args, kwargs, error)
            raise

    run.refuses_misfit_calls = True  # type: ignore[attr-defined]
    return run  # type: ignore[return-value]


def call_form_checked(function: Function, *, method: bool = False) -> Function:
    """``function``, refusing a call that does not fit its signature (an argument too many, a
    misspelt keyword) with a :class:`~gradlab.errors.CallFormError` (a ``GradlabError`` and a
    ``TypeError``) that shows the signature
    and names its keyword-only arguments, where Python raises a bare ``TypeError``. A
    ``TypeError`` raised inside a call that fits is left as it is. Costs a ``try`` per call.

    ``method``: ``function`` is a method (it takes ``self`` first): the signature is shown as
    ``Class.method(...)`` (``Class(...)`` for ``__init__``) without ``self``, ``Class`` the
    class of the object called (a subclass that inherits the method is named itself).

    Example:
        >>> from gradlab import GradlabError
        >>> @call_form_checked
        ... def width(tau, *, eps=0.005):
        ...     return tau * eps
        >>> try:
        ...     width(0.1, 0.01)
        ... except GradlabError as error:
        ...     print(error)
        width(tau, *, eps=0.005): too many positional arguments; eps is keyword-only: pass it by name (eps=...)
    """  # noqa: E501

    @functools.wraps(function)
    def checked(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except TypeError as error:
            owner = type(args[0]).__name__ if method and args else None
            _refuse_call_form(function, args, kwargs, error, owner)
            raise

    checked.refuses_misfit_calls = True  # type: ignore[attr-defined]
    return checked  # type: ignore[return-value]


def _refuse_call_form(function: Callable, args: tuple, kwargs: dict, error: TypeError,
                      owner: str | None = None) -> None:  # fmt: skip
    """Raise a :class:`~gradlab.errors.GradlabError` when ``args`` and ``kwargs`` do not fit
    ``function``'s signature (Python's ``TypeError`` names no keyword-only argument), naming
    its keyword-only arguments; return when they fit (the ``TypeError`` came from inside).
    ``owner``: the class name of a method's object, shown in place of ``self``."""
    signature = inspect.signature(function)
    try:
        signature.bind(*args, **kwargs)
    except TypeError as wrong:
        kinds = [parameter.kind for parameter in signature.parameters.values()]
        named = [name for name, parameter in signature.parameters.items()
                 if parameter.kind is inspect.Parameter.KEYWORD_ONLY]  # fmt: skip
        # Too many positional arguments: what was meant by name is one of the keyword-only.
        overflow = inspect.Parameter.VAR_POSITIONAL not in kinds and len(args) > sum(
            kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            for kind in kinds)  # fmt: skip
        by_name = (f"; {', '.join(named)} {'is' if len(named) == 1 else 'are'} keyword-only: "
                   f"pass {'it' if len(named) == 1 else 'them'} by name ({named[0]}=...)"
                   if named and overflow else "")  # fmt: skip
        shown = list(signature.parameters.values())[1 if owner is not None else 0:]
        plain = signature.replace(
            parameters=[parameter.replace(annotation=inspect.Parameter.empty)
                        for parameter in shown],
            return_annotation=inspect.Signature.empty,
        )  # fmt: skip
        name = function.__name__ if owner is None else (
            owner if function.__name__ == "__init__" else f"{owner}.{function.__name__}")
        raise CallFormError(f"{name}{plain}: {wrong}{by_name}") from error


def autocast_on(device_type: str) -> bool:
    """Whether autocast is on for ``device_type`` (False for a type autocast does not know).

    ``torch.is_autocast_enabled(device_type)`` takes a device type from torch 2.4 on; before,
    it takes none and answers for CUDA, and ``torch.is_autocast_cpu_enabled()`` for the CPU
    (other device types then have no autocast this check needs to see)."""
    try:
        return bool(torch.is_autocast_enabled(device_type))
    except RuntimeError:  # e.g. "meta": no autocast there
        return False
    except TypeError:  # torch < 2.4: no device argument
        if device_type == "cpu":
            return bool(torch.is_autocast_cpu_enabled())
        return bool(torch.is_autocast_enabled()) if device_type == "cuda" else False


_SCORED_FROM: ContextVar[str | None] = ContextVar("gradlab_scored_from", default=None)
"""What the scores of a gradient-overflow refusal were made from (:func:`scores_made_from`)."""


@contextmanager
def scores_made_from(inputs: str) -> Iterator[None]:
    """Within the block, a refusal of :func:`gradient_overflow_message` names ``inputs`` (what
    a loss called on embeddings made its cosine scores of: ``"embeddings"``, ``"queries and
    candidates"``) where it names ``scores`` otherwise: the caller passed no scores.

    Example:
        >>> with scores_made_from("embeddings"):
        ...     print(gradient_overflow_message(torch.float16, "it can reach 1e+05",
        ...                                     "pass float32 {inputs}")[:60])
        embeddings (through their cosine scores) must keep the gradi
    """
    token = _SCORED_FROM.set(inputs)
    try:
        yield
    finally:
        _SCORED_FROM.reset(token)


def gradient_overflow_message(dtype: torch.dtype, reach: str, remedy: str) -> str:
    """The refusal of half-precision scores whose ``dL/dS`` (computed in float32, returned in
    ``dtype``) could pass ``dtype``'s largest value: ``reach`` states the bound, ``remedy``
    what to pass instead (``{inputs}`` in it: ``scores``, or what :func:`scores_made_from`
    names). One wording for every loss that checks it.

    Example:
        >>> print(gradient_overflow_message(torch.float16, "it can reach 1e+05",
        ...                                 "pass float32 {inputs}"))
        ... # doctest: +NORMALIZE_WHITESPACE
        scores must keep the gradient within torch.float16's largest value 65504 (dL/dS is
        computed in float32 and returned in the scores' dtype); it can reach 1e+05; pass
        float32 scores
    """
    made_from = _SCORED_FROM.get()
    inputs = "scores" if made_from is None else made_from
    subject = "scores" if made_from is None else f"{made_from} (through their cosine scores)"
    return (
        f"{subject} must keep the gradient within {dtype}'s largest value "
        f"{torch.finfo(dtype).max:.6g} (dL/dS is computed in float32 and returned in the "
        f"scores' dtype); {reach}; {remedy.format(inputs=inputs)}"
    )
