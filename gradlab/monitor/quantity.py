"""The base of every logged quantity: what it needs, what it logs, how it is drawn.

cockpit's call chain (``track -> should_compute -> compute``) with the declarations its
``cockpit.py`` asks for instead of naming quantities: a :class:`Quantity` says which values of
the step it reads (:attr:`Quantity.needs`, names of :class:`~gradlab.monitor.batch.BatchView`'s
shared values, :data:`NEEDS`), the keys it may log (:attr:`Quantity.keys`) and the figures
that draw them (:attr:`Quantity.plots`). The Monitor provides each need once per logged step
(BatchView caches them), says in the run header which quantities cannot apply to the watched
loss (a need the loss's adapter cannot provide, :mod:`gradlab.monitor.adapters`), and
``gradlab plot`` draws the declared families. A new quantity touches only its own module.

Example:
    >>> import torch
    >>> class RowMedian(Quantity):
    ...     name = "row_median"
    ...     needs = frozenset({"sorted_scores"})
    ...     keys = ("row_median_mean",)
    ...     def compute(self, batch):
    ...         middle = batch.negated_sorted.shape[1] // 2
    ...         return {"row_median_mean": -batch.negated_sorted[:, middle].mean()}
    >>> RowMedian().keys, sorted(RowMedian().needs)
    (('row_median_mean',), ['sorted_scores'])
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass

import numpy as np
import torch

from gradlab.errors import GradlabError
from gradlab.monitor.batch import BatchView, _row_any, _row_counts  # noqa: F401 (re-exported)
from gradlab.monitor.schedules import Schedule, every, refuse_schedule_maker
from gradlab.monitor.sinks import DISABLED_KEY, DROPPED_KEYS

Values = dict[str, torch.Tensor]

NEEDS = {
    "embeddings": "the embeddings",
    "features": "the embeddings the score matrix compares",
    "loss": "the loss value",
    "embedding_grad": "the gradient backpropagated into the embeddings",
    "scores": "the score matrix",
    "sorted_scores": "the step's sort of the score rows",
    "descending_order": "the step's sort of the score rows with ties in column order",
    "smooth_ap_terms": "SmoothAP's sigmoid block, computed from the embeddings",
    "loss_kind": "a watched SmoothAP loss (its analytic gradient is compared)",
    "score_grad": "dL/dS of the loss's score matrix",
}
"""What a quantity may need, each a value :class:`BatchView` provides (computed once per step):
``embeddings``, ``loss``, ``embedding_grad`` (fields), ``features`` (:attr:`BatchView.compared`:
the embeddings, or those an integration saw the score matrix compare), ``scores``, ``sorted_scores``
(``negated_sorted``), ``descending_order`` (the sort, stable), ``smooth_ap_terms``,
``loss_kind`` (the watched loss is SmoothAP) and ``score_grad`` (``score_captures``)."""

GRADIENT_NEEDS = frozenset({"embedding_grad", "score_grad"})
"""Needs that exist only after backward: the Monitor keeps gradients for these."""

INPUT_NEEDS = frozenset({"embeddings", "features", "scores", "sorted_scores", "descending_order",
                         "smooth_ap_terms", "score_grad"})  # fmt: skip
"""Needs computed from the call's embeddings or score matrix: a quantity with one of them logs
NaN for every key (but its :attr:`Quantity.input_free_keys`) on a step whose input is not
finite (``score_grad``: nor ``dL/dS``), since sorts, counts and proportions of NaN scores are
meaningless (see :meth:`Quantity.trust`)."""


_FAMILY_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")
RESERVED_FAMILIES = frozenset({"overview"})
"""Family names gradlab's figures use themselves (``overview.png``)."""


@dataclass(frozen=True)
class Plot:
    """A figure family of a quantity: title, y label and ``(key, legend label)`` series, and
    what to read from the figure.

    Example:
        >>> from gradlab.monitor import Plot
        >>> Plot("loss", "Loss", "loss", (("loss", "loss"),)).keys
        ('loss',)
        >>> spread = Plot("spread", "Spread of the scores", "std", (("spread", "std"),),
        ...               reading="How far apart the batch's scores lie: near 0, the model "
        ...                       "tells no candidate from another.")
        >>> spread.reading.split(":")[0]
        "How far apart the batch's scores lie"
    """

    family: str
    title: str
    ylabel: str
    series: tuple[tuple[str, str], ...]
    zero_based: bool = False
    """Counts and shares: the y axis starts at 0."""
    resolution: float = 0.0
    """Values of the family within this of one another differ by rounding alone (a difference
    of two APs at 1e-16): drawn as a flat line. 0: only rounding relative to their size."""
    reading: str | None = None
    """What to read from the figure, in a sentence or two that quote no logged value: what the
    series measure and what their rise or fall means. The report's caption of the figure
    quotes it between the title and the run's own numbers, and the run header records it with
    the family of a quantity of one's own. None: the title alone says what the figure shows."""
    undefined: str | None = None
    """When a series of the family is undefined (NaN) in a sound run, as a clause: a batch
    without what the series measures (``"the cosine is undefined where no query has a second
    positive"``).
    A figure that marks such a step with a cross adds it to its title (``[crosses: ...]``); the
    legend's entry for the crosses says only that the value was not finite. None: the crosses
    say nothing more (a NaN there is a fault of the training)."""

    def __post_init__(self) -> None:
        """Refuse, where the family is declared, what no figure can be drawn from: a family
        name that is no safe file name (it names ``<family>.png``), text that is not a string,
        series that are not ``(key, label)`` pairs of strings, or none at all, and a reading
        that is neither None nor a sentence."""
        family = self.family
        if not isinstance(family, str) or not _FAMILY_NAME.fullmatch(family) \
                or family in RESERVED_FAMILIES:  # fmt: skip
            raise GradlabError(
                f"a plot family's name must be letters, digits, '_', '-' or '.' (not first), "
                f"and not {', '.join(sorted(RESERVED_FAMILIES))}: it names the figure file "
                f"<family>.png; got {family!r}"
            )
        for field in ("title", "ylabel"):
            if not isinstance(getattr(self, field), str):
                raise GradlabError(f"the plot family {family!r}: {field} must be a string; got "
                                   f"{getattr(self, field)!r}")  # fmt: skip
        series = self.series
        if not isinstance(series, (tuple, list)) or not series or not all(
            isinstance(pair, (tuple, list)) and len(pair) == 2
            and all(isinstance(text, str) and text for text in pair) for pair in series
        ):  # fmt: skip
            raise GradlabError(
                f"the plot family {family!r}: series must be one or more (key, legend label) "
                f"pairs of non-empty strings, as ((\"my_key\", \"my label\"),); got {series!r}"
            )
        if not isinstance(self.zero_based, bool):
            raise GradlabError(f"the plot family {family!r}: zero_based must be True or False; "
                               f"got {self.zero_based!r}")  # fmt: skip
        resolution = self.resolution
        if isinstance(resolution, bool) or not isinstance(resolution, (int, float)) \
                or not math.isfinite(resolution) or resolution < 0:  # fmt: skip
            raise GradlabError(f"the plot family {family!r}: resolution must be a finite number "
                               f"at least 0; got {resolution!r}")  # fmt: skip
        for field in ("reading", "undefined"):
            text = getattr(self, field)
            if text is not None and (not isinstance(text, str) or not text.strip()):
                raise GradlabError(f"the plot family {family!r}: {field} must be a sentence "
                                   f"(a non-empty string) or None; got {text!r}")  # fmt: skip

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self.series)

    def as_header(self) -> dict:
        """The family as the run header records it (for a quantity that is not gradlab's:
        ``gradlab plot`` draws it from there, without the quantity's class).

        Example:
            >>> from gradlab.monitor import Plot
            >>> Plot("spread", "Spread", "value", (("spread_max", "max"),)).as_header()["series"]
            [['spread_max', 'max']]
        """
        recorded = {"family": self.family, "title": self.title, "ylabel": self.ylabel,
                    "series": [list(pair) for pair in self.series],
                    "zero_based": self.zero_based, "resolution": self.resolution}  # fmt: skip
        for field in ("reading", "undefined"):  # a family without one is recorded as before
            if getattr(self, field) is not None:
                recorded[field] = getattr(self, field)
        return recorded

    @classmethod
    def from_header(cls, recorded: object) -> Plot | None:
        """The family :meth:`as_header` recorded, or None when ``recorded`` is not one (a
        header written by hand or by another program: nothing to draw from it).

        Example:
            >>> from gradlab.monitor import Plot
            >>> plot = Plot("spread", "Spread", "value", (("spread_max", "max"),))
            >>> Plot.from_header(plot.as_header()) == plot, Plot.from_header({"family": 1})
            (True, None)
        """
        try:
            return cls(recorded["family"], recorded["title"], recorded["ylabel"],
                       tuple(tuple(pair) for pair in recorded["series"]),
                       recorded.get("zero_based", False),
                       recorded.get("resolution", 0.0),
                       recorded.get("reading"), recorded.get("undefined"))  # fmt: skip
        except (TypeError, KeyError, ValueError, AttributeError, GradlabError):
            return None  # not a family as the Monitor writes one (nor one it would accept)


class Quantity:
    """A logged quantity: a name, a schedule, its declarations and :meth:`compute`.

    Attributes:
        name: prefix of the logged keys, and its name in the run header.
        needs: names from :data:`NEEDS` that :meth:`compute` reads.
        optional_needs: names from :data:`NEEDS` that add keys when the watched loss provides
            them (:meth:`BatchView.provided`); without them the quantity logs its other keys.
        keys: every key it may log.
        plots: its figure families (:class:`Plot`).
        schedule: ``step -> bool``, a function of the step alone: the Monitor asks it
            several times a step, and at the run's first watched call for the 64 steps from
            the first (under torch.distributed, at the first ``monitor.step()``, for the
            4,096 from it), so one that keeps state between calls (counts them, pops a list)
            would log other steps than it says.
        warns_if_not_finite: the Monitor counts (in ``not_finite``) each step on which one of
            its values is NaN or infinite while the inputs are finite, and warns at the first:
            a value the training itself broke (the loss), logged as it is. ``None`` (the
            default): on for a quantity of your own (a NaN there is most often a bug of its
            ``compute``), off for gradlab's, which say so themselves; set ``False`` for one of
            yours whose NaN means something (no positive in the batch).
        reads_empty_batches: :meth:`compute` is defined on a batch without rows (a loss
            called on an empty batch, as a last short batch of a sampler can be); the others
            skip such a step (and compute again at the next).
        input_free_keys: keys of :attr:`keys` whose value reads none of the step's input
            values (the embeddings, the scores, ``dL/dS``): a setting (the operating region's
            half-width, a function of tau and eps), a shape (a chance level ``ln C``), a
            parameter (a temperature's scale) or the loss as it is logged. On a step whose
            input is not finite they keep their value, the quantity's other keys log NaN
            (:attr:`trust`).
        reads_tau: its values depend on the Monitor's ``tau`` (SmoothAP's sigmoid width):
            runs logged at different taus do not compare (``gradlab plot`` says so).

    Example:
        >>> from gradlab.monitor import Quantity
        >>> Quantity().should_compute(0), Quantity().needs_grad
        (True, False)
    """

    name = "quantity"
    needs: frozenset[str] = frozenset()
    optional_needs: frozenset[str] = frozenset()
    keys: tuple[str, ...] = ()
    plots: tuple[Plot, ...] = ()
    warns_if_not_finite: bool | None = None
    reads_empty_batches: bool = False
    input_free_keys: frozenset[str] = frozenset()
    reads_tau: bool = False

    def __init__(self, schedule: Schedule | None = None) -> None:
        refuse_schedule_maker(f"{type(self).__name__}'s schedule", schedule)
        if schedule is not None and (not callable(schedule) or isinstance(schedule, type)):
            raise GradlabError(  # at the call, not at the first logged step of training
                f"{type(self).__name__}'s schedule must be a callable step -> bool "
                "(gradlab.monitor.every(n), log_spaced(), dense_warmup(), default_schedule()) "
                f"or None; got {schedule!r}"
            )
        self.schedule = schedule if schedule is not None else every(1)
        self.schedule_given = schedule is not None  # a Monitor's every= replacing it says so

    @property
    def needs_grad(self) -> bool:
        """Whether it reads a gradient (the Monitor then hooks the backward pass)."""
        return bool(self.needs & GRADIENT_NEEDS)

    def should_compute(self, step: int) -> bool:
        """Whether the schedule logs ``step``. A schedule that returns None (a function whose
        ``return`` was forgotten) is refused: read as False, it would log nothing, silently.

        Example:
            >>> from gradlab.monitor import Quantity
            >>> Quantity(lambda step: step % 2 == 0).should_compute(3)
            False
        """
        due = self.schedule(step)
        if due is None:
            raise GradlabError(
                f"the schedule of the {self.name!r} quantity, {self.schedule!r}, returned None "
                f"for step {step}; a schedule returns True (log the step) or False: is its "
                "return statement missing?"
            )
        if not isinstance(due, (bool, np.bool_)) and not (
            isinstance(due, (int, np.integer)) and due in (0, 1)  # step % 2: 0 and 1 read well
        ):  # step % 10 would log all but every tenth step, "yes" and "no" every step
            raise GradlabError(
                f"the schedule of the {self.name!r} quantity, {self.schedule!r}, returned "
                f"{due!r} for step {step}; a schedule returns True (log the step) or False, "
                "or 1 or 0 (a comparison: step % 10 == 0, not step % 10)"
            )
        return bool(due)

    @property
    def trust(self) -> int:
        """What its values need to be meaningful: 0 nothing (the loss, the labels), 1 finite
        inputs (:data:`INPUT_NEEDS`), 2 finite inputs and a finite ``dL/dS``. On a step that
        breaks it, the Monitor logs NaN for every key of the quantity but its
        :attr:`input_free_keys`, and warns once.

        Example:
            >>> from gradlab.monitor import Quantity
            >>> Quantity().trust
            0
        """
        if "score_grad" in self.needs:
            return 2
        return 1 if self.needs & INPUT_NEEDS else 0

    def fewer_needs(self) -> tuple[frozenset[str], str] | None:
        """A smaller set of needs this quantity's keys could mostly be logged with, and what
        to pass for it (a setting of the quantity's own), or None. When the watched loss
        cannot meet :attr:`needs` but meets these, the reason the Monitor gives in
        ``not_logged`` ends with that advice. Default: None.

        Example:
            >>> from gradlab.monitor import Quantity
            >>> Quantity().fewer_needs() is None
            True
        """
        return None

    def not_applicable(self, loss: object) -> str | None:
        """Why this quantity, as it is configured, has nothing to log for the watched loss
        ``loss`` although its needs are met (the Monitor lists it in ``not_logged``), or None.
        Default: None.

        Example:
            >>> from gradlab.monitor import Quantity
            >>> Quantity().not_applicable(lambda embeddings, labels: embeddings.sum()) is None
            True
        """
        return None

    def at_call(self, batch: BatchView) -> None:
        """Called when the Monitor captures the watched loss call of a step it logs: before
        backward and before the optimizer changes the parameters. A quantity that reads state
        the optimizer step moves (a learnable scale) takes it here, on the device, into
        ``batch`` (nothing is read back to the host). Under torch.distributed the view that
        :meth:`compute` gets is the gathered one: what ``at_call`` put into ``batch`` is on its
        ``local`` view (``(batch.local or batch).name`` reads it either way). Default: nothing.

        Example:
            >>> import torch
            >>> from gradlab.monitor import Quantity
            >>> from gradlab.monitor.batch import BatchView
            >>> Quantity().at_call(BatchView(torch.eye(2), labels=torch.arange(2))) is None
            True
        """

    def said_of_logged(self, logged: dict[str, float], batch: BatchView) -> str | None:
        """What to tell the user of this quantity's logged values (host numbers, ``logged``
        the step's record), or None: a fact the numbers alone hide. The Monitor warns with
        it (``RuntimeWarning``) once per run and quantity, naming the step. Default: None.

        Example:
            >>> import torch
            >>> from gradlab.monitor import Quantity
            >>> from gradlab.monitor.batch import BatchView
            >>> Quantity().said_of_logged({"step": 0}, BatchView(torch.eye(2))) is None
            True
        """
        return None

    def compute(self, batch: BatchView) -> Values:  # pragma: no cover - abstract
        raise NotImplementedError


RESERVED_KEYS = frozenset({"step", "header", DISABLED_KEY, *DROPPED_KEYS})
"""Keys no quantity may log: a record's own (its step number), the JSONL file's header line,
the note a sink adds after records it dropped (:data:`~gradlab.monitor.sinks.DROPPED_KEYS`)
and the Monitor's note of quantities disabled during the run
(:data:`~gradlab.monitor.sinks.DISABLED_KEY`)."""


def check_declaration(quantity: Quantity) -> None:
    """Refuse, when the Monitor is made, a quantity whose declarations the Monitor cannot act
    on: no schedule (its ``__init__`` did not call ``super().__init__``), a name that is not a
    non-empty string, ``keys`` that are not strings (a lone string is read letter by letter),
    a need the Monitor does not provide (:data:`NEEDS`; a lone string again), or a plot family
    none of whose series is a key it declares (never drawn); a family a quantity of yours
    declares draws declared keys only.

    Raises:
        GradlabError: naming the quantity, the declaration and what is allowed.

    Example:
        >>> class Typo(Quantity):
        ...     name, keys, needs = "typo", ("typo_mean",), frozenset({"scorez"})
        >>> check_declaration(Typo())
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: the typo quantity (Typo) needs 'scorez', which the ...
    """
    cls = type(quantity).__name__
    name = getattr(quantity, "name", None)
    if not isinstance(name, str) or not name:
        raise GradlabError(f"a quantity's name must be a non-empty string; {cls} has "
                           f"name={name!r}")  # fmt: skip
    owner = _owner(quantity)
    if not callable(getattr(quantity, "schedule", None)):
        raise GradlabError(
            f"{owner} has no schedule: its __init__ must call super().__init__(schedule) "
            "(schedule None: every step)"
        )
    keys = quantity.keys
    if not isinstance(keys, (tuple, list)) or not all(isinstance(key, str) and key
                                                      for key in keys):  # fmt: skip
        raise GradlabError(
            f"{owner} declares keys={keys!r}; keys is a tuple of non-empty strings (one key: "
            f"({keys!r},) with its comma)" if isinstance(keys, str) else
            f"{owner} declares keys={keys!r}; keys is a tuple of non-empty strings"
        )
    for attribute in ("needs", "optional_needs"):
        needs = getattr(quantity, attribute)
        if isinstance(needs, str) or not isinstance(needs, (set, frozenset, tuple, list)):
            raise GradlabError(
                f"{owner} declares {attribute}={needs!r}; {attribute} is a frozenset of names "
                f"from gradlab.monitor.NEEDS (one need: frozenset({{{needs!r}}}))"
                if isinstance(needs, str) else
                f"{owner} declares {attribute}={needs!r}; {attribute} is a frozenset of names "
                "from gradlab.monitor.NEEDS"
            )
        unknown = sorted(need for need in needs if need not in NEEDS)
        if unknown:
            letters = all(isinstance(need, str) and len(need) == 1 for need in unknown)
            raise GradlabError(
                f"{owner} needs {', '.join(map(repr, unknown))}, which the Monitor does not "
                f"provide; the needs it provides: {', '.join(NEEDS)}"
                + (" (frozenset('scores') splits a string into its letters: write "
                   "frozenset({'scores'}))" if letters else "")
            )
    free = quantity.input_free_keys
    if isinstance(free, str) or not isinstance(free, (set, frozenset, tuple, list)) \
            or any(key not in keys for key in free):  # fmt: skip
        raise GradlabError(
            f"{owner} declares input_free_keys={free!r}; input_free_keys is a frozenset of keys "
            f"it declares in keys {tuple(keys)!r}"
        )
    plots = quantity.plots
    if not isinstance(plots, (tuple, list)) or not all(isinstance(plot, Plot) for plot in plots):
        raise GradlabError(f"{owner} declares plots={plots!r}; plots is a tuple of "
                           "gradlab.monitor.Plot")  # fmt: skip
    # gradlab's own families may draw a key only a variant logs (the weighted counts); the
    # families a quantity of yours declares draw declared keys only (a typo draws nothing)
    gradlabs = {id(plot) for k in type(quantity).__mro__  # the families gradlab declared
                if k.__module__.split(".")[0] == "gradlab" for plot in vars(k).get("plots", ())}
    for plot in plots:
        own = id(plot) in gradlabs
        undeclared = [key for key in plot.keys if key not in keys]
        if plot.keys and len(undeclared) == len(plot.keys):
            raise GradlabError(
                f"{owner} draws {', '.join(map(repr, plot.keys))} in its plot family "
                f"{plot.family!r}, none of them a key it declares {tuple(keys)!r}: a series "
                "of an undeclared key is never logged, so never drawn"
            )
        if undeclared and not own:
            raise GradlabError(
                f"{owner} draws {', '.join(map(repr, undeclared))} in its plot family "
                f"{plot.family!r}, not a key it declares {tuple(keys)!r}: a series of an "
                "undeclared key is never logged, so never drawn (a typo?)"
            )


def check_values(quantity: Quantity, values: object, device: torch.device) -> Values:
    """``values``, as ``quantity.compute`` returned them, checked against its declaration
    before anything is logged: a dict whose keys are among :attr:`Quantity.keys` and whose
    values are one-element real tensors (0-d, or of shape ``[1]``; a bool is 1.0 or 0.0) or
    Python numbers (made 0-d float64 tensors on ``device``). A value under an undeclared key
    (a typo) would be logged where no plot family reads it, ``None`` (a ``return`` forgotten)
    would log nothing, and a value of several elements has no single number to log: each is a
    :class:`~gradlab.errors.GradlabError` naming the quantity, the key and what is allowed
    (the Monitor then disables the quantity with a warning, or raises under ``strict``).

    Example:
        >>> class Spread(Quantity):
        ...     name, keys = "spread", ("spread_max",)
        ...     def compute(self, batch):
        ...         return {"spread_max": batch.embeddings.abs().amax(), "spread_min": 0.0}
        >>> batch = BatchView(torch.eye(2), labels=torch.arange(2))
        >>> check_values(Spread(), Spread().compute(batch), torch.device("cpu"))
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: the spread quantity (Spread) returned the key 'spread_min', ...
    """
    if not isinstance(values, dict):
        raise GradlabError(
            f"{_owner(quantity)} returned {values!r} from compute(); compute returns a dict "
            "of its keys' values, one-element tensors or numbers ({} when it has nothing to "
            "log this step)"
        )
    declared = quantity.keys
    if not values.keys() <= _key_set(declared):
        key = next(key for key in values if key not in declared)  # the first, as returned
        raise GradlabError(
            f"{_owner(quantity)} returned the key {key!r}, which it does not declare; its "
            f"keys are {tuple(declared)!r}: add the key to {type(quantity).__name__}.keys, or "
            "fix its name"
        )
    checked = values
    for key, value in values.items():
        if type(value) is torch.Tensor and value.dtype is torch.float64 and value.dim() == 0:
            continue  # as most are: nothing else to ask
        if isinstance(value, torch.Tensor):
            single = value.numel() == 1 and value.dim() <= 1  # 0-d or [1]: one number
            if (single and not value.is_complex() and value.layout is torch.strided
                    and not value.is_meta and not value.is_quantized):  # fmt: skip
                if value.device != device:  # a CPU scalar of a CUDA step: stacked with the rest
                    checked = dict(values) if checked is values else checked
                    checked[key] = value.to(device)
                continue
            got = (f"a {value.dtype} tensor of shape {list(value.shape)}" if not single
                   or value.is_complex() else f"a {value.layout} tensor on "
                   f"{value.device}{' (quantized)' if value.is_quantized else ''}")  # fmt: skip
        elif isinstance(value, (numbers.Real, np.bool_)):  # bool included, as a bool tensor
            try:
                number = float(value)
            except OverflowError:  # an int past float64's range
                got = f"an int of {len(str(abs(int(value))))} digits, too large for a float64"
            else:
                checked = dict(values) if checked is values else checked
                checked[key] = torch.tensor(number, dtype=torch.float64, device=device)
                continue
        else:
            got = f"{value!r} ({type(value).__name__})"
        raise GradlabError(
            f"{_owner(quantity)} returned {got} under {key!r}; a logged value is one real "
            "number: a 0-d tensor (or one of shape [1]), or a Python int, float or bool"
        )
    return checked


def _owner(quantity: Quantity) -> str:
    return f"the {quantity.name} quantity ({type(quantity).__name__})"


_KEY_SETS: dict[int, tuple[tuple[str, ...], frozenset[str]]] = {}


def _key_set(keys: tuple[str, ...]) -> frozenset[str]:
    """``frozenset(keys)``, made once per declaration (a quantity's keys are a class constant)."""
    if type(keys) is not tuple:  # a list may change: read as it is now
        return frozenset(keys)
    kept = _KEY_SETS.get(id(keys))
    if kept is None or kept[0] is not keys:  # a new tuple (or one at a freed tuple's address)
        kept = _KEY_SETS[id(keys)] = (keys, frozenset(keys))
    return kept[1]
