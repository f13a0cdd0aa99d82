"""Argument checks shared by the public functions. Each raises :class:`GradlabError`.

A public module (the losses, ``functional``, the Monitor and ``interop`` use it): every message
names the argument, what was received and what is allowed.
"""

from __future__ import annotations

import functools
import math
import numbers
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import torch

from gradlab.errors import GradlabError, caller_stacklevel

_SKIP_VALUE_CHECKS: ContextVar[bool] = ContextVar("gradlab_skip_value_checks", default=False)


@contextmanager
def skip_value_checks() -> Iterator[None]:
    """Within the block, ``check_tensor(..., finite=True)`` reads no tensor value.

    The finiteness check reads a value back from the device (a host synchronisation on a
    GPU). Internal callers whose inputs come from an already checked computation (the
    Monitor's logged step) run inside this block; shape, dtype and device checks still run.

    Example:
        >>> with skip_value_checks():
        ...     _ = check_tensor("x", torch.tensor([float("nan")]), ndims=(1,), kind="float",
        ...                      finite=True)
    """
    token = _SKIP_VALUE_CHECKS.set(True)
    try:
        yield
    finally:
        _SKIP_VALUE_CHECKS.reset(token)


def count_noun(count: int, singular: str, plural: str | None = None) -> str:
    """``"1 argument"``, ``"0 arguments"``, ``"3 arguments"``: a count with its noun agreed.

    Example:
        >>> count_noun(1, "argument"), count_noun(2, "argument"), count_noun(0, "query", "queries")
        ('1 argument', '2 arguments', '0 queries')
    """
    return f"{count} {singular if count == 1 else (plural or singular + 's')}"


def a_or_an(word: str) -> str:
    """``word`` after its indefinite article, as a message names a type: ``"an int"``,
    ``"a float"``, ``"an ExportSink"`` (by its first letter: a vowel takes ``an``).

    Example:
        >>> a_or_an("int"), a_or_an("ExportSink"), a_or_an("dict")
        ('an int', 'an ExportSink', 'a dict')
    """
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def number_text(value: float) -> str:
    """``value`` as an error message shows it: short (``%g``) where that is the value itself,
    else every digit needed to tell it from its neighbours (``repr``): a message must never
    read ``got a = 1 > b = 1`` for ``a = 1.0000001``.

    Example:
        >>> number_text(-1.0), number_text(1e7), number_text(1.0000001192092896)
        ('-1', '1e+07', '1.0000001192092896')
        >>> number_text(10000001.0), number_text(1e6 + 0.5)
        ('10000001', '1000000.5')
    """
    value = float(value)
    short = f"{value:g}"
    if float(short) == value or value != value:
        return short
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def positional_candidate_mask(position: int) -> Callable[[Callable], Callable]:
    """Also read a positional argument at index ``position`` as ``candidate_mask=``, with a
    ``FutureWarning``: for the functions that took the mask positionally in gradlab 0.2.0
    (``gradient_anatomy``, ``soft_histogram``). The glossary passes it by keyword everywhere.

    Example:
        >>> @positional_candidate_mask(1)
        ... def masked(scores, *, candidate_mask=None):
        ...     return candidate_mask
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     masked("scores", "mask")
        'mask'
        >>> caught[0].category.__name__, str(caught[0].message).split(";")[0]
        ('FutureWarning', 'masked takes candidate_mask by keyword')
    """

    def decorate(function: Callable) -> Callable:
        @functools.wraps(function)
        def call(*args, **kwargs):
            if len(args) == position + 1:
                if "candidate_mask" in kwargs:
                    raise GradlabError(
                        f"{function.__name__} got candidate_mask twice: as argument "
                        f"{position + 1} and by keyword; pass it once, by keyword"
                    )
                warnings.warn(
                    f"{function.__name__} takes candidate_mask by keyword; a positional mask "
                    "is read as candidate_mask=, and will be refused in a later release",
                    FutureWarning,
                    stacklevel=caller_stacklevel(),  # the caller, past gradlab's wrappers
                )
                *args, kwargs["candidate_mask"] = args
            return function(*args, **kwargs)

        return call

    return decorate


def renamed_keyword(old: str, new: str) -> Callable[[Callable], Callable]:
    """Also read the keyword ``old`` as ``new``, with a ``FutureWarning``: for an argument
    renamed after a release, so that one concept has one name in every signature.

    Example:
        >>> @renamed_keyword("threshold", "eps")
        ... def region(tau, eps=0.005):
        ...     return eps
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     region(0.01, threshold=0.1)
        0.1
        >>> str(caught[0].message).split(";")[0]
        "region's threshold is now called eps"
    """

    def decorate(function: Callable) -> Callable:
        @functools.wraps(function)
        def call(*args, **kwargs):
            if old in kwargs:
                # a class's __init__ by the class's name: "GradientCounts's threshold"
                name = (function.__qualname__.rsplit(".", 1)[0]
                        if function.__name__ == "__init__" else function.__name__)  # fmt: skip
                if new in kwargs:
                    raise GradlabError(f"{name} got {new} and {old}, its old name; pass {new} only")
                warnings.warn(
                    f"{name}'s {old} is now called {new}; {old}= is read as "
                    f"{new}= and will be refused in a later release",
                    FutureWarning,
                    stacklevel=caller_stacklevel(),  # the caller, past gradlab's wrappers
                )
                kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        return call

    return decorate


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` if it is ``True`` or ``False``; a truthy string or number is refused
    (``mutants="no"`` would otherwise switch the option on).

    Example:
        >>> check_bool("mutants", False)
        False
    """
    if not isinstance(value, bool):
        raise GradlabError(f"{name} must be True or False; got {value!r}")
    return value


def check_optional_callable(name: str, value: object, signature: str = "") -> object:
    """Return ``value`` if it is ``None`` or callable; else raise naming ``name``.

    Example:
        >>> check_optional_callable("on_scores", None) is None
        True
    """
    if value is not None and not callable(value):
        raise GradlabError(
            f"{name} must be None or a callable{signature}; got {type(value).__name__} {value!r}"
        )
    return value


class ScoreRecorderSlot:
    """Mixin: a ``score_recorder`` attribute (``None`` or a callable, checked when it is set)
    and a bool ``validate`` switch; shared by gradlab's score-matrix losses and the
    pytorch-metric-learning recording distances, which hand their matrix to a Monitor.

    ``_recorder_signature`` names the callable's arguments in the error message.
    """

    _score_recorder = None
    _recorder_signature = ""

    def _set_validate(self, validate: object) -> None:
        self.validate = check_bool("validate", validate)

    @property
    def score_recorder(self) -> object:
        """``None`` or a callable (``_recorder_signature``); refused when assigned otherwise."""
        return self._score_recorder

    @score_recorder.setter
    def score_recorder(self, recorder: object) -> None:
        self._score_recorder = check_optional_callable(
            "score_recorder", recorder, self._recorder_signature
        )


def value_checks_enabled() -> bool:
    """False inside :func:`skip_value_checks` (then no check may read a tensor value).

    Example:
        >>> value_checks_enabled()
        True
    """
    return not _SKIP_VALUE_CHECKS.get()


def finite_flag(tensor: torch.Tensor, bound: float | None = None) -> torch.Tensor:
    """0-d bool tensor on ``tensor``'s device: every entry finite. Reads nothing back.

    One read-only reduction (NaN propagates through min/max), so a caller can put the flag
    into the single transfer it makes anyway instead of synchronising once more. With
    ``bound``, every entry must also lie in ``[-bound, bound]`` (same reduction); a ``bound``
    beyond the tensor's dtype (it is compared in that dtype, where it rounds to ``inf``) bounds
    nothing more, and ``+-inf`` entries are refused all the same.

    Example:
        >>> finite_flag(torch.tensor([1.0, float("nan")])).item()
        False
        >>> finite_flag(torch.tensor([1.0, -3.0]), bound=2.0).item()
        False
        >>> finite_flag(torch.tensor([float("inf")], dtype=torch.float16), bound=1e30).item()
        False
    """
    if not tensor.is_floating_point() or tensor.numel() == 0:
        return torch.ones((), dtype=torch.bool, device=tensor.device)
    low, high = torch.aminmax(tensor.detach())
    finite = torch.isfinite(low) & torch.isfinite(high)  # False for NaN and for +-inf
    if bound is not None:
        return finite & (low >= -bound) & (high <= bound)
    return finite


CANDIDATE_MASK_HINT = ("-inf is no mask here: give a left-out entry a finite score and "
                       "candidate_mask=False")
"""What a refusal of ``scores`` holding -inf adds where the function takes a ``candidate_mask``
(:func:`candidate_mask_hint`)."""


@contextmanager
def candidate_mask_hint(scores: object) -> Iterator[None]:
    """Within the block, a refusal of ``scores`` as not finite, when they hold -inf (the mask of
    a softmax written by hand), is raised again saying how the function leaves entries out
    (:data:`CANDIDATE_MASK_HINT`); any other error passes as it is. Reads values only for such
    a refusal.

    Example:
        >>> scores = torch.tensor([[0.5, -float("inf")]])
        >>> try:
        ...     with candidate_mask_hint(scores):
        ...         check_finite("scores", scores)
        ... except GradlabError as error:
        ...     print(str(error).split("; ")[-1])
        -inf is no mask here: give a left-out entry a finite score and candidate_mask=False
    """
    try:
        yield
    except GradlabError as error:
        if not (str(error).startswith("scores must be finite") and isinstance(scores, torch.Tensor)
                and bool(scores.detach().isneginf().any())):  # fmt: skip
            raise
        raise GradlabError(f"{error}; {CANDIDATE_MASK_HINT}") from None


@contextmanager
def refused_by_caller_name(**tensors: torch.Tensor) -> Iterator[None]:
    """Within the block, a :class:`GradlabError` (a refusal of values the block computed from
    ``tensors``, such as their scores) is raised again naming the first of ``tensors`` that is
    not finite, as the caller passed it; other refusals pass unchanged. Reads values only when
    the block raises: no cost on the way through.

    Example:
        >>> rows = torch.tensor([[1.0, float("nan")]])
        >>> with refused_by_caller_name(embeddings=rows):
        ...     check_finite("scores", rows @ rows.T)
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: embeddings must be finite; got NaN in row 0 (1 row of 1)
    """
    try:
        yield
    except GradlabError:
        for name, tensor in tensors.items():
            if not bool(finite_flag(tensor)):
                raise GradlabError(non_finite_message(name, tensor)) from None
        raise


NAMED_POSITIONS = 10
"""At most this many rows (or entries) are listed by :func:`non_finite_message`."""


def non_finite_message(name: str, tensor: torch.Tensor, note: str = "") -> str:
    """The message refusing a tensor with NaN or infinite entries: which kinds, and where.

    Rows (the first dimension) of a tensor of two or more dimensions, entries of a vector: the
    first :data:`NAMED_POSITIONS` of them and how many there are, so that a user can find the
    bad sample of a batch. Reads the tensor's values (call it once a check has found a
    non-finite entry, never on the path that passes). ``note`` follows the name (why the
    values must be finite).

    Example:
        >>> non_finite_message("embeddings", torch.tensor([[0.0, 1.0], [float("nan"), 2.0]]))
        'embeddings must be finite; got NaN in row 1 (1 row of 2)'
        >>> non_finite_message("gains", torch.tensor([float("inf"), float("nan"), 1.0]))
        'gains must be finite; got NaN and inf in entries 0, 1 (2 entries of 3)'
        >>> non_finite_message("scores", torch.tensor([[0.0, -float("inf")], [1.0, 2.0]]))
        'scores must be finite; got -inf in row 0 (1 row of 2)'
    """
    values = tensor.detach()
    bad = ~torch.isfinite(values)
    found = (("NaN", values.isnan()), ("inf", values.isposinf()), ("-inf", values.isneginf()))
    present = [kind for kind, where in found if bool(where.any())]
    kinds = " and ".join(present) if len(present) < 3 else "NaN, inf and -inf"
    head = f"{name} must be finite{note}; got {kinds}"
    if values.dim() == 0:
        return head
    unit = "row" if values.dim() > 1 else "entry"
    units = "rows" if values.dim() > 1 else "entries"
    where = bad.reshape(bad.shape[0], -1).any(dim=1).nonzero().flatten().tolist()
    shown = ", ".join(map(str, where[:NAMED_POSITIONS]))
    more = ", ..." if len(where) > NAMED_POSITIONS else ""
    return (f"{head} in {unit if len(where) == 1 else units} {shown}{more} "
            f"({count_noun(len(where), unit, units)} of {values.shape[0]})")  # fmt: skip


def check_in_range(
    name: str, value: object, low: float, high: float = math.inf, reason: str = ""
) -> float:
    """Return ``value`` as a float if it is a finite real number in ``[low, high]``.

    ``reason`` says why the range is what it is (printed in brackets in the message).

    Example:
        >>> check_in_range("tau", 0.5, 1e-30)
        0.5
        >>> try:
        ...     check_in_range("tau", 1e-39, 1e-30, reason="1/tau must fit float32")
        ... except GradlabError as error:
        ...     print(error)
        tau must be a finite number in [1e-30, inf) (1/tau must fit float32); got 1e-39
    """
    closing = ")" if high == math.inf else "]"
    why = f" ({reason})" if reason else ""
    message = (f"{name} must be a finite number in [{low:g}, {high:g}{closing}{why}; got "
               f"{_shown_as_number(value)}")  # fmt: skip
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise GradlabError(message)
    number = float(value)
    if not (math.isfinite(number) and low <= number <= high):
        raise GradlabError(message)
    return number


SMALLEST_TEMPERATURE = 1e-30
"""The smallest temperature (SmoothAP's ``tau``, NT-Xent's ``T``) the losses accept.

They divide scores by it and their gradients carry ``1/T``: below about ``3e-39``, ``1/T``
overflows float32 (a NaN loss or gradient); the bound keeps eight decades of headroom.
"""


def check_temperature(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite temperature ``>= SMALLEST_TEMPERATURE``.

    Example:
        >>> check_temperature("tau", 0.01)
        0.01
        >>> try:
        ...     check_temperature("tau", 1e-39)
        ... except GradlabError as error:
        ...     print(error)
        tau must be a finite number in [1e-30, inf) (1/tau must stay finite in float32); got 1e-39
    """
    return check_in_range(
        name, value, SMALLEST_TEMPERATURE, reason=f"1/{name} must stay finite in float32"
    )


def refuse_learnable(name: str, value: object, how: str) -> None:
    """Refuse a tensor given for a loss's fixed number ``name``, saying ``how`` a learnable
    one is used instead (a learnable scale multiplies the scores before the loss: the loss's
    own stays fixed, the parameter gets its gradient through the scores).

    Example:
        >>> try:
        ...     refuse_learnable("tau", torch.tensor(0.5), "scale the scores")
        ... except GradlabError as error:
        ...     print(error)
        tau must be a number, not a tensor (a learnable tau: scale the scores)
    """
    if isinstance(value, torch.Tensor):
        raise GradlabError(f"{name} must be a number, not a tensor (a learnable {name}: {how})")


def check_interpolation(value: object) -> float:
    """Blackbox AP's ``interpolation`` (lambda) in ``[1e-30, 1e30]``: its backward perturbs the
    scores by ``lambda`` times the incoming gradient and divides by ``lambda``, so
    ``1/lambda`` and the perturbed scores must stay finite in float32 (``1e-46`` read 0 there:
    a 0/0 gradient).

    Example:
        >>> check_interpolation(4.0)
        4.0
    """
    return check_in_range("interpolation", value, SMALLEST_TEMPERATURE, 1e30,
                          reason="1/interpolation and the perturbed scores must stay finite "
                                 "in float32")  # fmt: skip


def check_real_device(**tensors: torch.Tensor) -> None:
    """Refuse meta tensors (shape without values): a loss cannot compute on them.

    Example:
        >>> try:
        ...     check_real_device(embeddings=torch.zeros(2, 3, device="meta"))
        ... except GradlabError as error:
        ...     print(str(error)[:44])
        embeddings is a meta tensor (a shape without
    """
    for name, tensor in tensors.items():
        if isinstance(tensor, torch.Tensor) and tensor.is_meta:
            raise GradlabError(
                f"{name} is a meta tensor (a shape without values); pass a tensor on a real "
                "device (cpu, cuda, ...)"
            )


def check_embedding_size(name: str, embeddings: torch.Tensor) -> None:
    """Refuse ``[N, 0]`` embeddings: a zero-dimensional embedding has no cosine similarity.

    Example:
        >>> try:
        ...     check_embedding_size("embeddings", torch.zeros(8, 0))
        ... except GradlabError as error:
        ...     print(error)
        embeddings must have at least one embedding dimension; got shape (8, 0)
    """
    if embeddings.shape[1] == 0:
        raise GradlabError(
            f"{name} must have at least one embedding dimension; got shape "
            f"{tuple(embeddings.shape)}"
        )


def check_embeddings_and_labels(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    *,
    finite: bool = False,
    names: tuple[str, str] = ("embeddings", "labels"),
) -> None:
    """The in-batch inputs: ``embeddings [B, d]`` floats (``d >= 1``) and ``labels [B]``
    integers, on one real device; with ``finite``, also refuse NaN or infinite embeddings
    (one value read, after every metadata check). ``names``: the two arguments as the caller
    calls them (``("candidates", "candidate_labels")``), for the messages.

    Example:
        >>> try:
        ...     check_embeddings_and_labels(torch.zeros(4, 3), torch.zeros(5, dtype=torch.long))
        ... except GradlabError as error:
        ...     print(error)
        labels must have shape (4,) (one label per embedding); got (5,)
    """
    rows, row_labels = names
    check_tensor(rows, embeddings, ndims=(2,), kind="float")
    check_embedding_size(rows, embeddings)
    check_tensor(row_labels, labels, ndims=(1,), kind="integer")
    check_shape(row_labels, labels, embeddings.shape[:1], f"one label per {rows.removesuffix('s')}")
    check_real_device(**{rows: embeddings, row_labels: labels})
    check_same_device(**{rows: embeddings, row_labels: labels})
    if finite:
        check_finite(rows, embeddings)


def _shown_as_number(value: object) -> str:
    """How a message shows what was given for a number: its repr, and for a tensor of one
    value how to pass it; a tensor of several values by its dtype and shape (its repr would
    fill the screen), as an argument given in another's place."""
    if isinstance(value, torch.Tensor) and value.numel() != 1:
        return (f"a {value.dtype} tensor of shape {tuple(value.shape)} (several values, not "
                "one number: an argument given in another's place? see the signature)")
    return f"{value!r}" + (" (a Python number, not a tensor: pass float(x), or x.item())"
                           if isinstance(value, torch.Tensor) else "")  # fmt: skip


def check_positive_finite(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a positive finite real number.

    Example:
        >>> check_positive_finite("tau", 1)
        1.0
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise GradlabError(f"{name} must be a positive finite number; got "
                           f"{_shown_as_number(value)}")  # fmt: skip
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise GradlabError(f"{name} must be a positive finite number; got {value!r}")
    return number


def check_non_negative_finite(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite real number ``>= 0``.

    Example:
        >>> check_non_negative_finite("margin", 0)
        0.0
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise GradlabError(f"{name} must be a non-negative finite number; got "
                           f"{_shown_as_number(value)}")  # fmt: skip
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise GradlabError(f"{name} must be a non-negative finite number; got {value!r}")
    return number


INT64_MAX = 2**63 - 1
"""The largest count or index torch holds (int64)."""


def check_positive_int(name: str, value: object) -> int:
    """Return ``value`` if it is a positive integer (bools are refused).

    Example:
        >>> check_positive_int("num_bins", True)
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: num_bins must be a positive integer; got True
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise GradlabError(f"{name} must be a positive integer; got {value!r}")
    if value > INT64_MAX:  # torch counts and indexes in int64: larger overflow inside
        raise GradlabError(f"{name} must be a positive integer of at most 2**63 - 1 (torch's "
                           f"int64); got {value!r}")  # fmt: skip
    return int(value)  # a NumPy integer (read from a config) as a Python int


def check_ks(value: object) -> tuple[int, ...]:
    """Return the ``ks`` of a Recall@K as a tuple: a non-empty sequence of positive integers.

    Example:
        >>> check_ks([1, 5])
        (1, 5)
        >>> check_ks([])
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: ks must name at least one k; got []
    """
    if isinstance(value, (str, bytes, torch.Tensor)) or not isinstance(value, Sequence):
        raise GradlabError(f"ks must be a sequence of positive integers, such as (1, 5, 10); "
                           f"got {value!r}")  # fmt: skip
    if not value:
        raise GradlabError(f"ks must name at least one k; got {value!r}")
    for k in value:
        check_positive_int("ks", k)
    return tuple(value)


def check_int_in_range(name: str, value: object, low: int, high: int | None = None) -> int:
    """Return ``value`` if it is an int in ``[low, high]`` (no upper bound when ``high`` is
    None; bools are refused).

    Example:
        >>> check_int_in_range("positives", 5, 1, 4)
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: positives must be an int from 1 to 4; got 5
    """
    whole = isinstance(value, int) and not isinstance(value, bool)
    if not whole or value < low or (high is not None and value > high):
        allowed = f"an int >= {low}" if high is None else f"an int from {low} to {high}"
        raise GradlabError(f"{name} must be {allowed}; got {value!r}")
    return value


MAX_SEED = 2**32 - 1
"""The largest seed gradlab takes (NumPy's legacy range). torch takes seeds below ``2**64``,
and the studies derive their batches' seeds as ``seed * 7919 + m``: a larger seed would end a
run deep inside torch with an overflow instead of a message."""


def check_seed(name: str, value: object) -> int:
    """Return ``value`` if it is a whole number from 0 to :data:`MAX_SEED` (bools are refused).

    Example:
        >>> check_seed("seed", 2**64)
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: seed must be a whole number from 0 to 2**32 - 1; got 18446744073709551616
    """  # noqa: E501
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not (
            0 <= value <= MAX_SEED):
        raise GradlabError(f"{name} must be a whole number from 0 to 2**32 - 1; got {value!r}")
    return int(value)


def check_floating_dtype(name: str, value: object) -> torch.dtype:
    """Return ``value`` if it is a floating torch dtype (``torch.float64``, ``torch.bfloat16``...).

    Example:
        >>> check_floating_dtype("dtype", "float64")
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: dtype must be a floating torch dtype; got 'float64'
    """
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise GradlabError(f"{name} must be a floating torch dtype; got {value!r}")
    return value


FLOATS = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64})
"""The floating dtypes gradlab computes in (float8 tensors have no arithmetic to run on)."""

WIDE_UNSIGNED = frozenset({torch.uint16, torch.uint32, torch.uint64})
"""The unsigned integer dtypes wider than a byte, refused by ``check_tensor(kind="integer")``:
torch implements few operations for them (in torch 2.13 equality, ``unique`` and ``sort``, but
no ordering comparison, ``searchsorted``, ``bincount``, ``max`` or indexing), so labels in them
ended deep inside a computation instead of in a message."""


def check_tensor(
    name: str,
    value: object,
    *,
    ndims: Sequence[int],
    kind: str,
    finite: bool = False,
) -> torch.Tensor:
    """Check that ``value`` is a tensor with one of ``ndims`` dimensions and the given kind.

    Args:
        name: the argument's name, used in the message.
        value: what the caller passed.
        ndims: the allowed numbers of dimensions.
        kind: ``"float"`` (a floating dtype), ``"bool"``, ``"integer"`` (a signed integer
            dtype or ``uint8``: torch lacks most operations for ``uint16``, ``uint32`` and
            ``uint64``, :data:`WIDE_UNSIGNED`), ``"any_real"`` (float or integer, not bool or
            complex) or ``"any"``.
        finite: also refuse NaN and infinite entries (float tensors only). Reads a value
            (one host synchronisation on a GPU); skipped inside :func:`skip_value_checks`.

    Returns:
        ``value``, unchanged.

    Example:
        >>> check_tensor("labels", torch.zeros(3), ndims=(1,), kind="integer")
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: labels must have an integer dtype; got torch.float32 (whole-number ids: pass labels.long())
        >>> check_tensor("labels", torch.zeros(3, dtype=torch.uint32), ndims=(1,), kind="integer")
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: labels must have a signed integer dtype or uint8; got torch.uint32 (torch implements few operations for uint32: no ordering comparison, search, bincount or indexing); pass labels.long()
    """  # noqa: E501
    if not isinstance(value, torch.Tensor):
        raise GradlabError(f"{name} must be a torch.Tensor; got {type(value).__name__}"
                           f"{_as_tensor_hint(name, value)}")  # fmt: skip
    if value.is_nested:  # rows of several lengths: no shape to check, no [Q, C] to rank
        raise GradlabError(f"{name} must be a dense tensor; got a nested tensor (pad its rows "
                           "to one length, or call once per length)")  # fmt: skip
    if value.dim() not in ndims:
        allowed = " or ".join(f"{n}-D" for n in ndims)
        raise GradlabError(f"{name} must be {allowed}; got shape {tuple(value.shape)}"
                           f"{_flatten_hint(name, value, ndims)}")  # fmt: skip
    if value.layout != torch.strided:
        raise GradlabError(f"{name} must be a dense (strided) tensor; got layout {value.layout}")
    if kind == "float" and not value.is_floating_point():
        hint = "" if value.is_complex() else f"; pass {name}.float()"
        raise GradlabError(f"{name} must have a floating dtype; got {value.dtype}{hint}")
    if kind in ("float", "any_real") and value.is_floating_point() and value.dtype not in FLOATS:
        raise GradlabError(f"{name} must have dtype float16, bfloat16, float32 or float64; got "
                           f"{value.dtype} (convert it first: no loss computes in it)")  # fmt: skip
    if kind == "bool" and value.dtype != torch.bool:
        hint = "" if value.is_complex() else f" (a 0/1 mask: pass {name}.bool())"
        raise GradlabError(f"{name} must be a bool tensor; got {value.dtype}{hint}")
    if kind == "integer" and (
        value.is_floating_point() or value.is_complex() or value.dtype == torch.bool
    ):
        hint = "" if value.is_complex() else f" (whole-number ids: pass {name}.long())"
        raise GradlabError(f"{name} must have an integer dtype; got {value.dtype}{hint}")
    if kind == "integer" and value.dtype in WIDE_UNSIGNED:  # refused before any work
        short = str(value.dtype).removeprefix("torch.")
        raise GradlabError(f"{name} must have a signed integer dtype or uint8; got {value.dtype} "
                           f"(torch implements few operations for {short}: no ordering "
                           f"comparison, search, bincount or indexing); pass {name}.long()")
    if kind == "any_real" and (value.dtype == torch.bool or value.is_complex()):
        raise GradlabError(f"{name} must have a real floating or integer dtype; got {value.dtype}")
    if finite:
        check_finite(name, value)
    return value


def _as_tensor_hint(name: str, value: object) -> str:
    """How to turn what was passed into a tensor, where one call does it (a list, a tuple, a
    NumPy array, a number); nothing for anything else (``None`` is usually a missing input)."""
    if isinstance(value, (list, tuple)) or (
        isinstance(value, numbers.Number) and not isinstance(value, bool)
    ):
        return f"; pass torch.as_tensor({name})"
    if type(value).__module__ == "numpy" and hasattr(value, "shape"):
        return f"; pass torch.from_numpy({name})"
    return ""


def _flatten_hint(name: str, value: torch.Tensor, ndims: Sequence[int]) -> str:
    """``reshape(-1)`` for a 1-D input passed with extra length-1 dimensions (``[1, B]``,
    ``[B, 1]``); nothing for any other shape."""
    if tuple(ndims) == (1,) and value.dim() > 1 and sum(n != 1 for n in value.shape) <= 1:
        return f"; pass {name}.reshape(-1)"
    return ""


def check_finite(name: str, value: torch.Tensor) -> torch.Tensor:
    """Refuse a floating tensor with NaN or infinite entries (other dtypes pass): one read-only
    reduction, one value read (a host synchronisation on a GPU); skipped inside
    :func:`skip_value_checks`. Call it after the metadata checks, which read no value. A
    ``"meta"`` tensor, which has no values to read, is refused (:func:`check_real_device`).

    Example:
        >>> check_finite("scores", torch.tensor([0.5, float("nan")]))
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: scores must be finite; got NaN in entry 1 (1 entry of 2)
    """
    if value.is_floating_point() and value.numel() and not _SKIP_VALUE_CHECKS.get():
        check_real_device(**{name: value})  # a meta tensor has no values to read
        # One read-only reduction (NaN propagates through min/max); no full-size mask.
        low, high = torch.aminmax(value.detach())
        if not (bool(torch.isfinite(low)) and bool(torch.isfinite(high))):
            raise GradlabError(non_finite_message(name, value))
    return value


UNSIGNED = WIDE_UNSIGNED | {torch.uint8}
"""Every unsigned integer dtype: refused as scores (:func:`check_signed_scores`)."""


def check_signed_scores(name: str, value: object, *, ndims: Sequence[int]) -> torch.Tensor:
    """Scores to rank: a finite real tensor (float or signed integer) with one of ``ndims``
    dimensions; unsigned integer scores are refused, whatever their width, before any value is
    read: a negated unsigned distance wraps around silently (``-1`` is the dtype's largest
    value, 255 in ``uint8``), ranking the nearest candidates last. The ``scores`` of
    :func:`gradlab.functional.tie_aware_ap`, :func:`gradlab.functional.recall_at_k` and the
    functions that take them alike.

    Returns:
        ``value``, unchanged.

    Example:
        >>> distances = torch.tensor([[0, 1, 2]], dtype=torch.uint16)
        >>> check_signed_scores("scores", -distances.long(), ndims=(2,)).tolist()
        [[0, -1, -2]]
        >>> try:
        ...     check_signed_scores("scores", distances, ndims=(2,))
        ... except GradlabError as error:
        ...     print(error)
        scores must have a signed dtype; got torch.uint16 (a negated unsigned distance wraps around: -1 is 65535 in uint16): pass scores.long(), or -distance.long() for distances
    """  # noqa: E501
    check_tensor(name, value, ndims=ndims, kind="any_real")
    if value.dtype in UNSIGNED:
        short = str(value.dtype).removeprefix("torch.")
        raise GradlabError(
            f"{name} must have a signed dtype; got {value.dtype} (a negated unsigned distance "
            f"wraps around: -1 is {torch.iinfo(value.dtype).max} in {short}): pass "
            f"{name}.long(), or -distance.long() for distances"
        )
    return check_finite(name, value)


def check_same_device(**tensors: torch.Tensor) -> None:
    """Refuse tensors that live on different devices.

    Example:
        >>> try:
        ...     check_same_device(scores=torch.zeros(1), positives=torch.zeros(1, device="meta"))
        ... except GradlabError as error:
        ...     print(error)
        tensors must be on one device; got scores on cpu, positives on meta
    """
    devices = {name: tensor.device for name, tensor in tensors.items()}
    if len(set(devices.values())) > 1:
        listed = ", ".join(f"{name} on {device}" for name, device in devices.items())
        raise GradlabError(f"tensors must be on one device; got {listed}")


def check_shape(name: str, value: torch.Tensor, expected: Sequence[int], hint: str) -> None:
    """Refuse a tensor whose shape differs from ``expected``.

    Example:
        >>> check_shape("labels", torch.zeros(3), (4,), "one label per embedding")
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: labels must have shape (4,) (one label per embedding); got (3,)
    """
    if tuple(value.shape) != tuple(expected):
        raise GradlabError(
            f"{name} must have shape {tuple(expected)} ({hint}); got {tuple(value.shape)}"
        )
