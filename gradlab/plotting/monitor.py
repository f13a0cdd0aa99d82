"""Figures from Monitor logs: one per quantity family, several runs overlaid.

Each family is drawn only when its keys are present. With one run each key has its own colour;
with several runs each run has its own colour (seaborn's colour-blind palette) and each key its
own line style, so two losses or two temperatures are compared in one picture. An overview
figure puts every family in its own panel.

A ``metrics.jsonl`` written before runs were kept apart may hold several runs whose steps
restart; each such run is drawn as its own line (with a warning) instead of one line jumping
back to the start. Resumed runs (header ``"resumed"``) continue their run's line.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import json
import math
import os
import textwrap
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator
from matplotlib.transforms import Transform, offset_copy

from gradlab.errors import GradlabError, caller_stacklevel
from gradlab.monitor.config import QUANTITIES
from gradlab.monitor.quantity import Plot, Quantity
from gradlab.monitor.schedules import Schedule, schedule_from_record
from gradlab.monitor.sinks import (
    DISABLED_KEY,
    DROPPED_KEYS,
    jsonl_headers,
    read_segments,
    stepped_jsonl_headers,
)
from gradlab.paths import check_output_folder
from gradlab.plotting.style import (
    LINE_STYLES,
    PALETTE_SIZE,
    gradlab_style,
    isolated_points,
    legend_below,
    log_scale,
    save_figure,
    series_style,
    step_axis,
)
from gradlab.run_dirs import (  # public here too, as before
    CALLBACK_FOLDER,
    FIGURE_LIST,
    check_run_dirs,
    check_runs_and_labels,
    default_out,
    run_folder,
)


def _plots(quantities: Sequence[type[Quantity] | Quantity]) -> dict[str, Plot]:
    """Family name -> :class:`~gradlab.monitor.quantity.Plot`, as the quantities declare them
    (the first declaration of a family wins: a subclass repeats its parent's)."""
    plots: dict[str, Plot] = {}
    for quantity in quantities:
        declared = quantity.plots
        if not isinstance(declared, (tuple, list)):  # a property of a class, read on the class
            raise GradlabError(
                f"quantities: {getattr(quantity, '__name__', type(quantity).__name__)}.plots is "
                f"{declared!r}, not a tuple of Plot; pass an instance of the quantity, or declare "
                "plots as a class attribute"
            )
        for plot in declared:
            plots.setdefault(plot.family, plot)
    return plots


def _logged_plots(run_dirs: Sequence[str | Path]) -> list[Plot]:
    """The plot families the runs' headers record (those of quantities that are not gradlab's:
    the Monitor writes them there), from every header of each run; a family that a run's
    headers declare more than once (a resumption with a corrected title) as its latest header
    declares it: the quantity as it is now. What does not read as a family the Monitor would
    accept is left out."""
    plots = []
    for run_dir in run_dirs:  # every header: a resumption may declare other families
        latest: dict[str, Plot] = {}
        for header in jsonl_headers(run_folder(run_dir) / "metrics.jsonl"):
            recorded = header.get("plots") if isinstance(header, dict) else None
            for entry in recorded if isinstance(recorded, list) else ():
                plot = Plot.from_header(entry)
                if plot is not None:
                    latest[plot.family] = plot
        plots += latest.values()
    return plots


PLOTS = _plots(QUANTITIES)

TAU_FAMILIES = frozenset(plot.family for quantity in QUANTITIES if quantity.reads_tau
                         for plot in quantity.plots)  # fmt: skip
"""The families whose values depend on the Monitor's tau (:attr:`Quantity.reads_tau`)."""


GRADLAB_KEYS = frozenset(key for quantity in QUANTITIES for key in quantity.keys)
"""Every key gradlab's quantities log, drawn or not (the quantiles of a summary, a count)."""


UNDRAWN_HINT = ("(a quantity of your own draws its keys when it declares plots: "
                "gradlab.monitor.Plot)")
"""What the messages about logged keys that no family draws add."""


def _undrawn(runs: list[Run], drawn: set[str]) -> list[str]:
    """The logged keys with numbers that are no key of gradlab's quantities and that no family
    draws (a quantity of your own that declares no ``plots``), sorted."""
    logged = {key for _, records in runs for record in records
              for key, value in record.items() if _number(value)}  # fmt: skip
    return sorted(logged - drawn - GRADLAB_KEYS - {"step", *DROPPED_KEYS})  # notes, no keys


def _undrawn_keys(runs: list[Run], drawn: set[str]) -> str | None:
    """What to say of the keys of :func:`_undrawn`, or None when there are none."""
    undrawn = _undrawn(runs, drawn)
    if not undrawn:
        return None
    return f"logged keys that no figure family draws: {', '.join(undrawn)} {UNDRAWN_HINT}"


def _stepped_headers(run_dirs: Sequence[str | Path]) -> list[list[dict]]:
    """Each run's headers that a logged step follows (a run, or resumption, that logged no
    step draws nothing at its settings): read once for what the figures say of tau."""
    return [stepped_jsonl_headers(run_folder(run_dir) / "metrics.jsonl") for run_dir in run_dirs]


def _run_taus(run_headers: list[dict]) -> list[float]:
    """The taus a run's stepped headers (dicts: a header that is none is skipped as
    unreadable) were logged at, in increasing order; none where no header gives one."""
    taus = set()
    for header in run_headers:
        config = header.get("config")
        tau = config.get("tau") if isinstance(config, dict) else None
        if isinstance(tau, (int, float)) and not isinstance(tau, bool):
            taus.add(float(tau))
    return sorted(taus)


def _named_with_taus(runs: list[Run], taus: dict[str, list[float]]) -> list[Run]:
    """``runs`` with each legend name followed by the taus its log was written at (``a (tau
    0.01)``; ``taus``: each run's, by name), for figures of runs at different taus: the PNG
    says what the warning said. A run of no known tau keeps its name."""
    return [(f"{name} (tau {', '.join(f'{tau:g}' for tau in taus[name])})"
             if taus.get(name) else name, records) for name, records in runs]  # fmt: skip


def _mixed_taus(families: list[str], taus: dict[str, list[float]]) -> str | None:
    """What to say when ``families`` (of :data:`TAU_FAMILIES`) are drawn from runs logged at
    different taus (``taus``: each run's, from its stepped headers' ``config``, by the name
    the legends give it), or None."""
    if not families:
        return None
    taus = {name: values for name, values in taus.items() if values}
    if len({tau for values in taus.values() for tau in values}) < 2:
        return None
    shown = "; ".join(f"{run}: {', '.join(f'{tau:g}' for tau in values)}"
                      for run, values in taus.items())  # fmt: skip
    return (f"these logs were written at different taus ({shown}): {', '.join(families)} "
            "depend on tau (SmoothAP's sigmoid width), so their lines do not compare across "
            "them")
"""The figure families of gradlab's quantities, in drawing order."""

def _at_the_default_tau(run_headers: list[dict]) -> bool:
    """Whether every stepped header of a run says it was logged at gradlab's default tau
    (``config.tau_from`` is ``"default"``: a loss without a sigmoid, NT-Xent or
    MultipleNegativesRankingLoss, and no ``tau`` given to the Monitor)."""
    return all(isinstance(header, dict) and isinstance(header.get("config"), dict)
               and header["config"].get("tau_from") == "default"
               for header in run_headers)  # fmt: skip


def _default_tau(headers: list[list[dict]]) -> float | None:
    """The tau every run drawn was logged at when each was logged at the default one
    (:func:`_at_the_default_tau` of their stepped ``headers``), else None."""
    if not all(_at_the_default_tau(run_headers) for run_headers in headers):
        return None
    taus = {header["config"].get("tau") for run_headers in headers for header in run_headers}
    if len(taus) != 1:
        return None
    tau = taus.pop()
    return float(tau) if isinstance(tau, (int, float)) and not isinstance(tau, bool) else None


def _runs_at_the_default_tau(
    headers: list[list[dict]], names: list[str], families: list[str]
) -> dict[str, tuple[str, ...]]:
    """Run (by ``names``) -> those of ``families`` (of :data:`TAU_FAMILIES`, drawn) it logged,
    for the runs logged at gradlab's default tau (:func:`_at_the_default_tau`) when some of the
    runs drawn, not all, were; else empty (a lone run's titles say it, none at all need not)."""
    at_default = {name: _logged_families(run_headers, families)
                  for run_headers, name in zip(headers, names, strict=True)
                  if run_headers and _at_the_default_tau(run_headers)}  # fmt: skip
    at_default = {name: drawn for name, drawn in at_default.items() if drawn}
    return at_default if at_default and len(at_default) < len(names) else {}


def _some_at_the_default_tau(at_default: dict[str, tuple[str, ...]]) -> str | None:
    """What to say of the runs of :func:`_runs_at_the_default_tau` (runs that logged the same
    families named together), or None."""
    said = []
    for drawn in dict.fromkeys(at_default.values()):
        runs = [name for name, theirs in at_default.items() if theirs == drawn]
        said.append(f"{', '.join(runs)} {'was' if len(runs) == 1 else 'were'} logged by a loss "
                    f"without a sigmoid tau: {'its' if len(runs) == 1 else 'their'} lines of "
                    f"{', '.join(drawn)} measure SmoothAP's sigmoid at gradlab's default tau, "
                    "not that loss's gradient, and do not compare with the other runs'")
    return "; ".join(said) or None


def _said_of_runs_at_the_default_tau(plot: Plot, runs: list[str]) -> Plot:
    """``plot`` of a family that reads tau, its title naming the ``runs`` drawn on it that were
    logged at gradlab's default tau by a loss without a sigmoid (the figure alone says it)."""
    whose = "its" if len(runs) == 1 else "their"
    return dataclasses.replace(plot, title=(
        f"{plot.title} [{', '.join(runs)}: SmoothAP's sigmoid at the default tau, not {whose} "
        "loss's gradient]"))


def _logged_families(run_headers: list[dict], families: list[str]) -> tuple[str, ...]:
    """Those of ``families`` whose keys a run's stepped headers say it logged: the keys of the
    ``schedules`` of its quantities not in ``not_logged``. A header without schedules (an older
    or hand-written log) is taken to have logged every family."""
    keys: set[str] = set()
    for header in run_headers:
        schedules = header.get("schedules")
        if not isinstance(schedules, dict):
            return tuple(families)
        unserved = header.get("not_logged")
        unserved = unserved if isinstance(unserved, dict) else {}
        keys.update(key for name, schedule in schedules.items() if name not in unserved
                    and isinstance(schedule, dict) for key in schedule.get("keys", ()))  # fmt: skip
    return tuple(family for family in families if set(FAMILIES[family][1]) & keys)


def _said_of_the_default_tau(plot: Plot, tau: float) -> Plot:
    """``plot`` of a family that reads tau (:data:`TAU_FAMILIES`), its title saying that runs
    logged at gradlab's default ``tau`` measure SmoothAP's sigmoid, not their loss's gradient."""
    return dataclasses.replace(plot, title=(
        f"{plot.title} [SmoothAP's sigmoid at the default tau {tau:g}: not this loss's "
        "gradient]"))

FAMILIES = {family: (plot.title, plot.keys, plot.ylabel) for family, plot in PLOTS.items()}
"""Family -> (title, keys, y label)."""

ZERO_BASED = frozenset(family for family, plot in PLOTS.items() if plot.zero_based)
"""Families of counts and shares: their y axis starts at 0 (at least 0..1 when all are 0)."""

LABELS = {key: label for plot in PLOTS.values() for key, label in plot.series}
"""Legend label of each logged key; a key not listed gets :func:`key_label`'s readable form."""

# How the figures look: sizes in inches, font sizes and widths in points. Matters of taste,
# named once here; what a reader needs of them (text large enough on the docs' page, titles
# clear of other text, no series hidden) is checked on the drawn figures by the tests.
FAMILY_FIGSIZE = (8.0, 4.2)
"""One family's figure, its legend below the axes."""
PANEL_SIZE = (5.2, 4.4)
"""Each panel of the overview, its legend below it."""
LEGEND_FONTSIZE = 9
"""The legends' text."""
FAMILY_LEGEND_COLUMNS = 3
"""Columns of a family figure's legend."""
RUN_LEGEND_COLUMNS = 4
"""At most this many runs side by side in the overview's legend of the runs."""
TITLE_PAD = 10
"""Space between a panel's title and its frame, clear of the top tick label."""
LINE_WIDTH = 1.4
"""Lines of one run."""
COVERED_LINE_WIDTH = 4.5
"""A line of one run that lies on a later one (:func:`covered_keys`): a band around it."""
COVERED_ALPHA = 0.55
"""Its opacity: the later line shows through."""
RUN_LINE_WIDTH = 1.6
"""Lines of several runs overlaid (each run marked by its colour and marker)."""
MARKER_SIZE = 3
"""Markers of one run (on every point)."""
RUN_MARKER_SIZE = 5
"""Markers of several runs (on about :data:`MARKS` points each)."""
NOT_FINITE_STYLE = {"linestyle": "none", "marker": "x", "color": "#c0392b", "markersize": 6,
                    "markeredgewidth": 1.5,
                    "label": "undefined (NaN), infinite or beyond 1e300 at this step"}  # fmt: skip
"""The crosses on the step axis at the steps where a drawn key was NaN or infinite, or beyond
:data:`LARGEST_DRAWN`."""

NO_FINITE_VALUE = "no finite value:\nevery value is NaN or infinite (the crosses)"
"""The text of a panel whose keys have no finite value at all: its value axis has no ticks."""

NO_FINITE_VALUE_COLOR = "0.35"

RUN_CROSSES_LABEL = NOT_FINITE_STYLE["label"] + " (in its run's colour)"
"""The crosses' legend entry when several runs are drawn: each run's crosses in its colour."""

CROSS_ROW = 8.0
"""With several runs, the crosses of each run that has some sit on a row of their own, this
many points below the previous such run's (the first on the frame's lower edge, the others
below it, the step labels moved down to make room): two runs diverging at one step show two
crosses, and no row lies among the lines, where it would read as a value."""
MAX_POINTS = 1000
"""A line of more logged steps than this is drawn as the means of groups of consecutive steps
(:func:`downsample`): a figure about 700 pixels wide shows a run of 500,000 steps as a band of
overlapping zig-zags, in which the key drawn last hides the others."""
BAND_ALPHA = 0.2
"""Opacity of the band that shows each group's smallest to largest value."""
BAND_LABEL = "band: min to max of each {} logged steps; line: their {}"
"""The legend entry of the bands of grouped lines, with the number of steps a group holds and
what the line is (:data:`MEANS`)."""
MEANS = {"linear": "mean", "log": "geometric mean", "symlog": "mean on the axis's scale"}
"""What the line of a grouped key is, by the y axis's scale (:func:`downsample`)."""


def key_label(key: str, labels: dict[str, str] = LABELS) -> str:
    """The legend label of a logged key: ``labels`` (:data:`LABELS`), else the key made
    readable.

    Example:
        >>> key_label("p_off_diagonal"), key_label("some_new_norm_q50")
        ('P without the diagonal', 'some new norm (median)')
    """
    if key in labels:
        return labels[key]
    words = key.replace("_q50", " (median)").replace("pct", " %").replace("_", " ")
    return " ".join(words.split())


Run = tuple[str, list[dict]]
"""A run to draw: its label and its records in step order (:class:`Records` when read by
:func:`load_runs`)."""


class Records(list):
    """A run's records in step order (a list of dicts), with the schedules its headers record:
    ``parts`` holds, for each header whose records the run keeps, the step its records start
    at and ``key -> schedule`` (:func:`recorded_schedules`; None: a header that records none).

    Example:
        >>> records = Records([{"step": s, "a": 1.0} for s in range(4)],
        ...                   [(0, {"a": schedule_from_record("every(2)")})])
        >>> sorted(records.due_steps("a", 0, 3)), records.due_steps("b", 0, 3)
        ([2], None)
    """

    def __init__(self, records=(), parts: Sequence[tuple[float, dict | None]] = ()) -> None:
        super().__init__(records)
        self.parts = list(parts)
        self._due: dict[tuple, frozenset[int]] = {}

    def due_steps(self, key: str, first: int, last: int) -> frozenset[int] | None:
        """The steps strictly between ``first`` and ``last`` that hold a record and at which
        ``key``'s quantity was due by the schedule its part's header records; None when a part
        of the run in that span does not record it (a log of an earlier gradlab, a schedule of
        the user's own): the gaps are then guessed (:func:`_gaps_where_missing`)."""
        starts = [start for start, _ in self.parts]
        lowest = max(bisect.bisect_right(starts, first) - 1, 0)
        within = self.parts[lowest:bisect.bisect_right(starts, last)]
        schedules = [known.get(key) if known is not None else None for _, known in within]
        if not within or any(schedule is None for schedule in schedules):
            return None
        signature = tuple(zip((start for start, _ in within), map(id, schedules), strict=True))
        if signature not in self._due:  # once per schedule and run, not once per key
            part_starts = [start for start, _ in within]
            self._due[signature] = frozenset(
                record["step"] for record in self
                if (index := bisect.bisect_right(part_starts, record["step"]) - 1) >= 0
                and schedules[index](record["step"]))  # fmt: skip
        return frozenset(step for step in self._due[signature] if first < step < last)


def recorded_schedules(header: object) -> dict[str, Schedule | None] | None:
    """Each logged key -> its quantity's schedule, as a run header records them
    (``"schedules"``); None for a key whose schedule was the user's own function (its steps
    are not recorded). None for a header that records no schedules (a log of an earlier
    gradlab, or of another program).

    Example:
        >>> header = {"schedules": {"loss": {"schedule": "every(10)", "keys": ["loss"]},
        ...                         "mine": {"schedule": None, "keys": ["my_a", "my_b"]}}}
        >>> known = recorded_schedules(header)
        >>> known["loss"](20), known["loss"](5), known["my_a"], recorded_schedules({})
        (True, False, None, None)
    """
    recorded = header.get("schedules") if isinstance(header, dict) else None
    if not isinstance(recorded, dict):
        return None
    known: dict[str, Schedule | None] = {}
    for entry in recorded.values():
        keys = entry.get("keys") if isinstance(entry, dict) else None
        if isinstance(keys, list):
            schedule = schedule_from_record(entry.get("schedule"))
            known.update((key, schedule) for key in keys if isinstance(key, str))
    return known


def load_runs(run_dirs: Sequence[str | Path], labels: Sequence[str] | None = None) -> list[Run]:
    """Read each ``RUN_DIR/metrics.jsonl``; split logs whose steps restart (with a warning).
    A run may be given as its ``metrics.jsonl`` instead of its folder (:func:`run_folder`).

    A log without a logged step yet is left out with a warning when another run has steps.
    Without ``labels`` a run is named by its folder, or by its path below the runs' common
    parent where two folders share a name; the ``gradlab_logs`` folder of gradlab's callbacks
    is named by the folders around it, leaving out those every such run has at one place from
    its end (``out1/csv/version_0/gradlab_logs`` beside ``out2/csv/version_0/gradlab_logs`` is
    ``out1``). Labels are never alike.

    Raises:
        GradlabError: a folder without ``metrics.jsonl``, logs none of which holds a record, a
            run named twice (its folder and its ``metrics.jsonl`` count as one), labels that do
            not match the runs.
    """
    check_runs_and_labels(run_dirs, labels)
    paths = [run_folder(run_dir) for run_dir in run_dirs]
    if labels is None:
        labels = _default_labels(paths)
    check_run_dirs(paths)
    runs: list[Run] = []
    empty: list[str] = []  # logs without a logged step: drawn without them, if any other has
    unreadable: list[str] = []  # logs none of whose lines could be read: the same, said why
    for path, label in zip(paths, labels, strict=True):
        log = path / "metrics.jsonl"
        pieces: list[list[dict]] = []
        parts: list[list[tuple[float, dict | None]]] = []  # each piece's headers' schedules
        highest = -math.inf  # the last piece's largest step
        went_back: list[tuple[int, int, int | None]] = []  # resumed at earlier checkpoints
        set_back: list[tuple[int, int, int]] = []  # steps going back within one run
        try:
            segments = _read_log(log)
        except GradlabError as error:  # e.g. a header cut by a crash: a run not logged yet
            if len(paths) == 1:
                raise
            unreadable.append(str(error))
            continue
        for header, records in segments:
            records = _in_step_order(records, set_back)
            known = recorded_schedules(header)
            if pieces and header.get("resumed"):  # a resumption continues its run
                first = records[0]["step"] if records else math.inf  # every record has one
                replaced = _continue(pieces[-1], records, highest, first)
                if replaced:  # with the step the resumption says it starts from
                    went_back.append((*replaced, _from_step(header)))
                if records:  # its schedules from its first step on, in place of any later
                    parts[-1] = [(start, was) for start, was in parts[-1] if start < first]
                    parts[-1].append((first, known))
            else:
                pieces.append(list(records))
                parts.append([(-math.inf, known)])
                highest = -math.inf
            highest = max(highest, max((record["step"] for record in records), default=highest))
        disabled = _disabled(log, segments)
        if disabled:
            warnings.warn(disabled, UserWarning, stacklevel=caller_stacklevel())
        if went_back:  # one warning for them all, at the line that called load_runs
            warnings.warn(_went_back(log, went_back), UserWarning, stacklevel=caller_stacklevel())
        if set_back:
            warnings.warn(_set_back(log, set_back), UserWarning, stacklevel=caller_stacklevel())
        pieces = [Records(_with_dropped_steps(records), known)
                  for records, known in zip(pieces, parts, strict=True) if records]
        if not segments:  # not even a header: no header's not_logged to point at
            unreadable.append(f"{log} is empty: no header and no record (gradlab.Monitor writes "
                              "its header first: a file it did not write, or one cut off "
                              "before its header)")  # fmt: skip
            continue
        if not pieces:  # _read_log names what it skipped
            empty.append(str(log))
            continue
        if len(pieces) > 1:
            warnings.warn(
                f"{log} holds {len(pieces)} runs whose steps restart (appended before gradlab "
                "kept runs apart); each is drawn as its own line",
                UserWarning,
                stacklevel=caller_stacklevel(),
            )
            runs.extend((f"{label} (run {i})", records) for i, records in enumerate(pieces, 1))
        else:
            runs.append((label, pieces[0]))
    if not runs and (empty or unreadable):
        said = [f"{' and '.join(empty)} {'holds' if len(empty) == 1 else 'hold'} no logged "
                f"step {NONE_LOGGED}"] if empty else []  # fmt: skip
        raise GradlabError("; ".join([*unreadable, *said]))
    for message in unreadable:  # as a run without a logged step: the others are drawn
        warnings.warn(f"{message}: drawn without it", UserWarning, stacklevel=caller_stacklevel())
    if len(runs) > PALETTE_SIZE:
        warnings.warn(
            f"{len(runs)} runs overlaid: past the {PALETTE_SIZE}th, each run's colour is an "
            f"earlier run's ({runs[PALETTE_SIZE][0]} and {runs[0][0]} share one; only their "
            "markers and the legend's order tell them apart); plot fewer runs at a time",
            UserWarning,
            stacklevel=caller_stacklevel(),
        )
    if empty:  # a run that has not logged yet does not keep the others from being drawn
        warnings.warn(f"{', '.join(empty)} {'holds' if len(empty) == 1 else 'hold'} no logged "
                      f"step {NONE_LOGGED}: drawn without it", UserWarning,
                      stacklevel=caller_stacklevel())  # fmt: skip
    return runs


def _disabled(log: Path, segments: list[tuple[dict, list[dict]]]) -> str | None:
    """What to say of the quantities the Monitor disabled during the run (the note of
    :data:`~gradlab.monitor.sinks.DISABLED_KEY` in its records), or None when it disabled none;
    ``segments`` are the log's runs and resumptions (:func:`read_segments`): a resumption that
    logs a disabled quantity's keys again is named.

    Example:
        >>> note = {"step": 4, "disabled": {"spread": "step 4: raised in compute(): KeyError"}}
        >>> print(_disabled(Path("run/metrics.jsonl"), [({}, [{"step": 3}, note])]))
        ... # doctest: +NORMALIZE_WHITESPACE
        run/metrics.jsonl: the Monitor disabled the quantity 'spread' (step 4: raised in
        compute(): KeyError) during the run: its keys end there
    """
    reasons: dict[str, list[str]] = {}  # one reason, said once for all it disabled
    again = []
    for index, (_, records) in enumerate(segments):
        for record in records:
            if not isinstance(record.get(DISABLED_KEY), dict):
                continue
            for name, why in record[DISABLED_KEY].items():
                reasons.setdefault(str(why), []).append(repr(name))
                step = _logged_again(name, segments[index + 1:])
                if step is not None:
                    again.append(f"{name!r} is logged again from step {step}, where the run "
                                 "resumed")  # fmt: skip
    if not reasons:
        return None
    said = [f"{', '.join(names)} ({why})" for why, names in reasons.items()]
    plural = sum(map(len, reasons.values())) > 1
    return (f"{log}: the Monitor disabled the {'quantities' if plural else 'quantity'} "
            f"{'; '.join(said)} during the run: {'their' if plural else 'its'} keys end there"
            + (f" ({'; '.join(again)})" if again else ""))  # fmt: skip


def _logged_again(name: str, later: list[tuple[dict, list[dict]]]) -> int | None:
    """The first step of a resumption among ``later`` segments whose records hold a key of
    quantity ``name`` (as its header's ``schedules`` declares them), or None."""
    for header, records in later:
        if not header.get("resumed"):
            return None  # another run, not this one resumed
        schedules = header.get("schedules")
        entry = schedules.get(name) if isinstance(schedules, dict) else None
        keys = entry.get("keys") if isinstance(entry, dict) else None
        if isinstance(keys, list) and any(key in record for record in records for key in keys):
            return records[0]["step"]
    return None


NONE_LOGGED = ("(a run that has not logged yet, or one that logged nothing: the warnings of "
               "its training say why, such as a watched call the Monitor could not read; its "
               "header's not_logged, where it has one, names the quantities the watched loss "
               "could not serve)")
"""What a log without a logged step may be: "yet" alone read oddly of a run that ended."""


def _continue(run: list[dict], resumed: list[dict], highest: float,
              first: float) -> tuple[int, int] | None:  # fmt: skip
    """Append a resumption's records, whose first step is ``first``, to its run, whose largest
    step is ``highest``. A resumption that starts at a step the run had logged went back to an
    earlier checkpoint: its records replace the run's from that step on, so the line follows
    the training that went on, not a zig-zag; returns ``(that step, how many records it
    replaced)`` for the warning (:func:`_went_back`), else None. One that starts after them is
    appended without reading the run again (a run resumed a thousand times is read once, not a
    thousand)."""
    if first > highest:
        run.extend(resumed)
        return None
    kept = [record for record in run if record["step"] < first]
    replaced = len(run) - len(kept)
    run[:] = kept + resumed
    return (first, replaced) if replaced else None


def _in_step_order(records: list[dict], set_back: list[tuple[int, int, int]]) -> list[dict]:
    """One run's records with its steps in increasing order: where a step is not above the one
    before (``monitor.step_count`` set back during the run, or training gone back to an earlier
    checkpoint with the same Monitor), the records from there on replace those logged before
    from that step on, as a resumption's do; each such place is added to ``set_back`` as
    ``(step before, step, records replaced)``. One pass when the steps increase throughout."""
    kept: list[dict] = []
    for record in records:
        step = record["step"]
        if kept and step <= kept[-1]["step"]:
            before = kept[-1]["step"]
            previous = len(kept)
            kept = [earlier for earlier in kept if earlier["step"] < step]
            set_back.append((before, step, previous - len(kept)))
        kept.append(record)
    return kept


def _set_back(log: Path, places: list[tuple[int, int, int]]) -> str:
    """The one warning of a log whose steps go back, or repeat, within a run (the first of
    ``places`` worded; :func:`_in_step_order`)."""
    (before, step, replaced), more = places[0], len(places) - 1
    others = f" (and {more} more such place{'s' if more > 1 else ''})" if more else ""
    if step == before:  # nothing went back: the step is logged again right after itself
        return (f"{log}: step {step} is logged twice in a row within one run (a repeat; the "
                f"steps do not go back){others}: monitor.step_count was set back by one, or "
                f"the step was trained again with the same Monitor; the later record replaces "
                f"the earlier one, so the line follows the training that went on")
    return (f"{log}: its steps go back within one run, from step {before} to step {step}"
            f"{others}: monitor.step_count was set back, or training went back to an earlier "
            f"checkpoint with the same Monitor; the later records replace the {replaced} logged "
            f"from step {step} on, so the line follows the training that went on")


def _from_step(header: dict) -> int | None:
    """The step a resumption's header says it starts from (``"resumed": {"from_step": n}``),
    or None when it says none."""
    resumed = header.get("resumed")
    step = resumed.get("from_step") if isinstance(resumed, dict) else None
    return step if type(step) is int else None


def _went_back(log: Path, resumptions: list[tuple[int, int, int | None]]) -> str:
    """The one warning of a log whose ``resumptions`` (first logged step, records replaced,
    the step its header says it starts from) went back to an earlier checkpoint: a job
    preempted every hour for a week has a hundred of them.

    Example:
        >>> print(_went_back(Path("run/metrics.jsonl"), [(9, 6, 7)]))
        ... # doctest: +NORMALIZE_WHITESPACE
        run/metrics.jsonl: a resumption from step 7 (first logged at step 9) starts at a step
        which the run had logged already (it went back to an earlier checkpoint, or its step
        count started over); its records replace the 6 from step 9 on
    """
    if len(resumptions) == 1:
        (first, replaced, start), = resumptions
        where = (f"a resumption starts at step {first}," if start is None or start >= first
                 else f"a resumption from step {start} (first logged at step {first}) starts "
                      f"at a step")  # the header's from_step: the loop's, before a logged one
        return (f"{log}: {where} which the run had logged already (it went back to an earlier "
                f"checkpoint, or its step count started over); its records replace the "
                f"{replaced} from step {first} on")
    steps = [first for first, _, _ in resumptions]
    shown = ", ".join(map(str, steps[:5])) + (f" and {len(steps) - 5} more" if len(steps) > 5
                                              else "")  # fmt: skip
    return (f"{log}: {len(steps)} resumptions start at steps the run had logged already (they "
            f"went back to earlier checkpoints, or their step counts started over: steps "
            f"{shown}); their records replace the "
            f"{sum(replaced for _, replaced, _ in resumptions)} logged before from those steps on")


def _with_dropped_steps(records: list[dict]) -> list[dict]:
    """``records`` (in step order) with a record of the step alone at each step that a sink's
    note names as dropped (``dropped_steps``, :data:`~gradlab.monitor.sinks.DROPPED_KEYS`) and
    no record holds: every line has a gap there (:func:`_gaps_where_missing`), not a line drawn
    across steps whose values were lost.

    Example:
        >>> records = [{"step": 0, "loss": 1.0}, {"step": 3, "loss": 0.5, "dropped_steps": [1, 2]}]
        >>> [sorted(r) for r in _with_dropped_steps(records)]
        [['loss', 'step'], ['step'], ['step'], ['dropped_steps', 'loss', 'step']]
    """
    notes = [record[DROPPED_KEYS[1]] for record in records if DROPPED_KEYS[1] in record]
    if not notes:  # the common case: one look at each record
        return records
    held = {record["step"] for record in records}
    dropped = {step for note in notes for step in (note if isinstance(note, list) else ())
               if type(step) is int and step not in held}  # fmt: skip
    if not dropped:
        return records
    return sorted([*records, *({"step": step} for step in dropped)], key=lambda r: r["step"])


def _read_log(log: Path) -> list[tuple[dict, list[dict]]]:
    """:func:`~gradlab.monitor.sinks.read_segments` of ``log``; its warning about skipped lines
    is passed on, or, when no record could be read, becomes a :class:`GradlabError`."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UserWarning)
            segments = read_segments(log)
    except OSError as error:
        reason = error.strerror or error
        raise GradlabError(f"cannot read the log {str(log)!r}: {reason}") from None
    skipped = [str(warning.message) for warning in caught]
    if skipped and not any(records for _, records in segments):
        raise GradlabError(  # the file, not an argument's name: the API and the CLI differ
            f"{'; '.join(skipped)}, so no logged step is left (a run folder must hold a "
            "metrics.jsonl written by gradlab.Monitor)"
        )
    for message in skipped:
        warnings.warn(message, UserWarning, stacklevel=caller_stacklevel())
    return segments


def _numbers_only(runs: list[Run], keys: set[str]) -> str | None:
    """Drop the values of ``keys`` that are not numbers (strings, booleans, lists) from the
    records, in place; return a note naming how many were dropped per key, or None."""
    dropped: dict[str, int] = {}
    for _, records in runs:
        for record in records:
            for key in keys & record.keys():
                value = record[key]
                if not _number(value):
                    del record[key]
                    dropped[key] = dropped.get(key, 0) + 1
    if not dropped:
        return None
    counts = ", ".join(f"{key} ({count})" for key, count in sorted(dropped.items()))
    return f"ignored {sum(dropped.values())} logged value(s) that are not numbers: {counts}"


def plot_runs(
    run_dirs: Sequence[str | Path],
    out: str | Path | None = None,
    labels: Sequence[str] | None = None,
    quantities: Sequence[type[Quantity] | Quantity] = (),
    overview: bool = True,
    max_points: int | None = MAX_POINTS,
) -> list[Path]:
    """Draw every family present in the runs' logs, runs overlaid; return the written paths.

    Writes ``<family>.png`` for each family and ``overview.png`` (one panel per family) into
    ``out``: by default ``RUN_DIR/figures`` for one run, ``<common parent>/figures`` for several.
    The families are those gradlab's quantities declare (:data:`PLOTS`), plus those of
    ``quantities`` (your own :class:`~gradlab.monitor.quantity.Quantity` classes or instances)
    and those the runs' headers record (the Monitor writes there the families of quantities
    that are not gradlab's, so that they are drawn without their classes): a family a run's
    resumption declared anew (a corrected title) as its latest header declares it, one that
    several runs declare as the first of them does.
    ``overview=False`` leaves the overview out (a page that shows every family's own figure;
    it is the slowest figure to draw). A figure an earlier plot left in ``out`` for a family
    these logs do not hold (a run replaced with ``overwrite=True``) is removed, so the folder
    never mixes runs: the earlier plot listed its figures in :data:`FIGURE_LIST`, and only
    those are removed or replaced. Other files there are left alone; one named like a figure
    to write (a ``loss.png`` of your own) is refused before anything is drawn.

    A run's key logged at more than ``max_points`` steps is drawn as the means of groups of
    consecutive logged steps, with a band from each group's smallest to its largest value
    (:func:`downsample`; the legend says so); ``max_points=None`` draws every logged step.

    Raises:
        GradlabError: a bad ``out``, ``labels``, ``quantities`` or ``max_points``; logs without
            a known key; a file in ``out`` that gradlab did not write where a figure would go.
    """
    if out is not None and (not isinstance(out, (str, Path)) or str(out) == ""):
        raise GradlabError(f"out must be a folder path or None; got {out!r}")
    check_max_points(max_points)
    if isinstance(quantities, (str, Quantity)) or not all(
        isinstance(q, Quantity) or (isinstance(q, type) and issubclass(q, Quantity))
        for q in quantities
    ):
        raise GradlabError(
            f"quantities must be a list of Quantity classes or instances; got {quantities!r}"
        )
    plots = _plots([*QUANTITIES, *quantities])
    runs = load_runs(run_dirs, labels)
    for plot in _logged_plots(run_dirs):  # the families the runs' own quantities declared
        plots.setdefault(plot.family, plot)
    names = {key: label for plot in plots.values() for key, label in plot.series}
    note = _numbers_only(runs, set(names))  # every key a family draws
    if note is not None:
        warnings.warn(note, UserWarning, stacklevel=caller_stacklevel())
    folder = Path(out) if out is not None else default_out([run_folder(p) for p in run_dirs])
    folder = check_output_folder(folder, argument="out")  # a leading ~ expanded
    present = {
        family: [key for key in plot.keys if any(key in r for _, records in runs for r in records)]
        for family, plot in plots.items()
    }
    present = {family: keys for family, keys in present.items() if keys}
    if not present:
        undrawn = _undrawn(runs, set())
        said = (f": {', '.join(undrawn)} {UNDRAWN_HINT}" if undrawn
                else " (nor any key of a quantity of your own)")
        raise GradlabError(f"the logs of {list(map(str, run_dirs))} hold no key that a figure "
                           f"family draws{said}")  # fmt: skip
    headers = _stepped_headers(run_dirs)  # read once for both
    # the runs as the legends name them (given labels, or load_runs's of their folders)
    named = list(labels) if labels is not None else _default_labels(
        [run_folder(run_dir) for run_dir in run_dirs])
    drawn_names = {name for name, _ in runs}
    unknown = [name for name, run_headers in zip(named, headers, strict=True)
               if not run_headers and name in drawn_names]  # fmt: skip
    if unknown:  # a file gradlab.Monitor did not write whole: said, then drawn
        warnings.warn(
            f"{', '.join(unknown)}: no header line before the logged steps (gradlab.Monitor "
            "writes one first, with the run's settings): tau, preset and schedules unknown, "
            "so no tau is compared with the other runs' or said on the figures; drawn as "
            "logged", UserWarning, stacklevel=caller_stacklevel())  # fmt: skip
    taus = {name: _run_taus(run_headers)  # read once: the warning and the legends
            for name, run_headers in zip(named, headers, strict=True)}  # fmt: skip
    mixed = _mixed_taus([family for family in present if family in TAU_FAMILIES], taus)
    default_tau = _default_tau(headers)
    if default_tau is not None:  # a loss without a sigmoid tau: said on the figures themselves
        plots = {family: _said_of_the_default_tau(plot, default_tau)
                 if family in TAU_FAMILIES else plot for family, plot in plots.items()}
    else:  # some runs only: said of them by name, in a warning and on their figures
        at_default = _runs_at_the_default_tau(
            headers, named, [family for family in present if family in TAU_FAMILIES])
        some = _some_at_the_default_tau(at_default)
        if some is not None:
            warnings.warn(some, UserWarning, stacklevel=caller_stacklevel())
        runs_of = {family: [name for name, drawn in at_default.items() if family in drawn]
                   for family in plots}  # fmt: skip
        plots = {family: _said_of_runs_at_the_default_tau(plot, runs_of[family])
                 if runs_of[family] else plot for family, plot in plots.items()}
    if mixed is not None:  # said, and each run's legend entry carries its tau
        warnings.warn(mixed, UserWarning, stacklevel=caller_stacklevel())
        runs = _named_with_taus(runs, taus)
    undrawn = _undrawn_keys(runs, {key for plot in plots.values() for key in plot.keys})
    if undrawn is not None:
        warnings.warn(undrawn, UserWarning, stacklevel=caller_stacklevel())
    to_write = [*(f"{family}.png" for family in present), *(["overview.png"] if overview else [])]
    _refuse_files_not_ours(folder, to_write)
    _list_ahead(folder, to_write)
    with gradlab_style():  # the caller's matplotlib settings come back after it
        written = []
        for family, keys in present.items():
            figure, axis = plt.subplots(figsize=FAMILY_FIGSIZE)
            draw_family(axis, family, keys, runs, plots=plots, max_points=max_points)
            handles = _legend(keys, runs, names) + _band_handles(axis) + _not_finite_handles(axis)
            fit_width(figure, lambda columns, axis=axis, handles=handles: legend_below(
                axis, columns=columns, handles=handles, fontsize=LEGEND_FONTSIZE,
                bbox_transform=_below_the_crosses(axis)), FAMILY_LEGEND_COLUMNS)  # fmt: skip
            written.append(save_figure(figure, folder / f"{family}.png"))
        if overview:
            written.append(_overview(present, runs, folder / "overview.png", plots, max_points))
    _remove_stale(folder, written)
    return written




def _figures_of_earlier_plots(folder: Path) -> set[str]:
    """The figures the list in ``folder`` names (:data:`FIGURE_LIST`): those an earlier plot
    wrote there; none when there is no list, or one that is not gradlab's to read."""
    try:
        earlier = json.loads((folder / FIGURE_LIST).read_text())
    except (OSError, ValueError):
        return set()
    if not isinstance(earlier, list):
        return set()
    return {name for name in earlier if isinstance(name, str) and "/" not in name
            and name.endswith(".png")}  # fmt: skip


def _refuse_files_not_ours(folder: Path, names: list[str]) -> None:
    """Refuse to replace a file in ``folder`` that no earlier plot wrote (its list does not name
    it): a figure of the user's own named like a family's, in a folder given as ``out``."""
    ours = _figures_of_earlier_plots(folder)
    foreign = [name for name in names if name not in ours and os.path.lexists(folder / name)]
    if foreign:
        raise GradlabError(
            f"the figures folder {str(folder)!r} already holds {', '.join(foreign)}, which gradlab "
            f"plot did not write (it lists its own figures in {FIGURE_LIST}) and would replace: "
            "plot into another folder, or move those files away"
        )


def _list_ahead(folder: Path, names: list[str]) -> None:
    """List ``names`` with the earlier plots' figures in :data:`FIGURE_LIST` before drawing any
    (none of them is a file of the user's: :func:`_refuse_files_not_ours` came first). A plot
    interrupted half-way then leaves a list naming every figure it may have written, and the
    next plot replaces or removes them instead of refusing them as files gradlab did not
    write."""
    folder.mkdir(parents=True, exist_ok=True)
    listed = _figures_of_earlier_plots(folder) | set(names)
    (folder / FIGURE_LIST).write_text(json.dumps(sorted(listed)))


def _remove_stale(folder: Path, written: list[Path]) -> None:
    """Remove the figures an earlier plot wrote in ``folder`` (its list names them) that this
    one did not write again; then list this plot's figures. Nothing else is removed."""
    if not folder.is_dir():  # nothing was written (figures drawn but not saved)
        return
    names = {path.name for path in written}
    for name in _figures_of_earlier_plots(folder) - names:
        (folder / name).unlink(missing_ok=True)
    listed = folder / FIGURE_LIST
    listed.write_text(json.dumps(sorted(names)))


def plot_run(run_dir: str | Path, out: str | Path | None = None, overview: bool = True,
             max_points: int | None = MAX_POINTS) -> list[Path]:  # fmt: skip
    """:func:`plot_runs` of one run (figures in ``RUN_DIR/figures`` by default)."""
    return plot_runs([run_dir], out, overview=overview, max_points=max_points)


def check_max_points(max_points: object, argument: str = "max_points") -> None:
    """Refuse a ``max_points`` that is neither None nor a whole number of at least 2.

    Example:
        >>> check_max_points(1, argument="--max-points")
        Traceback (most recent call last):
            ...
        gradlab.errors.GradlabError: --max-points must be a whole number of at least 2 (or None: every logged step); got 1
    """  # noqa: E501
    if max_points is None:
        return
    if isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 2:
        raise GradlabError(f"{argument} must be a whole number of at least 2 (or None: every "
                           f"logged step); got {max_points!r}")  # fmt: skip


def downsample(steps: Sequence[float], values: Sequence[float], max_points: int,
               scale: Transform | None = None,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """``(steps, means, lows, highs)``: the logged ``steps`` and their ``values`` in groups of
    ``ceil(len(steps) / max_points)`` consecutive points (the last group may be shorter), so at
    most ``max_points`` remain. Each group's step is the mean of its steps, its value the mean
    of its finite values, its band their smallest and largest; a group without a finite value
    is NaN (a gap in the line; the steps that are not finite keep their crosses).

    ``scale``: the y axis's transform (``axis.yaxis.get_transform()``); the means are then
    taken in the axis's own coordinates, so that a line on a log axis is the geometric mean
    (an arithmetic mean there is its largest values': a gradient that falls to 1e-20 at a
    third of the steps would be drawn at a third of its usual size, a healthy line).

    Example:
        >>> steps, means, lows, highs = downsample(range(5), [1.0, 3.0, 2.0, float("nan"), 5.0], 3)
        >>> steps.tolist(), means.tolist(), lows.tolist(), highs.tolist()
        ([0.5, 2.5, 4.0], [2.0, 2.0, 5.0], [1.0, 2.0, 5.0], [3.0, 2.0, 5.0])
    """
    steps = np.asarray(steps, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    if scale is not None:  # the band's ends are the values themselves: the same either way
        lows, highs = downsample(steps, values, max_points)[2:]
        finite = np.isfinite(values)
        placed = np.full_like(values, np.nan)
        placed[finite] = scale.transform(values[finite])
        steps, means, _, _ = downsample(steps, placed, max_points)
        kept = np.isfinite(means)
        means[kept] = scale.inverted().transform(means[kept])
        return steps, means, lows, highs
    size = math.ceil(len(values) / max_points)
    starts = np.arange(0, len(values), size)
    lengths = np.diff(np.append(starts, len(values)))
    finite = np.isfinite(values)
    counts = np.add.reduceat(finite, starts)
    sums = np.add.reduceat(np.where(finite, values, 0.0), starts)
    empty = counts == 0
    means = np.where(empty, np.nan, sums / np.maximum(counts, 1))
    lows = np.where(empty, np.nan, np.minimum.reduceat(np.where(finite, values, np.inf), starts))
    highs = np.where(empty, np.nan,
                     np.maximum.reduceat(np.where(finite, values, -np.inf), starts))  # fmt: skip
    return np.add.reduceat(steps, starts) / lengths, means, lows, highs


MARKS = 8
"""About this many markers per line when several runs are overlaid."""

COINCIDE = 0.02
"""Two keys of one run lie on one another where they differ by at most this share of the
larger; when they do at :data:`COINCIDING_SHARE` of their common steps, the family's keys
mark alternate steps, so the one drawn first still shows its markers."""
COINCIDING_SHARE = 0.9
"""The share of common steps at which two keys must lie on one another (:data:`COINCIDE`)."""


def coinciding(keys: Sequence[str], records: Sequence[dict]) -> bool:
    """Whether two of ``keys`` lie on one another over a run's ``records``: within
    :data:`COINCIDE` of the larger at :data:`COINCIDING_SHARE` of the steps where both are
    finite (|AD - CB| on |AD| when CB is negligible, say).

    Example:
        >>> records = [{"step": s, "a": 1.0 + s, "b": 1.001 + s, "c": -s} for s in range(10)]
        >>> coinciding(["a", "b"], records), coinciding(["a", "c"], records)
        (True, False)
    """
    return bool(covered_keys(keys, records))


def covered_keys(keys: Sequence[str], records: Sequence[dict]) -> set[str]:
    """The keys that lie on a later one of ``keys`` over a run's ``records`` (by the rule of
    :func:`coinciding`): drawn first, each lies under the later line, so it is drawn wider,
    a band around that line.

    Example:
        >>> records = [{"step": s, "a": 1.0 + s, "b": -s, "c": 1.001 + s} for s in range(10)]
        >>> covered_keys(["a", "b", "c"], records)
        {'a'}
    """
    covered = set()
    for index, first in enumerate(keys):
        for second in keys[index + 1 :]:
            pairs = [(r[first], r[second]) for r in records
                     if _number(r.get(first)) and _number(r.get(second))
                     and math.isfinite(r[first]) and math.isfinite(r[second])]  # fmt: skip
            close = [abs(a - b) <= COINCIDE * max(abs(a), abs(b)) for a, b in pairs]
            if len(close) >= 2 * len(keys) and sum(close) >= COINCIDING_SHARE * len(close):
                covered.add(first)
    return covered


def _line_style(run_index: int, key_index: int, several: bool, points: int = 0,
                runs: int = 1, alternate: int = 0, grouped: int = 0) -> dict:  # fmt: skip
    """Several runs: the run's colour and marker, the key's line style. Each run marks about
    :data:`MARKS` of its ``points`` steps, at steps the other runs leave unmarked, so a run
    under an identical later one still shows its own markers and the first steps do not become
    a blob of markers. One run: the key's series style, a marker on every step, or with
    ``alternate`` keys (keys that lie on one another) on every ``alternate``-th step from the
    key's own index, so each key shows its markers where the others leave a step unmarked.
    A line of means (:func:`downsample`) of one run whose family draws ``grouped`` keys marks
    about :data:`MARKS` of its points, each key at points the others leave unmarked."""
    if not several:
        every = {"markevery": (key_index % alternate, alternate)} if alternate > 1 else {}
        if grouped:
            spacing = max(grouped, max(points, 1) // MARKS)
            every = {"markevery": (key_index % grouped * (spacing // grouped), spacing)}
        return {**series_style(key_index), "markersize": MARKER_SIZE, **every}
    step = max(runs, (max(points, 1) // MARKS) // runs * runs)  # a multiple of the run count
    return {"color": series_style(run_index)["color"], "marker": series_style(run_index)["marker"],
            "markersize": RUN_MARKER_SIZE, "markevery": (run_index % step, step),
            "linewidth": RUN_LINE_WIDTH,
            "linestyle": LINE_STYLES[key_index % len(LINE_STYLES)]}  # fmt: skip


def _gaps_where_missing(records: Sequence[dict], steps: list, values: list,
                        key: str | None = None) -> tuple[list, list]:  # fmt: skip
    """``steps`` and ``values`` of ``key`` (the steps of ``records`` that hold it, ascending)
    with a NaN (a gap, no cross) at each step where its quantity was due and logged nothing
    (an empty batch, a loss call that scored nothing, a ``compute`` that returned ``{}``): a
    line across such a step would read as a value there.

    Due is what the run's headers record (:class:`Records`, :func:`recorded_schedules`): a
    step with a record at which the key's own quantity's schedule logs. Where they record no
    schedule of it (a log of an earlier gradlab; a schedule of the user's own), due is guessed
    from the key's mates, the keys in every record that holds it (its quantity's
    other keys, the keys of quantities on the same schedule): a step where a mate is logged and
    the key is not was due. It is a gap when the key's own steps around it are further apart
    than their neighbours (a key on a schedule of its own, ``every(2)`` beside a loss logged
    every step, keeps its line: its steps are evenly spaced); with no neighbour to compare
    (two steps), when the key holds more than half of the due steps of its span (at most
    half: a sparser schedule, one line). A record that holds the step alone (every quantity
    logged nothing there) is due for every key."""
    if len(steps) < 2:
        return steps, values
    span = [r for r in records if steps[0] <= r["step"] <= steps[-1]]
    if len(span) == len(steps):  # no step of its span without it: no schedule to ask
        return steps, values
    due = (records.due_steps(key, steps[0], steps[-1])
           if isinstance(records, Records) and key is not None else None)  # fmt: skip
    if due is not None:
        gaps = due.difference(steps)
        return _with_gaps(steps, values, gaps) if gaps else (steps, values)
    present = set(steps)
    holders = [r for r in span if r["step"] in present]
    mates = set(holders[0]).intersection(*holders[1:])  # the key itself among them
    mates.discard("step")
    due = {r["step"] for r in span if len(r) == 1 or not mates.isdisjoint(r)}
    missing = sorted(due - present)
    if not missing:
        return steps, values
    intervals = [after - before for before, after in itertools.pairwise(steps)]
    gaps = set()
    for step in missing:
        index = bisect.bisect_left(steps, step) - 1  # steps[index] < step < steps[index + 1]
        around = intervals[max(index - 1, 0):index] + intervals[index + 1:index + 2]
        if around:
            wide = intervals[index] > min(around)
        else:  # two steps: the share of the due steps they hold
            wide = 2 * len(steps) > len(due)
        if wide:
            gaps.add(step)
    if not gaps:
        return steps, values
    return _with_gaps(steps, values, gaps)


def _with_gaps(steps: list, values: list, gaps: set) -> tuple[list, list]:
    """``steps`` and ``values`` with a NaN at each of ``gaps`` (steps that ``steps`` lacks)."""
    logged = dict(zip(steps, values, strict=True))
    steps = sorted({*steps, *gaps})
    return steps, [logged.get(step, math.nan) for step in steps]


def _isolated_points_marked(style: dict, values) -> dict:
    """``style`` whose ``markevery`` also marks each finite value with no finite neighbour: no
    line reaches such a point, so without its marker it would not be drawn at all (a run's
    only value between NaN steps, a run of one step whose marker falls elsewhere)."""
    every = style.get("markevery")
    if every is None:  # a marker at every point
        return style
    isolated = set(isolated_points(values))
    start, step = every
    marked = set(range(start, len(values), step))
    if isolated <= marked:
        return style
    return {**style, "markevery": sorted(marked | isolated)}


def draw_family(
    axis, family: str, keys: list[str], runs: list[Run], wrap: int = 80, plots=PLOTS,
    max_points: int | None = MAX_POINTS,
) -> None:  # fmt: skip
    """Draw one family's ``keys`` of ``runs`` onto a matplotlib ``axis`` (runs overlaid).

    Args:
        axis: a matplotlib Axes.
        family: a family of ``plots`` (its title, y label and axis start).
        keys: the family's keys to draw.
        runs: ``(label, records)`` pairs, as :func:`load_runs` returns them.
        wrap: the title's line width in characters.
        plots: family -> :class:`~gradlab.monitor.quantity.Plot` (:data:`PLOTS`).
        max_points: a key of a run logged at more steps than this is drawn as the means of
            groups of consecutive steps, over a band from each group's smallest to its largest
            value (:func:`downsample`), the bands labelled with how many steps a group holds
            (:data:`BAND_LABEL`); None: every logged step.

    Example:
        >>> from matplotlib.figure import Figure
        >>> axis = Figure().subplots()
        >>> draw_family(axis, "loss", ["loss"], [("run", [{"step": 0, "loss": 0.5}])])
        >>> axis.get_title(), len(axis.get_lines())
        ('Loss', 1)
    """
    check_max_points(max_points)
    plot = plots[family]
    title, ylabel = plot.title, plot.ylabel
    several = len(runs) > 1
    # the scale first, a line of grouped steps being a mean on it; and the y limits it sets
    # itself (matplotlib's autoscale overflows there), if any
    limits = None if plot.zero_based else _set_value_scale(axis, [
        float(r[key]) for _, records in runs for r in records for key in keys
        if key in r and _number(r[key]) and _drawable(r[key])])  # fmt: skip
    scale = None if axis.get_yscale() == "linear" else axis.yaxis.get_transform()
    covered = set() if several else covered_keys(keys, runs[0][1])
    alternate = len(keys) if covered else 0
    broken: dict[int, set[int]] = {}  # run -> its steps with a NaN or infinite value
    grouped = 0  # the most logged steps one drawn point stands for (0: each its own)
    drawn: list[float] = []  # the values drawn: lines, and the bands' ends
    bands = []  # the bands of grouped lines
    for run_index, (_, records) in enumerate(runs):
        for key_index, key in enumerate(keys):
            points = [(r["step"], r[key]) for r in records if key in r and _number(r[key])]
            broken.setdefault(run_index, set()).update(
                step for step, value in points if not _drawable(value))  # fmt: skip
            if any(_drawable(value) for _, value in points):
                # a value that is not finite leaves a gap: a line across it would hide it
                values = [value if _drawable(value) else math.nan for _, value in points]
                steps = [step for step, _ in points]
                steps, values = _gaps_where_missing(records, steps, values, key)
                group = (math.ceil(len(points) / max_points)
                         if max_points is not None and len(points) > max_points else 0)  # fmt: skip
                style = _line_style(run_index, key_index, several,
                                    len(points) if not group else math.ceil(len(points) / group),
                                    len(runs), alternate, len(keys) if group else 0)  # fmt: skip
                if group:
                    grouped = max(grouped, group)
                    steps, values, lows, highs = downsample(steps, values, max_points, scale)
                    bands.append(axis.fill_between(steps, lows, highs, color=style["color"],
                                                   alpha=BAND_ALPHA, linewidth=0))  # fmt: skip
                    drawn += [*lows.tolist(), *highs.tolist()]
                style = _isolated_points_marked(style, values)
                if key in covered:  # a band under the later line it lies on
                    style = {**style, "linewidth": COVERED_LINE_WIDTH, "alpha": COVERED_ALPHA}
                axis.plot(steps, values, **{"linewidth": LINE_WIDTH, **style})
                drawn += list(values)
    for band in bands:  # named in the legend (:func:`_band_handles`), once
        band.set_label(BAND_LABEL.format(grouped, MEANS[axis.get_yscale()]))
    axis.set_xlabel("optimizer step")
    step_axis(axis)  # steps are whole: no 0.5 ticks, one tick for a run of one step
    axis.set_ylabel(ylabel)
    if plot.undefined is not None and any(broken.values()):  # why its crosses are there
        title = f"{title} [crosses: {plot.undefined}]"
    axis.set_title(textwrap.fill(title, wrap), pad=TITLE_PAD)
    values = [float(v) for v in drawn if math.isfinite(v)]
    if limits is not None:
        axis.set_ylim(*limits)
    if plot.zero_based:  # counts and shares: from 0; all zero: 0..1, not -0.04..0.04
        # 0 among the data: the margin above the values is taken over the 0..top the axis
        # shows, not over their own spread (0.5 +- 6e-8, float32 rounding: the top was at the
        # line, which lay on the frame)
        axis.update_datalim([(0.0, 0.0)], updatex=False)
        axis.autoscale_view(scalex=False)
        top = axis.get_ylim()[1] if max(values, default=0) > 0 else 1
        axis.set_ylim(-0.03 * top, top)  # a zero line above the frame, not on it
    elif values and axis.get_yscale() == "linear":
        _flat_drawn_flat(axis, min(values), max(values), plot.resolution)
    if values and axis.get_yscale() == "linear" and all(v == int(v) for v in values):
        axis.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: no 0.5 ticks
    # a cross on the step axis at each step with a value that is not finite; with several
    # runs in the run's colour, each run that has some on a row of its own
    rows = [(run, steps) for run, steps in broken.items() if steps]
    for row, (run_index, steps) in enumerate(rows):
        style = NOT_FINITE_STYLE if not several else {
            **NOT_FINITE_STYLE, "color": series_style(run_index)["color"],
            "label": RUN_CROSSES_LABEL}  # fmt: skip
        below = offset_copy(axis.get_xaxis_transform(), axis.figure, y=-CROSS_ROW * row,
                            units="points")  # fmt: skip
        axis.plot(sorted(steps), [0.0] * len(steps), **style, transform=below, clip_on=False)
    if rows:  # the crosses' steps inside the step range, as a drawn value's (a family with no
        # finite value has no line to set it: the crosses lay outside the frame, and the
        # figure's tight box stretched tens of thousands of pixels to reach them)
        crossed = sorted(set().union(*(steps for _, steps in rows)))
        axis.update_datalim([(step, 1.0) for step in crossed], updatey=False)
        axis.autoscale_view(scaley=False)
        if not values:  # no line: the value axis has nothing to read (matplotlib's -0.04..0.04)
            axis.set_yticks([])
            axis.text(0.5, 0.5, NO_FINITE_VALUE, transform=axis.transAxes, ha="center",
                      va="center", color=NO_FINITE_VALUE_COLOR)  # fmt: skip
    if len(rows) > 1:  # the step labels below the rows
        axis.tick_params(axis="x", pad=plt.rcParams["xtick.major.pad"]
                         + CROSS_ROW * (len(rows) - 1))  # fmt: skip


ROUNDING = 1e-9
"""Values of a family that differ by at most this share of their magnitude differ by rounding
only: they are drawn as a flat line (:func:`_flat_drawn_flat`)."""


def _flat_drawn_flat(axis, low: float, high: float, resolution: float) -> None:
    """Values that differ by rounding alone (:data:`ROUNDING` of their size, a loss of 0.5 +-
    1e-12; or at most the family's ``resolution``, a gap of two APs at 1e-16) drawn as the
    flat line they are: matplotlib would stretch the axis over that spread, a full-height
    zig-zag under an offset label (``1e-12+5e-1``)."""
    spread = high - low
    if spread == 0 or spread > max(ROUNDING * max(abs(low), abs(high)), resolution):
        return  # one value (matplotlib pads it), or a spread worth reading
    centre = (low + high) / 2
    pad = max(0.1 * abs(centre), 10 * resolution)
    axis.set_ylim(centre - pad, centre + pad)
    axis.ticklabel_format(axis="y", useOffset=False)


def _set_value_scale(axis, values: list[float]) -> tuple[float, float] | None:
    """The y scale of a family's finite ``values``: log where they span three decades or
    more (:func:`spans_decades`); symmetric log where they do but for exact zeros (a gradient
    that is exactly 0 at some steps, or in one of the runs overlaid: a linear axis would draw
    the others' 1e-20 as 0, and the same run would read differently alone), linear up to the
    decade of the smallest positive value so that 0 is drawn; else, and for values beyond
    ``1e+-250`` (:data:`EXTREME_POWER`, where matplotlib's log scales overflow), linear.
    Returns the y limits to set once drawn (a symmetric log axis: 0 half a decade's height
    above its frame), else None."""
    positive = [value for value in values if value > 0]
    if not positive or not spans_decades(positive) or min(values) < 0:
        return None  # one decade, or signed values: linear
    low = math.floor(math.log10(min(positive)))
    high = math.ceil(math.log10(max(positive)))
    if max(-low, high) > EXTREME_POWER:
        return None
    if min(values) > 0:
        log_scale(axis)
        return None
    log_scale(axis, linthresh=10.0**low)
    stride = math.ceil((high - low + 1) / SYMLOG_TICKS)  # not a label at every decade
    axis.yaxis.set_major_locator(FixedLocator(
        [0.0, *(10.0**power for power in range(high, low - 1, -stride))]))  # fmt: skip
    axis.yaxis.set_minor_locator(NullLocator())
    return -0.5 * 10.0**low, 10.0**high


EXTREME_POWER = 250
"""Values beyond ``1e+-250`` are drawn on a linear axis: matplotlib's log scales overflow near
float64's ends (a traceback, or a figure with nothing drawn)."""

SYMLOG_TICKS = 7
"""About this many powers of ten are labelled on a symmetric log axis (and 0)."""


def spans_decades(values, decades: float = 3) -> bool:
    """Whether positive ``values`` span at least ``decades`` powers of ten (a quantity that
    collapses towards 0 is read on a log axis); False when one is 0 or negative.

    Example:
        >>> spans_decades([1.4, 0.4, 2e-6, 5e-10]), spans_decades([1.4, 0.0, 2e-6])
        (True, False)
    """
    values = [v for v in values if math.isfinite(v)]
    if not values or min(values) <= 0:
        return False
    return math.log10(max(values) / min(values)) >= decades


FLAT = 1e-5
"""A family whose every logged series stays within this of its first value is flat: a report
states its values in a sentence instead of a full-size figure of flat lines."""


def flat_families(runs: list[Run], plots=PLOTS, tolerance: float = FLAT) -> dict[str, str]:
    """Family -> a sentence with its values, for each family present in ``runs`` whose every
    series stays within ``tolerance`` (all zero, say).

    Example:
        >>> runs = [("run", [{"step": 0, "loss": 0.5, "degenerate_batches": 0},
        ...                  {"step": 1, "loss": 0.4, "degenerate_batches": 0}])]
        >>> flat_families(runs)["degenerate_batches"].split(":")[1]
        ' batches without ranking signal (counted by the loss) 0 at each of the 2 logged steps'
    """
    flat = {}
    for family, plot in plots.items():
        parts = []
        for key, label in plot.series:
            values = [r[key] for _, records in runs for r in records
                      if key in r and _finite(r[key])]  # fmt: skip
            if not values:
                continue
            low, high = min(values), max(values)
            if high - low > tolerance:
                break
            steps = len(values) // len(runs)
            if low == high:
                parts.append(f"{label} {low:g} at each of the {steps} logged steps")
            elif f"{low:.3g}" == f"{high:.3g}":
                parts.append(f"{label} {low:.3g} (to within {high - low:.1g})")
            else:
                parts.append(f"{label} between {low:.3g} and {high:.3g}")
        else:
            if parts:
                flat[family] = f"{plot.title}: {'; '.join(parts)}"
    return flat


def _key_handles(keys: list[str], several: bool, labels=LABELS,
                 covered: set[str] | frozenset[str] = frozenset()) -> list[Line2D]:  # fmt: skip
    """The keys' legend entries: grey line styles (several runs), else each key's style, a
    ``covered`` key (:func:`covered_keys`) as the band it is drawn as."""
    if several:  # the keys in grey, by line style
        return [Line2D([], [], color="0.3", linestyle=LINE_STYLES[i % len(LINE_STYLES)],
                       label=key_label(key, labels)) for i, key in enumerate(keys)]  # fmt: skip
    band = {"linewidth": COVERED_LINE_WIDTH, "alpha": COVERED_ALPHA}
    return [Line2D([], [], **{"linewidth": LINE_WIDTH, **_line_style(0, i, False),
                              **(band if key in covered else {})},
                   label=key_label(key, labels)) for i, key in enumerate(keys)]  # fmt: skip


def _run_handles(runs: list[Run]) -> list[Line2D]:
    return [Line2D([], [], **{**_line_style(i, 0, True), "markevery": None},
                   label=_verbatim(name)) for i, (name, _) in enumerate(runs)]  # fmt: skip


def _verbatim(label: str) -> str:
    """``label`` as matplotlib draws it as written: a ``$`` escaped, which would otherwise
    open math text (``$x^2$`` drawn as a formula, an unknown ``$\\cmd$`` a ParseException at
    drawing time, a user's label or a folder name)."""
    return label.replace("$", r"\$")


def fit_width(figure, make_legend: Callable[[int], Legend], columns: int) -> Legend:
    """``make_legend(columns)``, drawn again with fewer columns until it is no wider than
    ``figure`` (down to one column): long run names in a row wider than the figure would widen
    the saved PNG, and a page shows a wider PNG smaller, its text with it.

    Example:
        >>> from matplotlib.figure import Figure
        >>> figure = Figure(figsize=(3, 2))
        >>> names = [f"a run named at length {i}" for i in range(4)]
        >>> legend = fit_width(figure, lambda n: figure.legend([Line2D([], [])] * 4, names,
        ...                                                      ncols=n), 4)
        >>> len(figure.legends), bool(legend.get_window_extent().width <= figure.bbox.width)
        (1, True)
    """
    legend = make_legend(columns)
    while columns > 1 and legend.get_window_extent().width > figure.bbox.width:
        legend.remove()
        columns -= 1
        legend = make_legend(columns)
    return legend


def _legend(keys: list[str], runs: list[Run], labels=LABELS) -> list[Line2D]:
    """One colour per run and one line style per key (several runs); one style per key (one).
    Runs that log none of ``keys`` (runs with other quantities) get no colour entry: the last
    entry names them (:func:`_not_logged_handles`)."""
    if len(runs) == 1:
        return _key_handles(keys, False, labels, covered_keys(keys, runs[0][1]))
    drawn = [handle for handle, (_, records) in zip(_run_handles(runs), runs, strict=True)
             if _logs_any(records, keys)]  # fmt: skip
    return (drawn + (_key_handles(keys, True, labels) if len(keys) > 1 else [])
            + _not_logged_handles(keys, runs))  # fmt: skip


NOT_LOGGED_LABEL = "not logged by: {}"
"""The legend entry of a figure (or overview panel) that names the overlaid runs logging none
of its keys (a loss that cannot serve the quantity: its header's ``not_logged`` says why)."""


def _logs_any(records: list[dict], keys: list[str]) -> bool:
    return any(key in record for record in records for key in keys)


def _not_logged_handles(keys: list[str], runs: list[Run]) -> list[Line2D]:
    """An entry without a line naming the runs of an overlay that log none of ``keys``: they
    are missing from the figure, and the overview's legend of runs names them."""
    absent = [name for name, records in runs if not _logs_any(records, keys)]
    if len(runs) < 2 or not absent:
        return []
    return [Line2D([], [], linestyle="none",
                   label=_verbatim(NOT_LOGGED_LABEL.format(", ".join(absent))))]  # fmt: skip


def _overview(present: dict[str, list[str]], runs: list[Run], path: Path, plots=PLOTS,
              max_points: int | None = MAX_POINTS) -> Path:  # fmt: skip
    columns = 2 if len(present) > 1 else 1
    rows = math.ceil(len(present) / columns)
    width, height = PANEL_SIZE
    figure, axes = plt.subplots(rows, columns, figsize=(width * columns, height * rows),
                                squeeze=False)  # fmt: skip
    for axis, (family, keys) in zip(axes.flat, present.items(), strict=False):
        draw_family(axis, family, keys, runs, wrap=45, plots=plots, max_points=max_points)
        labels = {key: label for key, label in plots[family].series}
        keyed = len(keys) > 1 or len(runs) == 1  # else the runs' legend names the one key
        covered = covered_keys(keys, runs[0][1]) if len(runs) == 1 else set()
        handles = (_key_handles(keys, len(runs) > 1, labels, covered) if keyed else []) + (
            _band_handles(axis) + _not_finite_handles(axis) + _not_logged_handles(keys, runs))
        if handles:
            axis.legend(handles=handles,
                        fontsize=LEGEND_FONTSIZE, loc="upper center", bbox_to_anchor=(0.5, -0.2),
                        bbox_transform=_below_the_crosses(axis), frameon=False)  # fmt: skip
    drawn = list(axes.flat)[: len(present)]
    low = min(axis.get_xlim()[0] for axis in drawn)  # one step range for every panel: a key
    high = max(axis.get_xlim()[1] for axis in drawn)  # missing at the last step (the gradient
    for axis in drawn:  # of the closing step) does not shorten its panel
        axis.set_xlim(low, high)
    for axis in list(axes.flat)[len(present) :]:
        axis.set_visible(False)
    if len(runs) > 1:
        run_handles = _run_handles(runs)
        top = 1 - 0.5 / figure.get_figheight()  # half an inch for the runs' legend
        figure.tight_layout(rect=(0, 0, 1, top))
        fit_width(figure, lambda columns: figure.legend(
            handles=run_handles, loc="lower center", ncol=columns, bbox_to_anchor=(0.5, top),
            frameon=False), min(len(runs), RUN_LEGEND_COLUMNS))  # fmt: skip
    else:
        figure.tight_layout()
    return save_figure(figure, path)


def _default_labels(paths: list[Path]) -> list[str]:
    """The runs' legend labels when none are given: each folder's name, or for folders of one
    name their paths below the common parent. A callback's :data:`CALLBACK_FOLDER` names no
    run and is left out (``out/csv/version_0/gradlab_logs`` is ``version_0``); of runs that are
    all a callback's, the folders that every path has at one place from its end are left out
    too (the logger's name, a ``version_0`` of each), so ``out1/csv/version_0/gradlab_logs``
    beside ``out2/csv/version_0/gradlab_logs`` is ``out1``. Where leaving those out would give
    a run no label, or two runs one, only ``gradlab_logs`` is left out; where that would, the
    paths below the common parent are the labels."""
    resolved = [path.resolve() for path in paths]
    names = [next((part for part in reversed(path.parts) if part != CALLBACK_FOLDER), path.name)
             for path in resolved]  # fmt: skip
    if len(set(names)) == len(names) or len(paths) < 2:
        return names
    base = Path(os.path.commonpath([str(path) for path in resolved]))
    below = [path.relative_to(base).parts for path in resolved]
    kept = [[part for part in parts if part != CALLBACK_FOLDER] for parts in below]
    candidates = [kept]
    if all(CALLBACK_FOLDER in path.parts for path in resolved):
        shared = {back for back in range(1, min(map(len, kept)) + 1)
                  if len({parts[-back] for parts in kept}) == 1}  # fmt: skip
        candidates.insert(0, [[part for back, part in enumerate(reversed(parts), 1)
                               if back not in shared][::-1] for parts in kept])  # fmt: skip
    for candidate in candidates:  # the shortest labels that name every run apart
        labels = [str(Path(*parts)) if parts else "" for parts in candidate]
        if all(labels) and len(set(labels)) == len(labels):
            return labels
    # the common parent itself, run beside runs inside it: named by its folder, not "."
    return [str(Path(*parts)) if parts else path.name
            for parts, path in zip(below, resolved, strict=True)]  # fmt: skip


LARGEST_DRAWN = 1e300
"""Values beyond this magnitude are marked on the step axis like NaN and infinities: near
float64's largest number matplotlib's scales and tick locators overflow (a traceback, or a
figure with nothing drawn), and such a value is an overflow in all but name."""


def _drawable(value: float) -> bool:
    """Finite and at most :data:`LARGEST_DRAWN` in magnitude."""
    return math.isfinite(value) and abs(value) <= LARGEST_DRAWN


def _finite(value: object) -> bool:
    return _number(value) and math.isfinite(value)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _band_handles(axis) -> list[Patch]:
    """The legend entry of the bands :func:`draw_family` drew under grouped lines, when
    ``axis`` has them."""
    prefix = BAND_LABEL.split("{", 1)[0]
    labels = [band.get_label() for band in axis.collections
              if band.get_label().startswith(prefix)]  # fmt: skip
    return [Patch(facecolor="0.5", alpha=2 * BAND_ALPHA, label=labels[0])] if labels else []


def _below_the_crosses(axis) -> Transform:
    """The axes' coordinates moved down by the rows of crosses :func:`draw_family` put below
    the frame (:data:`CROSS_ROW`), and the step labels with them: a legend placed under the
    axes in them stays clear of the labels."""
    rows = sum(line.get_label() == RUN_CROSSES_LABEL for line in axis.get_lines())
    return offset_copy(axis.transAxes, axis.figure, y=-CROSS_ROW * max(rows - 1, 0),
                       units="points")  # fmt: skip


def _not_finite_handles(axis) -> list[Line2D]:
    """The legend entry of the crosses :func:`draw_family` put at steps with a value that is
    not finite, when ``axis`` has them."""
    labels = {line.get_label() for line in axis.get_lines()}
    if RUN_CROSSES_LABEL in labels:  # the runs' colours: the entry grey, as the keys'
        return [Line2D([], [], **{**NOT_FINITE_STYLE, "color": "0.3",
                                  "label": RUN_CROSSES_LABEL})]  # fmt: skip
    if NOT_FINITE_STYLE["label"] in labels:
        return [Line2D([], [], **NOT_FINITE_STYLE)]
    return []
