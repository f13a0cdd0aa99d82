"""The Monitor's options, written and checked once: :class:`MonitorConfig`.

:class:`gradlab.Monitor` builds one from its keyword arguments, and
:class:`gradlab.integrations.lightning.GradlabCallback` builds one when it is created (so a bad
value is refused where it is given, not inside ``Trainer.fit``) and opens its Monitor from it.
"""

from __future__ import annotations

import copy
import inspect
import json
import numbers
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, fields

from gradlab.errors import GradlabError, caller_stacklevel
from gradlab.monitor.geometry import ChanceLevel, Geometry, Margins, Temperature
from gradlab.monitor.quantities import PRESETS as BASE_PRESETS
from gradlab.monitor.quantities import QUANTITIES as BASE_QUANTITIES
from gradlab.monitor.quantity import RESERVED_KEYS, Quantity, check_declaration
from gradlab.monitor.schedules import (
    Every,
    Schedule,
    default_schedule,
    every,
    refuse_schedule_maker,
)
from gradlab.monitor.sinks import SINKS, Sink, destinations
from gradlab.monitor.suspects import Suspects
from gradlab.validation import a_or_an, check_positive_finite

__all__ = ["DISTRIBUTED", "PRESETS", "QUANTITIES", "MonitorConfig"]

PRESETS = {
    "cheap": BASE_PRESETS["cheap"],
    "default": (*BASE_PRESETS["default"], Geometry, Margins),
    "full": (*BASE_PRESETS["full"], Geometry, Margins),
}
"""Quantity classes of each preset, from cheap to full: :mod:`gradlab.monitor.quantities`'
presets with the geometry and margins of :mod:`gradlab.monitor.geometry` in the default and
full ones."""

QUANTITIES = (*BASE_QUANTITIES, Geometry, Margins, ChanceLevel, Temperature, Suspects)
"""gradlab's quantity classes, in the order ``gradlab plot`` draws their families."""

CLASS_NAMES = {cls.name: cls.__name__ for cls in QUANTITIES}
"""A gradlab quantity's name (``not_logged``'s keys) -> its class name."""


def _named_instead(quantities: object) -> str:
    """What ``quantities`` should be instead: a list for one quantity given alone; for names,
    each name's class, called (names that are no quantity of gradlab's are listed against
    those that are), or ``preset=`` for a preset's name."""
    if isinstance(quantities, Quantity):
        return f" (a list of quantities: quantities=[{type(quantities).__name__}(...)])"
    if isinstance(quantities, str):
        if quantities in PRESETS:
            return f" (a preset's name: pass preset={quantities!r})"
        if quantities in CLASS_NAMES:
            return (f" (a list of quantity objects: pass "
                    f"quantities=[gradlab.monitor.{CLASS_NAMES[quantities]}()])")
        quantities = [quantities] if quantities else []
    elif not isinstance(quantities, Sequence):
        return ""
    classes = [q for q in quantities if isinstance(q, type) and issubclass(q, Quantity)]
    if classes:  # the class where its object goes
        return (f" (a quantity is an object, not its class: pass "
                f"{', '.join(f'{cls.__name__}()' for cls in classes)})")
    names = [q for q in quantities if isinstance(q, str)]
    if not names:
        return ""
    known = [f"gradlab.monitor.{CLASS_NAMES[name]}() for {name!r}" for name in names
             if name in CLASS_NAMES]  # fmt: skip
    unknown = [name for name in names if name not in CLASS_NAMES]
    said = f" (a quantity is an object: pass {', '.join(known)}" if known else " ("
    if unknown:
        said += ("; " if known else "") + (f"{', '.join(map(repr, unknown))} "
                                          f"{'is' if len(unknown) == 1 else 'are'} no quantity "
                                          f"of gradlab's, whose names are {sorted(CLASS_NAMES)}")
    return said + ")"


GRADLAB_PLOTS = {plot.family: (cls, plot) for cls in reversed(QUANTITIES) for plot in cls.plots}
"""Family -> (the gradlab quantity class that declares it first, its declaration)."""

GRADLAB_KEYS = {key: cls for cls in reversed(QUANTITIES)
                for key in (*cls.keys, *(key for plot in cls.plots for key, _ in plot.series))}
"""Key -> the gradlab quantity class that declares it first (its subclasses log it too): its
``keys``, and the keys its figures draw (those an option adds, as the weighted counts)."""

DISTRIBUTED = ("auto", "local")
"""``"auto"``: all-gather the batch under ``torch.distributed``; ``"local"``: never gather
(rank 0 logs its own batch). In either mode only rank 0 writes."""


@dataclass(frozen=True)
class MonitorConfig:
    """Every option of :class:`gradlab.Monitor` but ``log_dir``, checked when it is made.

    Args:
        tau: temperature of the diagnostics; ``None``: the watched SmoothAP loss's, else 0.01.
        every: one schedule for every quantity: an int ``n`` (every n steps) or a
            ``step -> bool`` callable taking one argument; ``None``: the preset's default
            schedule, or each explicit quantity's own. Stored as a schedule.
        preset: ``"cheap"``, ``"default"`` or ``"full"``; ``None``: ``"default"``, or none when
            ``quantities`` are given (they replace a preset: naming one beside them is refused).
        quantities: explicit :class:`~gradlab.monitor.quantity.Quantity` instances (a tuple, at
            least one).
        sinks: sink names from ``gradlab.monitor.sinks.SINKS`` or Sink instances (a tuple, at
            least one).
        strict: raise a quantity's error instead of reporting it once and disabling it.
        distributed: ``"auto"`` or ``"local"`` (:data:`DISTRIBUTED`).
        config: extra JSON-ready settings stored in the run header (not its own keys
            ``preset``, ``tau`` and ``tau_from``, which the Monitor writes from its options).
        resume: continue the run already in ``log_dir`` from its last logged step + 1; a
            folder without a run starts a new one at step 0, so one command serves a job's
            first launch and each restart after a preemption.
        overwrite: replace the run already in ``log_dir``.

    Raises:
        GradlabError: a value out of range, naming the option, the value and what is allowed.

    Example:
        >>> from gradlab.monitor import MonitorConfig
        >>> options = MonitorConfig(tau=0.05, preset="cheap", sinks="jsonl")
        >>> options.tau, options.sinks
        (0.05, ('jsonl',))
        >>> MonitorConfig(preset="everything")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: preset must be one of ['cheap', 'default', 'full'] or None; ...
    """

    tau: float | None = None
    every: int | Schedule | None = None
    preset: str | None = None
    quantities: Sequence[Quantity] | None = None
    sinks: Sequence[str | Sink] = ("jsonl",)
    strict: bool = False
    distributed: str = "auto"
    config: dict | None = None
    resume: bool = False
    overwrite: bool = False

    def __post_init__(self) -> None:
        normalized = {
            "tau": None if self.tau is None else check_positive_finite("tau", self.tau),
            "every": None if self.every is None else _schedule(self.every),
            "quantities": _quantities(self.quantities, self.preset),
            "sinks": _sinks(self.sinks),
        }
        for name, value in normalized.items():
            object.__setattr__(self, name, value)  # frozen: normalized once, here
        for name in ("strict", "resume", "overwrite"):
            if not isinstance(getattr(self, name), bool):
                raise GradlabError(f"{name} must be True or False; got {getattr(self, name)!r}")
        if self.resume and self.overwrite:
            raise GradlabError("resume=True and overwrite=True exclude each other; choose one")
        if self.distributed not in DISTRIBUTED:
            raise GradlabError(f"distributed must be 'auto' or 'local'; got {self.distributed!r}")
        _check_config(self.config)

    def make_quantities(self, warn: bool = True) -> list[Quantity]:
        """The Monitor's quantities: the preset's (on :attr:`every` or the default schedule),
        or the explicit ones; when :attr:`every` is set, copies of them on that schedule (the
        objects passed keep their own), with a warning (``warn``) when it replaces schedules
        they were given (under ``torch.distributed`` the Monitor warns on rank 0 alone).

        Example:
            >>> from gradlab.monitor import MonitorConfig
            >>> [q.name for q in MonitorConfig(preset="cheap").make_quantities()][:2]
            ['loss', 'embedding_norm']
        """
        if self.quantities is None:
            schedule = self.every or default_schedule()
            return [cls(schedule) for cls in PRESETS[self.preset_name]]
        if self.every is None:
            return list(self.quantities)
        given = [f"{q.name} {q.schedule!r}" for q in self.quantities
                 if getattr(q, "schedule_given", False)  # every(1) too, when given
                 or not (isinstance(q.schedule, Every) and q.schedule.n == 1)]  # or set later
        if given and warn:
            shown = self.every.n if isinstance(self.every, Every) else repr(self.every)
            warnings.warn(
                f"gradlab.Monitor: every={shown} replaces the schedules the quantities "
                f"were given ({', '.join(given)}); leave every out to keep theirs",
                UserWarning,
                stacklevel=caller_stacklevel(),
            )
        copies = [copy.copy(quantity) for quantity in self.quantities]  # the caller's unchanged
        for quantity in copies:
            quantity.schedule = self.every
        return copies

    @property
    def preset_name(self) -> str | None:
        """The preset the Monitor logs: :attr:`preset`, ``"default"`` when it is None, and None
        when explicit :attr:`quantities` replace every preset.

        Example:
            >>> from gradlab.monitor import Margins, MonitorConfig
            >>> MonitorConfig().preset_name, MonitorConfig(quantities=[Margins()]).preset_name
            ('default', None)
        """
        if self.quantities is not None:
            return None
        return "default" if self.preset is None else self.preset

    def make_sinks(self) -> list[Sink]:
        """The Monitor's sinks: the instances given, and a new sink for each name.

        Example:
            >>> from gradlab.monitor import MonitorConfig
            >>> [type(sink).__name__ for sink in MonitorConfig(sinks=["jsonl", "csv"]).make_sinks()]
            ['JSONLSink', 'CSVSink']
        """
        return [sink if isinstance(sink, Sink) else SINKS[sink]() for sink in self.sinks]

    @classmethod
    def names(cls) -> list[str]:
        """The option names, in order.

        Example:
            >>> from gradlab.monitor import MonitorConfig
            >>> MonitorConfig.names()[:3]
            ['tau', 'every', 'preset']
        """
        return [field.name for field in fields(cls)]

    @classmethod
    def of(cls, options: dict) -> MonitorConfig:
        """A config from a dict of options; an unknown name is a :class:`GradlabError`.

        Example:
            >>> from gradlab.monitor import MonitorConfig
            >>> MonitorConfig.of({"taux": 0.1})  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            gradlab.errors.GradlabError: monitor options must be among ['tau', ...]; got ['taux']
        """
        unknown = sorted(set(options) - set(cls.names()))
        if unknown:
            raise GradlabError(f"monitor options must be among {cls.names()}; got {unknown}")
        return cls(**options)


def _quantities(quantities: object, preset: object) -> tuple[Quantity, ...] | None:
    if quantities is None:
        if preset is not None and (not isinstance(preset, str) or preset not in PRESETS):
            raise GradlabError(f"preset must be one of {sorted(PRESETS)} or None; got "
                               f"{preset!r}")  # fmt: skip
        return None
    if preset is not None:  # checked first: the one the user wrote last may be either
        raise GradlabError(
            f"preset={preset!r} and quantities were both given; explicit quantities replace a "
            "preset, so pass one of them (to add quantities to a preset: "
            f"[cls(gradlab.monitor.default_schedule()) for cls in "
            f"gradlab.monitor.PRESETS[{preset!r}]] + [...], on the preset's schedule)"
        )
    if isinstance(quantities, (str, Quantity)) or not isinstance(quantities, Sequence) or \
            not all(isinstance(q, Quantity) for q in quantities):  # fmt: skip
        raise GradlabError(f"quantities must be a list of Quantity instances; got "
                           f"{quantities!r}{_named_instead(quantities)}")  # fmt: skip
    if not quantities:
        raise GradlabError(
            "quantities must hold at least one Quantity (the loss alone: "
            f"[gradlab.monitor.Loss()]); got {quantities!r}"
        )
    for quantity in quantities:
        check_declaration(quantity)
    names = [q.name for q in quantities]
    repeated = sorted({name for name in names if names.count(name) > 1})
    for name in repeated:  # two classes of one name: yours is to be renamed
        classes = list(dict.fromkeys(type(q) for q in quantities if q.name == name))
        if len(classes) > 1 and all(cls.__module__.startswith("gradlab.") for cls in classes):
            raise GradlabError(  # gradlab's forms of one quantity, not a clash to rename
                f"quantities {', '.join(_class_names(classes))} are all named {name!r}: forms "
                "of one quantity, whose keys overlap; pass one of them (each preset holds one: "
                f"{_preset_forms(classes)})"
            )
        if len(classes) > 1:
            raise GradlabError(
                f"quantities {', '.join(_class_names(classes))} are all named {name!r}: "
                "a name is a quantity's in the run header, in not_logged and in disabled; "
                "give yours another name"
            )
    if repeated:  # one's values would overwrite the other's in every record
        raise GradlabError(
            f"quantities must hold each quantity once; got {', '.join(map(repr, repeated))} "
            f"more than once in {names!r}"
        )
    for quantity in quantities:
        _check_name(quantity)
    _check_keys(quantities)
    return tuple(quantities)


def _preset_forms(classes: Sequence[type]) -> str:
    """Which of gradlab's ``classes`` (forms of one quantity) each preset holds, in words."""
    held = [f"{preset!r} {cls.__name__}" for preset, members in PRESETS.items()
            for cls in classes if cls in members]  # fmt: skip
    return ", ".join(held) if held else "none of them"


GRADLAB_NAMES = {cls.name: cls for cls in reversed(QUANTITIES)}
"""Name -> the gradlab quantity class that takes it first (its subclasses may keep it)."""


def _check_name(quantity: Quantity) -> None:
    """Refuse a quantity of the user's that keeps :class:`Quantity`'s placeholder name or takes
    the name of one of gradlab's: the run header, ``not_logged``, ``disabled`` and every
    warning name a quantity by its name, so either would be read as another quantity's."""
    cls = type(quantity)
    if quantity.name == Quantity.name:
        raise GradlabError(
            f"{cls.__name__} keeps Quantity's placeholder name {Quantity.name!r}: set its name "
            "(class attribute name = '...'), which the run header, not_logged, disabled and "
            "every warning use for it"
        )
    shipped = GRADLAB_NAMES.get(quantity.name)
    if shipped is not None and not isinstance(quantity, shipped):
        raise GradlabError(
            f"{cls.__name__} is named {quantity.name!r}, the name of gradlab's "
            f"{shipped.__name__}: the run header, not_logged, disabled and every warning would "
            "read as that quantity's; give yours another name"
        )


def _class_names(classes: list[type]) -> list[str]:
    """The classes' names, with their module where two share a name."""
    names = [cls.__name__ for cls in classes]
    if len(set(names)) == len(names):
        return names
    return [f"{cls.__module__}.{cls.__qualname__}" for cls in classes]


def _check_keys(quantities: Sequence[Quantity]) -> None:
    """No two quantities declare one key (the second's value would replace the first's in
    every record, with nothing said) or one plot family, and none declares a key the logs use
    themselves (:data:`~gradlab.monitor.quantity.RESERVED_KEYS`)."""
    owners: dict[str, Quantity] = {}
    families: dict[str, Quantity] = {}
    for quantity in quantities:
        for plot in quantity.plots:
            shipped = GRADLAB_PLOTS.get(plot.family)
            if shipped is not None and shipped[1] != plot:  # not the family gradlab draws
                raise GradlabError(
                    f"the {quantity.name} quantity ({type(quantity).__name__}) declares the plot "
                    f"family {plot.family!r}, which gradlab's {shipped[0].__name__} draws: "
                    "gradlab plot would draw that one in its place; rename the family of yours"
                )
            first = families.setdefault(plot.family, quantity)
            if first is not quantity:
                raise GradlabError(
                    f"the {first.name} and {quantity.name} quantities ({type(first).__name__}, "
                    f"{type(quantity).__name__}) both declare the plot family {plot.family!r}: "
                    "one figure file per family, so one would hide the other; rename the "
                    "family of yours"
                )
        for key in quantity.keys:
            if key in RESERVED_KEYS:
                raise GradlabError(
                    f"the {quantity.name} quantity ({type(quantity).__name__}) declares the key "
                    f"{key!r}, which gradlab's logs use themselves (reserved: "
                    f"{', '.join(sorted(RESERVED_KEYS))}); rename that key"
                )
            shipped = GRADLAB_KEYS.get(key)
            if shipped is not None and not isinstance(quantity, shipped):
                raise GradlabError(
                    f"the {quantity.name} quantity ({type(quantity).__name__}) declares the key "
                    f"{key!r}, which gradlab's {shipped.__name__} logs: gradlab plot would draw "
                    "yours as that one; rename the key of yours"
                )
            first = owners.get(key)
            owners[key] = quantity
            if first is quantity:
                raise GradlabError(f"the {quantity.name} quantity ({type(quantity).__name__}) "
                                   f"declares the key {key!r} twice")  # fmt: skip
            if first is not None:
                raise GradlabError(
                    f"the {first.name} and {quantity.name} quantities ({type(first).__name__}, "
                    f"{type(quantity).__name__}) both declare the key {key!r}: one's value "
                    "would replace the other's in every record; keep one of them, or rename "
                    "the key of yours"
                )


HEADER_KEYS = ("preset", "tau", "tau_from")
"""The keys of the run header's ``config`` the Monitor writes from its own options (the tau it
uses and where it came from, the preset): a user's ``config`` holds none of them."""


def _check_config(config: object) -> None:
    """``config`` is None or a dict with string keys whose values JSON can write."""
    if config is None:
        return
    if not isinstance(config, dict):
        raise GradlabError(f"config must be a dict of JSON-ready settings; got {config!r}")
    taken = sorted(key for key in config if key in HEADER_KEYS)
    if taken:
        raise GradlabError(
            f"config must not hold the keys the Monitor records in the run header itself "
            f"({', '.join(map(repr, HEADER_KEYS))}); got {', '.join(map(repr, taken))} (its "
            "options set them: tau=..., preset=...; give a setting of your own another name)"
        )
    for key, value in config.items():
        if not isinstance(key, str):
            raise GradlabError(f"config keys must be strings; got key {key!r}")
        try:
            json.dumps(value)
        except (TypeError, ValueError) as error:
            raise GradlabError(
                f"config must hold JSON-ready values (numbers, strings, bools, None, lists, "
                f"dicts); config[{key!r}] is {type(value).__name__} {value!r} ({error})"
            ) from None


def _schedule(value: object) -> Schedule:
    """``every`` as a schedule: a positive int n (every n steps) or a ``step -> bool`` callable
    that accepts one positional argument (checked on its signature, not called)."""
    allowed = "a positive integer n (every n steps) or a callable step -> bool"
    refuse_schedule_maker("every", value)
    if callable(value) and not isinstance(value, type):
        try:
            signature = inspect.signature(value)
        except (TypeError, ValueError):
            return value  # no signature to read (some builtins): accepted as it is
        try:
            signature.bind(0)
        except TypeError:
            raise GradlabError(
                f"every must be {allowed} taking one argument (the step); got {value!r} with "
                f"signature {signature}"
            ) from None
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise GradlabError(f"every must be {allowed}; got {value!r}")
    return every(int(value))  # a NumPy integer (read from a config) as a Python int


def _sinks(sinks: object) -> tuple[str | Sink, ...]:
    """``sinks`` as a tuple: one name or Sink is one sink; every entry a known name or a Sink."""
    if isinstance(sinks, (str, Sink)):
        sinks = [sinks]
    if not isinstance(sinks, (list, tuple)):
        raise GradlabError(
            f"sinks must be a sink name, a Sink, or a list of them (names: {sorted(SINKS)}); "
            f"got {sinks!r}"
        )
    if not sinks:
        raise GradlabError(
            f"sinks must hold at least one sink (names: {sorted(SINKS)}): with none, nothing "
            f"would be written; got {sinks!r}"
        )
    for value in sinks:
        if not isinstance(value, Sink) and (not isinstance(value, str) or value not in SINKS):
            raise GradlabError(
                f"sinks must name one of {sorted(SINKS)} or be Sink instances; got {value!r}"
            )
    names = [value for value in sinks if isinstance(value, str)]
    repeated = next((name for name in names if names.count(name) > 1), None)
    if repeated is not None:  # two of one sink write every record twice into one file
        raise GradlabError(
            f"sinks must name each sink once; got {repeated!r} more than once in {list(sinks)!r}"
        )
    first: dict[str, int] = {}  # a sink given by name and as an object: the same file too
    for index, value in enumerate(sinks):
        for place in destinations(value):
            other = first.setdefault(place, index)
            if other != index:
                raise GradlabError(
                    f"sinks must write each record once; got sinks[{other}] "
                    f"({_sink_entry(sinks[other])}) and sinks[{index}] ({_sink_entry(value)}), "
                    f"which both write {place}; keep one of them"
                )
    return tuple(sinks)


def _sink_entry(value: str | Sink) -> str:
    """An entry of ``sinks`` as a message names it: a name as written, a sink by its class."""
    return repr(value) if isinstance(value, str) else a_or_an(type(value).__name__)
