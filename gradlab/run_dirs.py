"""Run folders written by :class:`gradlab.Monitor`, found and checked before anything is read.

``gradlab plot`` refuses a missing run, a repeated run or a bad label here, before it imports
matplotlib or torch: a mistyped folder is one line, at once. :mod:`gradlab.plotting.monitor`
checks its arguments with the same functions (and makes them importable from there).

A run folder holds ``metrics.jsonl``; a path to that file stands for its folder.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path

from gradlab.errors import GradlabError

__all__ = ["check_run_dirs", "check_runs_and_labels", "default_out", "run_folder"]


FIGURE_LIST = ".gradlab-figures.json"
"""The file in a figures folder that lists the figures the last plot wrote there: the next
plot removes those it does not write again (a family of a run replaced since, a quantity of
one's own that the new logs do not hold), and a glob of run folders that matches the folder
leaves it out (``gradlab plot``)."""


CALLBACK_FOLDER = "gradlab_logs"
"""The folder that gradlab's training callbacks put the Monitor's run in, under the trainer's
own (``<trainer.log_dir>/gradlab_logs``, ``<args.output_dir>/gradlab_logs``): it names no run,
so ``gradlab plot`` labels such a run by the folders around it."""


def run_folder(path: str | Path) -> Path:
    """The run folder of ``path``: the folder itself, or the folder of a ``metrics.jsonl`` file.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "metrics.jsonl").write_text("")
        >>> run_folder(folder / "metrics.jsonl") == run_folder(folder) == folder
        True
    """
    path = Path(path)
    return path.parent if path.name == "metrics.jsonl" and path.is_file() else path


def check_runs_and_labels(
    run_dirs: Sequence[str | Path],
    labels: Sequence[str] | None,
    *,
    runs_argument: str = "run_dirs",
    labels_argument: str = "labels",
) -> None:
    """Refuse runs and legend labels that cannot be drawn together; nothing is read.

    Args:
        run_dirs: the run folders (or their ``metrics.jsonl``), a non-empty list, each run once
            (a folder and its ``metrics.jsonl`` count as one).
        labels: one non-empty label per run, no two alike, or None (the folder names, see
            :func:`gradlab.plotting.monitor.load_runs`).
        runs_argument: how the error names ``run_dirs`` (``gradlab plot`` says ``RUN_DIR``).
        labels_argument: how the error names ``labels`` (``gradlab plot`` says ``--label``).

    Raises:
        GradlabError: naming the argument, what it got and what is allowed.

    Example:
        >>> check_runs_and_labels(["a", "b"], ["one"], labels_argument="--label")
        Traceback (most recent call last):
            ...
        gradlab.errors.GradlabError: --label must give one label per run (2); got 1: ['one']
    """
    if isinstance(run_dirs, (str, Path)) or len(run_dirs) == 0:
        raise GradlabError(f"{runs_argument} must be a non-empty list of run folders; "
                           f"got {run_dirs!r}")  # fmt: skip
    if labels is not None:
        if len(labels) != len(run_dirs):
            raise GradlabError(f"{labels_argument} must give one label per run ({len(run_dirs)});"
                               f" got {len(labels)}: {list(labels)!r}")  # fmt: skip
        _check_labels(labels, labels_argument)
    resolved = [run_folder(run_dir).resolve() for run_dir in run_dirs]
    repeated = sorted({str(path) for path in resolved if resolved.count(path) > 1})
    if repeated:  # the same run drawn twice is one run under two labels
        raise GradlabError(f"{runs_argument} must name each run once; got {', '.join(repeated)} "
                           f"more than once in {[str(d) for d in run_dirs]!r}")  # fmt: skip


def check_run_dirs(run_dirs: Sequence[str | Path], argument: str = "run_dir") -> None:
    """Refuse a run folder without a ``metrics.jsonl`` (nothing is read but the header of a
    ``metrics.csv`` in its place, to tell gradlab's CSV sink from another logger's); a run's
    ``metrics.jsonl`` stands for its folder (:func:`run_folder`). ``gradlab plot`` calls it
    before looking at its default output folder, ``RUN_DIR/figures``.

    Raises:
        GradlabError: a folder without a ``metrics.jsonl``, or a file other than a
            ``metrics.jsonl``, named.

    Example:
        >>> check_run_dirs(["/no/such/run"])
        Traceback (most recent call last):
            ...
        gradlab.errors.GradlabError: run_dir must hold a metrics.jsonl written by gradlab.Monitor; got '/no/such/run', which does not exist
    """  # noqa: E501
    for run_dir in run_dirs:
        if Path(run_dir).is_file() and run_folder(run_dir) == Path(run_dir):
            raise GradlabError(f"{argument} must be a folder written by gradlab.Monitor; got the "
                               f"file {str(Path(run_dir))!r} (pass the run folder, the one that "
                               "holds metrics.jsonl)")  # fmt: skip
        if not (run_folder(run_dir) / "metrics.jsonl").is_file():
            log = run_folder(run_dir) / "metrics.jsonl"
            missing = (", which does not exist" if not Path(run_dir).exists()
                       else f", whose {log.name} is a folder, not a file" if log.is_dir()
                       else f", whose {log.name} is not a regular file" if log.exists()
                       else f", whose {log.name} is a link to {str(log.resolve())!r}, which "
                       "does not exist" if log.is_symlink()
                       else ", which holds no metrics.jsonl")  # fmt: skip
            table = run_folder(run_dir) / "metrics.csv"
            first = _first_column(table) if table.is_file() else None
            if first == "step":  # a run logged to gradlab's CSV sink alone
                missing = (", which holds a metrics.csv only (gradlab plot reads the JSONL "
                           "sink's metrics.jsonl: log with sinks=['jsonl', 'csv'])")  # fmt: skip
            elif first is not None:  # another logger's (Lightning's CSVLogger sorts its columns)
                missing = (f", whose metrics.csv is not a gradlab log (its first column is "
                           f"{first!r}, not gradlab's 'step': another logger wrote it, such as "
                           "Lightning's CSVLogger)")  # fmt: skip
            elif Path(run_dir).is_dir() and _tensorboard_run(run_folder(run_dir)):
                missing = (", which holds the event files of gradlab's TensorBoard sink only "
                           "(gradlab plot reads the JSONL sink's metrics.jsonl: log with "
                           "sinks=['jsonl', 'tensorboard'], and read these in TensorBoard)")
            raise GradlabError(
                f"{argument} must hold a metrics.jsonl written by gradlab.Monitor; "
                f"got {str(Path(run_dir))!r}{missing}{_runs_below(run_dir)}"
            )


def _tensorboard_run(folder: Path) -> bool:
    """Whether ``folder`` holds event files of gradlab's TensorBoard sink (a run logged to it
    without the JSONL sink)."""
    from gradlab.monitor.sinks import gradlab_event_files  # the error's path alone

    return bool(gradlab_event_files(folder))


def _first_column(table: Path) -> str | None:
    """The first column of ``table``'s header: gradlab's CSV sink writes ``step`` first, each
    record starting with it. ``"step"`` too for a file with no header yet (the sink opened it
    and logged nothing); None for one that cannot be read."""
    try:
        with table.open(encoding="utf-8", errors="replace", newline="") as handle:
            line = handle.readline(1 << 16)
    except OSError:
        return None
    return next(csv.reader([line]), ["step"])[0] if line.strip() else "step"


def _runs_below(folder: str | Path, depth: int = 2) -> str:
    """``"; runs below it: ..."`` naming the run folders up to ``depth`` levels below
    ``folder`` (a trainer's output folder holds its ``gradlab_logs``), else ``""``."""
    folder, found = Path(folder), []
    if folder.is_dir():
        for level in range(1, depth + 1):
            pattern = "/".join(["*"] * level) + "/metrics.jsonl"
            found += sorted(str(log.parent) for log in folder.glob(pattern))
    if not found:
        return ""
    shown = ", ".join(repr(path) for path in found[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return f"; runs below it: {shown}{more}"


def _check_labels(labels: Sequence[str], argument: str) -> None:
    """Each label a non-empty string, no two alike (a legend must tell the runs apart)."""
    for label in labels:
        if not isinstance(label, str) or not label.strip():
            raise GradlabError(f"{argument} must be non-empty strings; got {label!r} in "
                               f"{labels!r}")  # fmt: skip
    repeated = sorted({label for label in labels if list(labels).count(label) > 1})
    if repeated:
        raise GradlabError(
            f"{argument} must differ from each other; got {', '.join(map(repr, repeated))} more "
            f"than once in {list(labels)!r}"
        )


def default_out(paths: list[Path]) -> Path:
    """Where ``gradlab plot`` writes by default: ``RUN_DIR/figures``, or for several runs the
    ``figures`` folder of their common parent (a ``metrics.jsonl`` stands for its folder).

    Raises:
        GradlabError: several runs whose only common folder is the file system's root, or
            whose common parent's ``figures`` folder holds files and is not one an earlier
            ``gradlab plot`` wrote (a project's own ``figures/``, reached from runs in
            different folders): their figures would be mixed into it.

    Example:
        >>> from pathlib import Path
        >>> default_out([Path("runs/a")]).as_posix()
        'runs/a/figures'
    """
    paths = [run_folder(path) for path in paths]
    if len(paths) == 1:
        return paths[0] / "figures"
    parent = Path(os.path.commonpath([str(path.resolve()) for path in paths]))
    if parent == Path(parent.anchor):  # runs in unrelated trees: not a /figures folder
        raise GradlabError(f"the runs {[str(path) for path in paths]} share no folder but the "
                           f"file system's root {parent.anchor!r}, where their figures would "
                           "go by default: name the output folder (--out, or out=)")  # fmt: skip
    figures = parent / "figures"
    if figures.is_dir() and not (figures / FIGURE_LIST).exists() and any(figures.iterdir()):
        raise GradlabError(f"the runs {[str(path) for path in paths]} would put their figures "
                           f"in {str(figures)!r}, their common parent's figures folder, which "
                           "holds files gradlab plot did not write: name the output folder "
                           "(--out, or out=)")  # fmt: skip
    return figures
