"""A watched loss module that stays the loss's module: its parameters are still trained and saved.

:meth:`gradlab.Monitor.watch` and the integrations' ``watch`` wrap a loss so that its calls feed
the Monitor. A plain function in its place would hide a loss module's own parameters (the
class weights of pytorch-metric-learning's ``ArcFaceLoss`` or ``ProxyAnchorLoss``, a learnable
temperature) from the model that holds it: ``model.parameters()`` would leave them out, the
optimizer would never update them and checkpoints would not hold them. :class:`WatchedLoss` is a
``torch.nn.Module`` that shares the loss's registries of parameters, buffers and submodules, so
``parameters()``, ``state_dict()`` (with the same keys), ``load_state_dict``, ``.to()`` and
``train()`` act on the loss's own tensors, while a call goes through the watching wrapper.

A copy is the loss itself, unwatched: ``copy.deepcopy`` of a model that holds a watched loss
(an EMA or SWA copy) gives the copy a copy of the loss, called with the copy's own parameters
and never fed to the Monitor, and a pickle (``torch.save(model)``) of a loss watched by
:meth:`gradlab.Monitor.watch` holds the loss alone (a Monitor's open run folder does not travel;
watch the loaded loss again to log it).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import nn

__all__ = ["WatchedCall", "WatchedLoss", "unwatched", "watched_like", "watching_call"]

_REGISTRIES = ("_parameters", "_buffers", "_non_persistent_buffers_set", "_modules")
"""The ``nn.Module`` dictionaries a watched loss shares with the loss it wraps."""


def unwatched(loss_fn: Callable) -> Callable:
    """``loss_fn`` itself: what a pickled :class:`WatchedCall` loads as.

    Example:
        >>> unwatched(print) is print
        True
    """
    return loss_fn


class WatchedCall:
    """A watched loss function: a call runs ``call``; its attributes are the loss's; a deep copy
    or a pickle is the loss itself, unwatched (see the module docstring).

    Args:
        loss_fn: the loss.
        call: what a call runs (the Monitor's watching wrapper of ``loss_fn``).
        name: ``__name__`` (default: the loss's, else its class's).

    Example:
        >>> import copy
        >>> watched = WatchedCall(abs, lambda x: abs(x) * 10)  # a wrapper that does more
        >>> watched(-2), copy.deepcopy(watched) is abs, watched.__name__
        (20, True, 'abs')
    """

    def __init__(self, loss_fn: Callable, call: Callable, name: str | None = None) -> None:
        self.__wrapped__ = loss_fn
        self._call = call
        self.__name__ = name or getattr(loss_fn, "__name__", type(loss_fn).__name__)

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def __getattr__(self, name: str):
        """The loss's attributes (``tau``, ``temperature``...); on an instance not yet filled
        (as copy and pickle probe one) every name is missing, named as asked."""
        wrapped = self.__dict__.get("__wrapped__")
        if name.startswith("__") or wrapped is None:
            raise AttributeError(name)
        return getattr(wrapped, name)

    def __setattr__(self, name: str, value: object) -> None:
        """An attribute the loss has is set on the loss (``watched.tau = 0.1`` changes the
        loss's tau); the wrapper's own, and new ones, on the wrapper."""
        if _on_the_loss(self, name):
            setattr(self.__wrapped__, name, value)
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        """Deleted where :meth:`__setattr__` set it: on the loss unless the wrapper holds it."""
        if _on_the_loss(self, name):
            delattr(self.__wrapped__, name)
        else:
            object.__delattr__(self, name)

    def __deepcopy__(self, memo: dict) -> Callable:
        return copy.deepcopy(self.__wrapped__, memo)

    def __reduce__(self) -> tuple:
        return unwatched, (self.__wrapped__,)

    def __repr__(self) -> str:
        return f"watched {self.__wrapped__!r}"


class WatchedLoss(nn.Module):
    """``loss_fn``'s parameters, buffers and submodules, called through ``call``.

    Args:
        loss_fn: the loss module.
        call: what a call runs (the Monitor's watching wrapper of ``loss_fn``).

    Example:
        >>> loss = nn.Linear(2, 1)  # a module with parameters, standing in for a loss
        >>> watched = WatchedLoss(loss, lambda x: loss(x).sum())
        >>> [name for name, _ in watched.named_parameters()]
        ['weight', 'bias']
        >>> watched.state_dict().keys() == loss.state_dict().keys()
        True
        >>> x = torch.ones(3, 2)
        >>> watched.weight is loss.weight, torch.equal(watched(x), loss(x).sum())
        (True, True)
    """

    def __init__(self, loss_fn: nn.Module, call: Callable) -> None:
        super().__init__()
        for registry in _REGISTRIES:  # the same objects: the loss's tensors are this module's
            object.__setattr__(self, registry, getattr(loss_fn, registry))
        object.__setattr__(self, "__wrapped__", loss_fn)
        object.__setattr__(self, "__name__", type(loss_fn).__name__)  # as a loss function's
        object.__setattr__(self, "_call", call)
        object.__setattr__(self, "training", loss_fn.training)
        object.__setattr__(self, "_sealed", True)  # from here, the loss's names are the loss's

    def forward(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def train(self, mode: bool = True) -> WatchedLoss:
        """Set the mode of this module and of the loss itself (``eval()`` calls it too)."""
        super().train(mode)
        self.__wrapped__.train(mode)
        return self

    def __getattr__(self, name: str):
        """The loss's registered tensors and submodules, then its other attributes (``tau``,
        ``degenerate_batches``, ``temperature``...), then the wrapper's (an integration's
        ``callback``)."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("__"):
                raise
            for owner in (self.__dict__.get("__wrapped__"), self.__dict__.get("_call")):
                if owner is not None and hasattr(owner, name):
                    return getattr(owner, name)
            raise

    def __setattr__(self, name: str, value: object) -> None:
        """An attribute the loss has is set on the loss (``watched.tau = 0.1`` changes the
        loss's tau); the wrapper's own (its hooks, its mode) and new ones on the wrapper (a
        new parameter lands in the registries both share)."""
        if _on_the_loss(self, name):
            setattr(self.__wrapped__, name, value)
        else:
            super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        """Deleted where :meth:`__setattr__` set it: on the loss unless the wrapper holds it."""
        if _on_the_loss(self, name) and name not in self._parameters and (
            name not in self._buffers and name not in self._modules
        ):  # fmt: skip
            delattr(self.__wrapped__, name)
        else:
            super().__delattr__(name)

    def __repr__(self) -> str:
        return f"watched {self.__wrapped__!r}"

    def __deepcopy__(self, memo: dict) -> nn.Module:
        """A copy of the loss itself, unwatched, with copies of its parameters (shared, through
        ``memo``, with the rest of the copied model)."""
        return copy.deepcopy(self.__wrapped__, memo)

    def __reduce_ex__(self, protocol):
        """Pickled (``torch.save`` of the model) as the loss itself, as a deep copy is, when
        the Monitor watches it; an integration's wrapper (its callback set up again in the
        process that loads it, as Lightning's ``ddp_spawn`` does) is pickled whole."""
        if isinstance(self.__dict__.get("_call"), WatchedCall):
            return unwatched, (self.__wrapped__,)
        return super().__reduce_ex__(protocol)


def _on_the_loss(wrapper: object, name: str) -> bool:
    """Whether setting ``name`` on a watched loss sets it on the loss: an attribute the loss
    has and the wrapper does not hold itself, once the wrapper is made (:func:`watched_like`
    seals it: what its constructors set stays its own, even where the loss has the name)."""
    wrapped = wrapper.__dict__.get("__wrapped__")
    return (wrapper.__dict__.get("_sealed", False) and name not in wrapper.__dict__
            and not name.startswith("__") and hasattr(wrapped, name))  # fmt: skip


def watched_like(loss_fn: Callable, call: Callable) -> Callable:
    """``call`` in the loss's place: a :class:`WatchedLoss` for a ``torch.nn.Module`` loss (its
    parameters stay the model's), else ``call`` itself.

    Example:
        >>> def mean(x):
        ...     return x.mean()
        >>> watched_like(mean, mean) is mean, type(watched_like(nn.MSELoss(), print)).__name__
        (True, 'WatchedLoss')
    """
    if isinstance(call, WatchedCall):  # its constructors are done: the loss's names are the loss's
        object.__setattr__(call, "_sealed", True)
    if isinstance(loss_fn, torch.nn.Module):
        return WatchedLoss(loss_fn, call)
    return call


def watching_call(loss_fn: Callable) -> Callable:
    """The wrapper a watched ``loss_fn`` calls: the call inside a :class:`WatchedLoss`, else
    ``loss_fn`` itself (a watched function is its wrapper). Every ``watch`` asks it whether a
    loss it is given was watched already, and by whom.

    Example:
        >>> loss, call = nn.MSELoss(), print
        >>> watching_call(WatchedLoss(loss, call)) is call, watching_call(call) is call
        (True, True)
    """
    return loss_fn.__dict__.get("_call") if isinstance(loss_fn, WatchedLoss) else loss_fn
