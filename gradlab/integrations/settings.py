"""The options every framework callback takes, checked one way: a log folder, a key prefix and
the Monitor's options (a :class:`~gradlab.monitor.config.MonitorConfig` or its fields)."""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gradlab.errors import GradlabError, caller_stacklevel
from gradlab.monitor.config import PRESETS, MonitorConfig
from gradlab.paths import check_output_folder

__all__ = ["callback_settings", "closed_during_training_message", "resumed_behind_message",
           "warn_closed_during_training", "warn_overwrite_on_resumed_trainer"]


def callback_settings(
    log_dir: str | Path | None,
    prefix: object,
    options: MonitorConfig | None,
    monitor_options: dict[str, Any],
    *,
    callback: str = "the callback",
    own: tuple[str, ...] = ("log_dir", "prefix", "options"),
) -> tuple[Path | None, str, MonitorConfig]:
    """The checked ``(log_dir, prefix, options)`` of a callback, before any training starts.

    Args:
        log_dir: the Monitor's folder, or ``None`` (the callback picks one when training starts).
        prefix: key prefix of the values the callback hands to the framework's loggers.
        options: the Monitor's options as one :class:`MonitorConfig`, or ``None``.
        monitor_options: the Monitor's options as keywords (only without ``options``).
        callback: the callback's name, and ``own`` its own keywords, for the message that
            refuses an unknown keyword (with the closest name, where one is close).

    Raises:
        GradlabError: ``log_dir`` is a file, an unknown or bad Monitor option, ``options`` given
            with keywords or not a MonitorConfig, a prefix that is not a string.

    Example:
        >>> _, prefix, options = callback_settings(None, "gradlab/", None, {"preset": "cheap"})
        >>> prefix, options.preset
        ('gradlab/', 'cheap')
    """
    unknown = sorted(set(monitor_options) - set(MonitorConfig.names()))
    if unknown:  # a typo of the callback's own keywords: named among them too
        known = [*own, *MonitorConfig.names()]
        close = [f"{match!r} for {name!r}" for name in unknown
                 for match in difflib.get_close_matches(name, known, n=1)]  # fmt: skip
        raise GradlabError(
            f"{callback} takes its own {list(own)} and the Monitor's options "
            f"{MonitorConfig.names()}; got {unknown}"
            + (f" (did you mean {', '.join(close)}?)" if close else "")
        )
    if isinstance(log_dir, str) and log_dir in PRESETS and not Path(log_dir).exists():
        warnings.warn(  # GradlabTrainerCallback("full"): log_dir is the first argument
            f"{callback}: log_dir {log_dir!r} is the name of a preset; the run is written to "
            f"the folder {log_dir!r}. To choose the preset, pass preset={log_dir!r} (log_dir "
            "is the first argument)", UserWarning, stacklevel=caller_stacklevel())
    if log_dir is not None:
        log_dir = check_output_folder(log_dir, argument="log_dir")
    if options is None:
        options = MonitorConfig.of(monitor_options)  # the Monitor's own check of the values
    elif not isinstance(options, MonitorConfig) or monitor_options:
        raise GradlabError(
            "options must be a MonitorConfig, given without other Monitor options; got "
            f"{options!r} and {sorted(monitor_options)}"
        )
    if not isinstance(prefix, str):
        raise GradlabError(f"prefix must be a string; got {prefix!r}")
    return log_dir, prefix, options


def resumed_behind_message(callback: str, folder: object, last: int, first: int,
                           resume_trainer: str | None) -> str:  # fmt: skip
    """What a callback says when ``resume=True`` continues a run whose last logged step
    ``last`` lies at or past the Trainer's first step ``first``: those steps are logged again
    after the earlier ones. ``resume_trainer`` is how the user resumes the Trainer too, or None
    when the Trainer was resumed, from a checkpoint before the run's end (at step ``first``).

    Example:
        >>> resumed_behind_message("GradlabCallback", "runs/a", 1, 0, "fit(ckpt_path=...)")[:58]
        "GradlabCallback: resume=True continues the run in 'runs/a'"
        >>> resumed_behind_message("GradlabCallback", "runs/a", 5, 3, None)[-75:]
        'gradlab plot draws the later records of those steps in place of the earlier'
    """
    steps = f"step {first}" if first == last else f"steps {first}-{last}"
    starts = (f"the Trainer resumes from a checkpoint at step {first}" if resume_trainer is None
              else f"but the Trainer starts at step {first}")  # fmt: skip
    advice = ("" if resume_trainer is None else f"; resume the Trainer too ({resume_trainer}), "
              "or pass overwrite=True to start the folder afresh")  # fmt: skip
    return (
        f"{callback}: resume=True continues the run in {str(folder)!r}, whose last logged step "
        f"is {last}, {'and ' if resume_trainer is None else ''}{starts}: its {steps} will be "
        "logged again after the earlier ones, and gradlab plot draws the later records of those "
        f"steps in place of the earlier{advice}"
    )


def warn_overwrite_on_resumed_trainer(
    callback: str, monitor: object, first: int, packages: Iterable[str]
) -> None:
    """Warn when ``overwrite=True`` is about to replace a run with records while the Trainer
    resumes from a checkpoint at step ``first`` (> 0): the records of the steps before the
    checkpoint would go with it (at the Monitor's first record), leaving a log that starts
    mid-run. Nothing is removed yet when it warns; ``resume=True`` keeps them.

    Example:
        >>> import tempfile, gradlab
        >>> with gradlab.Monitor(tempfile.mkdtemp(), preset="cheap", overwrite=True) as monitor:
        ...     warn_overwrite_on_resumed_trainer("GradlabCallback", monitor, 0, ())  # step 0
    """
    replaced = monitor.folder.previous.get("overwrite", ())
    if first <= 0 or not any(path.name == "metrics.jsonl" for path in replaced):
        return
    warnings.warn(
        f"{callback}: overwrite=True will replace the run in {str(monitor.log_dir)!r} while the "
        f"Trainer resumes from a checkpoint at step {first}: the records of the steps before "
        "it go with the old files at the first new record, and the log starts mid-run; "
        f"{callback}(resume=True) keeps them and continues after them",
        RuntimeWarning,
        stacklevel=caller_stacklevel(frozenset(packages)),
    )


def closed_during_training_message(callback: str, folder: object, step: int) -> str:
    """What a callback says, once, when its Monitor was closed by hand while the Trainer trains
    (``callback.monitor.close()`` in a loop or another callback): the training goes on, and the
    steps from ``step`` on are not logged.

    Example:
        >>> closed_during_training_message("GradlabCallback", "runs/a", 3)[:62]
        "GradlabCallback: its Monitor of 'runs/a' was closed by close()"
    """
    return (
        f"{callback}: its Monitor of {str(folder)!r} was closed by close() during training, "
        f"before step {step}: training goes on and the steps from {step} on are not logged; "
        "the callback closes its Monitor itself when training ends (to log fewer steps, give "
        f"{callback}(every=n))"
    )


def warn_closed_during_training(callback: str, monitor: object, packages: Iterable[str]) -> None:
    """Warn (:func:`closed_during_training_message`) that the Monitor of the callback named
    ``callback`` was closed by hand while its Trainer trains, pointing at the first frame
    outside gradlab and ``packages`` (the trainer's call); the callback warns once per Monitor.
    """
    warnings.warn(
        closed_during_training_message(callback, monitor.log_dir, monitor.step_count),
        RuntimeWarning,
        stacklevel=caller_stacklevel(frozenset(packages)),
    )
